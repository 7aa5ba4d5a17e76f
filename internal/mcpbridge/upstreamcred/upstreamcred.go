// Package upstreamcred picks the credential a caller's call to a remote
// server carries: the server's shared one, a token exchanged for the
// caller's own (RFC 8693), or the caller's own Secret. The caller's own
// bearer token is only ever the subject of an exchange: it is never sent
// to a server, kept beside no other caller's, and never logged.
//
// Exchanged tokens are cached per caller, per token the caller presented
// and per server, until shortly before they expire or the caller's
// session ends (a caller's expired token is refused by the bridge, so its
// entry is never looked up again): a caller's calls cost one exchange per
// token lifetime, concurrent first calls of one caller share one
// exchange, and no entry is ever looked up by another caller. Every
// value handed out stays known to the server's redactor (Redactor) while
// it may still be echoed back.
package upstreamcred

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/k8s/apiretry"
	"github.com/mcp-operator/mcp-operator/internal/redact"
)

// Kind is which credential a call carried upstream: audit events and
// spans name it, never the value.
type Kind string

// The kinds.
const (
	// None: the server takes no credential of the bridge's (an in-cluster
	// server, or a remote one without auth).
	None Kind = ""
	// Shared: spec.remote.auth.bearerTokenSecretRef, every caller alike.
	Shared Kind = "shared"
	// Exchanged: a token exchanged for the caller's own (tokenExchange).
	Exchanged Kind = "exchanged"
	// PerCaller: the caller's own Secret (perCallerSecret).
	PerCaller Kind = "perCaller"
)

// KindOf is the kind of credential a caller's call to a server with
// spec.remote r carries.
func KindOf(r *v1alpha1.Remote) Kind {
	switch {
	case r == nil || r.Auth == nil:
		return None
	case r.Auth.TokenExchange != nil:
		return Exchanged
	case r.Auth.PerCallerSecret != nil:
		return PerCaller
	case r.Auth.BearerTokenSecretRef != nil:
		return Shared
	}
	return None
}

// OwnPerCaller says whether calls to a server with spec.remote r go on a
// connection of the caller's own: its credential is the caller's.
func OwnPerCaller(r *v1alpha1.Remote) bool {
	k := KindOf(r)
	return k == Exchanged || k == PerCaller
}

// Server is the remote server a credential is for.
type Server struct {
	Namespace, Name string
	Remote          *v1alpha1.Remote
}

func (s Server) key() string { return s.Namespace + "/" + s.Name }

// Caller is who calls, with the bearer token it presented to the bridge.
type Caller struct {
	// Username is the caller's identity as policies name it.
	Username string
	// Token is the caller's own bearer token: the subject of an exchange,
	// never sent upstream.
	Token string
}

// Credential is what a caller's call carries upstream.
type Credential struct {
	Kind Kind
	// Header holds the header(s) to set: Authorization, or the
	// perCallerSecret's header.
	Header http.Header
	// Expires is when an exchanged token expires (zero: not known).
	Expires time.Time
}

// Reasons a credential could not be had: the reason of tool.failed.
const (
	// ReasonMissing: the caller has no Secret of its own for the server
	// (or several, or one without the key), or presented no token to
	// exchange.
	ReasonMissing = "credential_missing"
	// ReasonExchangeFailed: the token endpoint refused the exchange.
	ReasonExchangeFailed = "token_exchange_failed"
	// ReasonUnavailable: the exchange could not be made (the bridge's
	// client Secret is missing, the token endpoint did not answer or
	// answered something unusable).
	ReasonUnavailable = "credential_unavailable"
)

// Error is a credential the call could not have: nothing is forwarded.
// Its message names the server and, for a refused exchange, the
// authorization server's error code; never a token, and never the
// server's error_description (it may quote what it was sent).
type Error struct {
	Server string
	Reason string
	// Code is the token endpoint's RFC 6749 error code, when it gave one.
	Code string
	Msg  string
	// Transient: the credential could not be had for now (the token
	// endpoint or the API server not reached or not answering), and may
	// be next time; otherwise it fails the same until someone changes it
	// (the server's spec, a Secret, the bridge's flags).
	Transient bool
}

func (e *Error) Error() string { return e.Msg }

// Options tune a Store.
type Options struct {
	// Secrets reads the bridge's client Secret and callers' Secrets.
	Secrets client.Reader
	// HTTP is the client of the token endpoints (nil: one with a 10s
	// timeout). Redirects are never followed, whatever it says: a
	// redirected exchange would post the caller's token and the bridge's
	// client secret to wherever the endpoint points.
	HTTP *http.Client
	// TokenEndpoints are token endpoints the bridge exchanges at besides
	// the issuers' own (--token-exchange-endpoints): for callers whose
	// tokens no configured issuer signs, such as ServiceAccounts.
	TokenEndpoints []string
	// IssuerTokenEndpoint is the token_endpoint that the discovery
	// document of the issuer that accepted callerToken names ("" for a
	// token no configured issuer accepted). nil: no issuer is configured.
	IssuerTokenEndpoint func(ctx context.Context, callerToken string) string
	// Clock tells the time (time.Now when nil).
	Clock func() time.Time
	// SecretTTL is how long a caller's Secret is used before it is read
	// again (default 30s): a removed Secret stops working within it.
	SecretTTL time.Duration
}

// Store hands out callers' credentials. Safe for concurrent use.
type Store struct {
	opts   Options
	flight singleflight.Group

	mu sync.Mutex
	// tokens are exchanged tokens and callers' Secret values by entry key
	// (entryKey): never looked up but for the caller and token they were
	// made for.
	tokens map[string]*entry
	// sessions are the entry keys each caller's session used, forgotten
	// when it ends (Forget).
	sessions map[string][]string
	// servers are each server's values handed out (*serverValues), by
	// namespace/name: read without st.mu by every redaction of every
	// server's output, so a server none was handed out for costs nothing.
	servers sync.Map
	// retired are values replaced by newer ones (a refresh), still known to
	// the redactor until their forgetAt.
	retired   []*entry
	lastSweep time.Time
	// refused are the exchanges the token endpoint refused lately, by entry
	// key: the caller's calls get the same refusal for refusedFor rather
	// than each ask the endpoint again.
	refused map[string]refusal
	// clients are the exchange clients' Secrets as last read, by
	// namespace/name, used for SecretTTL: many callers' first calls at
	// once cost one read.
	clients map[string]clientSecret
}

// refusal is a refused exchange and until when it stands.
type refusal struct {
	err   *Error
	until time.Time
}

// clientSecret is an exchange client's id and secret, and when they were
// read.
type clientSecret struct {
	id, secret string
	read       time.Time
}

// entry is one credential handed out.
type entry struct {
	server string
	cred   Credential
	// value is the secret in cred (redacted from what the server says).
	value string
	// refreshAt is when the next call gets a new one; forgetAt when the
	// value is dropped from the redactor too.
	refreshAt, forgetAt time.Time
}

// serverValues says when the values handed out for one server changed,
// and holds its redactor with them.
type serverValues struct {
	// version counts the changes (made under Store.mu).
	version atomic.Int64
	memo    atomic.Pointer[redactorMemo]
	// building is held while the redactor is rebuilt (tens of
	// milliseconds with a thousand callers' values), outside Store.mu:
	// the callers that find it stale meanwhile wait and take the next
	// build, which has their values too, so many new callers at once cost
	// one or two builds, not one each.
	building sync.Mutex
}

// redactorMemo is a server's redactor with its callers' values, and the
// base and version it was built from.
type redactorMemo struct {
	base    *redact.Redactor
	version int64
	r       *redact.Redactor
}

// changedLocked counts a change of the values handed out for server.
// st.mu is held.
func (st *Store) changedLocked(server string) {
	v, _ := st.servers.LoadOrStore(server, &serverValues{})
	v.(*serverValues).version.Add(1)
}

// Defaults.
const (
	DefaultSecretTTL = 30 * time.Second
	// defaultLifetime is how long an exchanged token without expires_in is
	// used.
	defaultLifetime = 5 * time.Minute
	// refreshBefore is how long before an exchanged token expires it is
	// refreshed (at most a tenth of its lifetime).
	refreshBefore = time.Minute
	// redactAfter is how long a value stays known to the redactor after it
	// is no longer handed out: a server may still echo it.
	redactAfter = 15 * time.Minute
	// refusedFor is how long a refused exchange is answered from memory.
	refusedFor = 5 * time.Second
	// exchangeTimeout bounds one exchange.
	exchangeTimeout = 10 * time.Second
	// sweepEvery is how often entries past forgetAt are swept.
	sweepEvery = time.Minute
)

// New returns a Store.
func New(o Options) *Store {
	if o.HTTP == nil {
		o.HTTP = &http.Client{Timeout: exchangeTimeout}
	}
	// A copy of the caller's client: its other settings are kept, and the
	// redirect rule is the Store's own.
	hc := *o.HTTP
	hc.CheckRedirect = refuseRedirect
	o.HTTP = &hc
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.SecretTTL <= 0 {
		o.SecretTTL = DefaultSecretTTL
	}
	return &Store{opts: o, tokens: map[string]*entry{}, sessions: map[string][]string{}, clients: map[string]clientSecret{}, refused: map[string]refusal{}}
}

// Credential is the credential caller's call to s carries, for a server
// whose kind is Exchanged or PerCaller; session names the caller's
// session ("" for none): its entries are forgotten when it ends. A
// failure is an *Error.
func (st *Store) Credential(ctx context.Context, s Server, c Caller, session string) (Credential, error) {
	kind := KindOf(s.Remote)
	if kind != Exchanged && kind != PerCaller {
		return Credential{}, fmt.Errorf("server %s has no per-caller credential", s.key())
	}
	key := entryKey(s, c, kind)
	now := st.opts.Clock()
	st.mu.Lock()
	st.sweepLocked(now)
	if e := st.tokens[key]; e != nil && now.Before(e.refreshAt) {
		st.usedLocked(session, key)
		st.mu.Unlock()
		return e.cred, nil
	}
	if r, ok := st.refused[key]; ok && now.Before(r.until) {
		st.mu.Unlock()
		return Credential{}, r.err
	}
	st.mu.Unlock()
	// Concurrent first calls (and refreshes) of one caller and token share
	// one exchange: its result is theirs alone, as the key is. It runs for
	// all of them: not cut short by the first one giving up, yet bounded.
	v, err, _ := st.flight.Do(key, func() (any, error) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), exchangeTimeout)
		defer cancel()
		var e *entry
		var err error
		if kind == Exchanged {
			e, err = st.exchange(fctx, s, c)
		} else {
			e, err = st.callerSecret(fctx, s, c)
		}
		var refused *Error
		if errors.As(err, &refused) && refused.Reason == ReasonExchangeFailed && !refused.Transient {
			// A refusal for now is not remembered: the call it fails says
			// to send it again, which asks the endpoint again.
			st.mu.Lock()
			st.refused[key] = refusal{err: refused, until: st.opts.Clock().Add(refusedFor)}
			st.mu.Unlock()
		}
		if err != nil {
			return nil, err
		}
		if exp := tokenExpiry(c.Token); !exp.IsZero() && exp.Before(e.refreshAt) {
			// Never used past the caller's own token: a call presenting
			// it later is refused by the bridge, and no entry outlives it.
			e.refreshAt = exp
		}
		e.server = s.key()
		st.mu.Lock()
		if old := st.tokens[key]; old != nil && old.value != e.value {
			st.retired = append(st.retired, old)
		}
		st.tokens[key] = e
		st.changedLocked(e.server)
		st.mu.Unlock()
		return e.cred, nil
	})
	if err != nil {
		return Credential{}, err
	}
	// Each waiter's session, not only the one whose call made the
	// exchange.
	st.mu.Lock()
	st.usedLocked(session, key)
	st.mu.Unlock()
	return v.(Credential), nil
}

// usedLocked records that session used the entry key: every session that
// used an entry forgets it when it ends, whichever ends first. st.mu is
// held.
func (st *Store) usedLocked(session, key string) {
	if session != "" && !slices.Contains(st.sessions[session], key) {
		st.sessions[session] = append(st.sessions[session], key)
	}
}

// tokenExpiry is the exp of a caller's token that is a JWT (zero for one
// that is not, or has none). The bridge accepted this exact token before
// the credential stage ran, so its claims are the issuer's; they are read
// here only to bound how long what was got for it is used.
func tokenExpiry(token string) time.Time {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}
	}
	var claims struct {
		Exp json.Number `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return time.Time{}
	}
	sec, err := claims.Exp.Float64()
	if err != nil || sec <= 0 {
		return time.Time{}
	}
	return time.Unix(int64(sec), 0)
}

// Forget drops the credentials handed out in a caller's session, which
// ended: its next session exchanges again. Their values stay known to the
// redactor a while (redactAfter).
func (st *Store) Forget(session string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := st.opts.Clock()
	for _, key := range st.sessions[session] {
		if e := st.tokens[key]; e != nil && now.Before(e.refreshAt) {
			e.refreshAt = now
			e.forgetAt = now.Add(redactAfter)
		}
	}
	delete(st.sessions, session)
}

// entryKey keeps every entry to one caller, one token it presented and one
// server's settings: the caller's name and a digest of its token (never
// the token), the server and what its exchange asks for.
func entryKey(s Server, c Caller, kind Kind) string {
	parts := []string{string(kind), c.Username, c.Token, s.Namespace, s.Name}
	// What of spec.remote.auth decides the credential: a change makes new
	// entries.
	if tx := s.Remote.Auth.TokenExchange; tx != nil {
		parts = append(parts, tx.TokenURL, tx.Audience, tx.Resource, tx.ClientSecretRef.Name, tx.SubjectTokenType)
		parts = append(parts, tx.Scopes...)
	}
	if pc := s.Remote.Auth.PerCallerSecret; pc != nil {
		parts = append(parts, pc.Key, pc.Header)
	}
	// Each part length-prefixed, so no two lists hash alike.
	buf := make([]byte, 0, 256)
	for _, p := range parts {
		buf = strconv.AppendInt(buf, int64(len(p)), 10)
		buf = append(buf, ':')
		buf = append(buf, p...)
	}
	sum := sha256.Sum256(buf)
	return string(sum[:])
}

// sweepLocked drops entries past forgetAt, once a sweepEvery. st.mu is
// held.
func (st *Store) sweepLocked(now time.Time) {
	if now.Sub(st.lastSweep) < sweepEvery {
		return
	}
	st.lastSweep = now
	for key, e := range st.tokens {
		if now.After(e.forgetAt) {
			delete(st.tokens, key)
			st.changedLocked(e.server)
		}
	}
	for key, r := range st.refused {
		if now.After(r.until) {
			delete(st.refused, key)
		}
	}
	kept := st.retired[:0]
	for _, e := range st.retired {
		if now.After(e.forgetAt) {
			st.changedLocked(e.server)
			continue
		}
		kept = append(kept, e)
	}
	clear(st.retired[len(kept):])
	st.retired = kept
}

// Redactor is base, the redactor of server (namespace/name) for its
// Secrets, with every credential value handed out for it to any caller:
// a server that echoes one caller's token to another is redacted too.
func (st *Store) Redactor(server string, base *redact.Redactor) *redact.Redactor {
	found, ok := st.servers.Load(server)
	if !ok {
		return base
	}
	sv := found.(*serverValues)
	fresh := func() *redact.Redactor {
		if m := sv.memo.Load(); m != nil && m.base == base && m.version == sv.version.Load() {
			return m.r
		}
		return nil
	}
	if r := fresh(); r != nil {
		return r
	}
	sv.building.Lock()
	defer sv.building.Unlock()
	if r := fresh(); r != nil {
		return r // built while this one waited
	}
	// The values are copied under st.mu; the redactor is built without it,
	// so no call's credential lookup waits on a build.
	st.mu.Lock()
	v := sv.version.Load()
	var values []string
	for _, e := range st.tokens {
		if e.server == server {
			values = append(values, e.value)
		}
	}
	for _, e := range st.retired {
		if e.server == server {
			values = append(values, e.value)
		}
	}
	st.mu.Unlock()
	r := base.With(values...)
	sv.memo.Store(&redactorMemo{base: base, version: v, r: r})
	return r
}

// Token exchange (RFC 8693).
const (
	grantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	// TokenTypeAccessToken is the default subject_token_type.
	TokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
)

// exchange posts the caller's token to the server's token endpoint
// (RFC 8693 section 2.1: the form, the bridge's client authenticated with
// HTTP Basic) and reads the access token it issues.
func (st *Store) exchange(ctx context.Context, s Server, c Caller) (*entry, error) {
	tx := s.Remote.Auth.TokenExchange
	if c.Token == "" {
		return nil, &Error{Server: s.key(), Reason: ReasonMissing, Msg: fmt.Sprintf("server %s takes each caller's own token, exchanged: this request carried no bearer token to exchange", s.key())}
	}
	if err := checkTokenURL(tx.TokenURL); err != nil {
		return nil, &Error{Server: s.key(), Reason: ReasonUnavailable, Msg: fmt.Sprintf("server %s: %v", s.key(), err)}
	}
	if !st.trusted(ctx, tx.TokenURL, c.Token) {
		return nil, &Error{Server: s.key(), Reason: ReasonUnavailable, Msg: fmt.Sprintf("server %s: its tokenExchange.tokenURL %s is not a token endpoint this bridge trusts (the token_endpoint of the issuer that signed the caller's token, or one of --token-exchange-endpoints): the caller's token is not sent there", s.key(), tx.TokenURL)}
	}
	id, secret, err := st.clientOf(ctx, s)
	if err != nil {
		return nil, err
	}
	subjectType := tx.SubjectTokenType
	if subjectType == "" {
		subjectType = TokenTypeAccessToken
	}
	params := url.Values{
		"grant_type":           {grantTokenExchange},
		"subject_token":        {c.Token},
		"subject_token_type":   {subjectType},
		"requested_token_type": {TokenTypeAccessToken},
	}
	if tx.Audience != "" {
		params.Set("audience", tx.Audience)
	}
	if tx.Resource != "" {
		params.Set("resource", tx.Resource)
	}
	cfg := clientcredentials.Config{
		ClientID: id, ClientSecret: secret, TokenURL: tx.TokenURL, Scopes: tx.Scopes,
		EndpointParams: params, AuthStyle: oauth2.AuthStyleInHeader,
	}
	// ctx is the flight's own, detached from the first caller (Credential).
	tok, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, st.opts.HTTP))
	if err != nil {
		return nil, exchangeError(s, err)
	}
	if !strings.EqualFold(tok.TokenType, "bearer") {
		return nil, &Error{Server: s.key(), Reason: ReasonUnavailable, Msg: fmt.Sprintf("server %s: the token endpoint issued a token of type %q, not a bearer access token", s.key(), safeCode(tok.TokenType))}
	}
	if tok.AccessToken == c.Token {
		// An endpoint that hands the caller's token back would have it
		// sent upstream.
		return nil, &Error{Server: s.key(), Reason: ReasonUnavailable, Msg: fmt.Sprintf("server %s: the token endpoint returned the caller's own token: it is never sent upstream", s.key())}
	}
	now := st.opts.Clock()
	expires := tok.Expiry
	if expires.IsZero() {
		expires = now.Add(defaultLifetime)
	}
	// The entry is keyed by the caller's token: once that token expires the
	// bridge refuses it, and the entry is never looked up again.
	lifetime := expires.Sub(now)
	refreshAt := expires.Add(-min(refreshBefore, lifetime/10))
	return &entry{
		cred:  Credential{Kind: Exchanged, Header: http.Header{"Authorization": {"Bearer " + tok.AccessToken}}, Expires: expires},
		value: tok.AccessToken, refreshAt: refreshAt, forgetAt: expires.Add(redactAfter),
	}, nil
}

// exchangeError says why an exchange failed: the server, and the token
// endpoint's error code where it gave one. The description and body are
// left out (an endpoint may quote the subject token in them).
func exchangeError(s Server, err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		code := safeCode(re.ErrorCode)
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		// An endpoint that is overloaded, restarting or behind a proxy
		// that lost it answers so for now, not for good.
		transient := status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout ||
			code == "temporarily_unavailable" || code == "server_error"
		if code == "" {
			return &Error{Server: s.key(), Reason: ReasonUnavailable, Transient: transient, Msg: fmt.Sprintf("server %s: the token endpoint answered the exchange with HTTP %d and no error code", s.key(), status)}
		}
		return &Error{Server: s.key(), Reason: ReasonExchangeFailed, Code: code, Transient: transient, Msg: fmt.Sprintf("server %s: the token endpoint refused to exchange the caller's token: %s", s.key(), code)}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		// The URL is the configured token URL (no token in it); the
		// transport's error says what failed.
		return &Error{Server: s.key(), Reason: ReasonUnavailable, Transient: true, Msg: fmt.Sprintf("server %s: the token endpoint could not be reached: %v", s.key(), ue.Err)}
	}
	return &Error{Server: s.key(), Reason: ReasonUnavailable, Msg: fmt.Sprintf("server %s: the token endpoint's answer was unusable", s.key())}
}

// safeCode is an RFC 6749 error code as it may be shown: its own
// characters (%x20-21 / %x23-5B / %x5D-7E), no spaces, at most 64 long;
// "" otherwise.
func safeCode(code string) string {
	if code == "" || len(code) > 64 {
		return ""
	}
	for i := 0; i < len(code); i++ {
		ch := code[i]
		if ch <= 0x20 || ch == '"' || ch == '\\' || ch > 0x7e {
			return ""
		}
	}
	return code
}

// refuseRedirect has a client hand back a redirect as the answer rather
// than follow it: the exchange's form (the caller's token) and the client's
// credentials are for the endpoint the bridge trusts alone.
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// trusted says whether the bridge exchanges callerToken at tokenURL: the
// token_endpoint of the issuer that accepted the token, or an endpoint the
// bridge's operator listed. Anyone who may write an MCPServer chooses its
// tokenURL: were any URL taken, they would collect every caller's token
// (replayable at the bridge) from their own endpoint.
func (st *Store) trusted(ctx context.Context, tokenURL, callerToken string) bool {
	if slices.Contains(st.opts.TokenEndpoints, tokenURL) {
		return true
	}
	if st.opts.IssuerTokenEndpoint == nil {
		return false
	}
	own := st.opts.IssuerTokenEndpoint(ctx, callerToken)
	return own != "" && own == tokenURL
}

// checkTokenURL holds the token URL to what the CRD allows (https, http on
// loopback only), for a spec that reached the bridge unvalidated.
func checkTokenURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return errors.New("tokenExchange.tokenURL is not an absolute URL")
	}
	switch h := u.Hostname(); {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && (h == "localhost" || h == "127.0.0.1" || h == "::1"):
		return nil
	}
	return errors.New("tokenExchange.tokenURL must be https (http only on a loopback address)")
}

// clientOf reads the bridge's client id and secret for s's exchange, read
// again after SecretTTL (a rotated secret is used within it).
func (st *Store) clientOf(ctx context.Context, s Server) (id, secret string, err error) {
	ref := s.Remote.Auth.TokenExchange.ClientSecretRef
	key := s.Namespace + "/" + ref.Name
	now := st.opts.Clock()
	st.mu.Lock()
	c, ok := st.clients[key]
	st.mu.Unlock()
	if ok && now.Sub(c.read) < st.opts.SecretTTL {
		return c.id, c.secret, nil
	}
	var sec corev1.Secret
	if err := st.opts.Secrets.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: ref.Name}, &sec); err != nil {
		return "", "", &Error{Server: s.key(), Reason: ReasonUnavailable, Transient: apiretry.Transient(err), Msg: fmt.Sprintf("server %s: the client Secret %s of its token exchange could not be read: %v", s.key(), ref.Name, err)}
	}
	id, secret = strings.TrimSpace(string(sec.Data["client_id"])), strings.TrimSpace(string(sec.Data["client_secret"]))
	if id == "" || secret == "" {
		return "", "", &Error{Server: s.key(), Reason: ReasonUnavailable, Msg: fmt.Sprintf("server %s: the client Secret %s of its token exchange needs the keys client_id and client_secret", s.key(), ref.Name)}
	}
	st.mu.Lock()
	st.clients[key] = clientSecret{id: id, secret: secret, read: now}
	st.mu.Unlock()
	return id, secret, nil
}

// callerSecret reads the caller's own Secret for s: the one Secret of the
// server's namespace labelled with the caller's label value whose
// annotation names the caller exactly (a digest collision, or a label
// copied onto another's Secret, is not enough).
func (st *Store) callerSecret(ctx context.Context, s Server, c Caller) (*entry, error) {
	pc := s.Remote.Auth.PerCallerSecret
	missing := func(why string) error {
		return &Error{Server: s.key(), Reason: ReasonMissing, Msg: fmt.Sprintf("server %s takes each caller's own Secret: %s (a Secret in namespace %s labelled %s=%s, annotated %s with the caller's user name, holding the key %s)",
			s.key(), why, s.Namespace, v1alpha1.CallerLabel, v1alpha1.CallerLabelValue(c.Username), v1alpha1.CallerNameAnnotation, pc.Key)}
	}
	var list corev1.SecretList
	if err := st.opts.Secrets.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingLabels{v1alpha1.CallerLabel: v1alpha1.CallerLabelValue(c.Username)}); err != nil {
		return nil, &Error{Server: s.key(), Reason: ReasonUnavailable, Transient: apiretry.Transient(err), Msg: fmt.Sprintf("server %s: the caller's Secret could not be looked up: %v", s.key(), err)}
	}
	var mine []corev1.Secret
	for _, sec := range list.Items {
		if sec.Annotations[v1alpha1.CallerNameAnnotation] == c.Username {
			mine = append(mine, sec)
		}
	}
	switch {
	case len(mine) == 0:
		return nil, missing("the caller has none")
	case len(mine) > 1:
		return nil, missing(fmt.Sprintf("the caller has %d, and which one to send is not clear", len(mine)))
	}
	value := strings.TrimSpace(string(mine[0].Data[pc.Key]))
	if value == "" {
		return nil, missing(fmt.Sprintf("the caller's Secret %s has no key %q", mine[0].Name, pc.Key))
	}
	h := http.Header{}
	if pc.Header == "" {
		h.Set("Authorization", "Bearer "+value)
	} else {
		h.Set(pc.Header, value)
	}
	now := st.opts.Clock()
	return &entry{cred: Credential{Kind: PerCaller, Header: h}, value: value, refreshAt: now.Add(st.opts.SecretTTL), forgetAt: now.Add(st.opts.SecretTTL + redactAfter)}, nil
}
