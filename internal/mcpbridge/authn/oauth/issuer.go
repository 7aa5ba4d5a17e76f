package oauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/go-logr/logr"

	"github.com/mcp-operator/mcp-operator/internal/identity"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
)

// Algorithms are the signature algorithms accepted: asymmetric only. none
// and the HMAC family (whose "key" an attacker could take from the JWKS)
// are refused before any key is looked at.
var Algorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

// maxDocumentBytes bounds what is read of a discovery document, a JWKS or
// an introspection answer.
const maxDocumentBytes = 1 << 20

// issuer is one configured issuer at run time.
type issuer struct {
	url          string
	discoveryURL string
	mapper       *identity.Mapper
	// audiences the configuration accepts besides the bridge's resource.
	audiences []string
	resource  *Resource
	client    *http.Client
	keys      *keySet
	leeway    time.Duration
	// introspectionURL, clientID and secret: set when this issuer answers
	// for opaque tokens (RFC 7662).
	introspection *introspection

	// endpointOpts check the URLs the discovery document gives as an
	// issuer's own URL is checked (https, or loopback, or http allowed).
	endpointOpts []identity.Option
	log          logr.Logger

	mu   sync.Mutex
	meta *serverMetadata // the discovery document, once read
}

// serverMetadata is what the bridge reads of an OIDC discovery document or
// RFC 8414 authorization server metadata.
type serverMetadata struct {
	Issuer                string `json:"issuer"`
	JWKSURI               string `json:"jwks_uri"`
	IntrospectionEndpoint string `json:"introspection_endpoint"`
	// TokenEndpoint is where the bridge may exchange this issuer's tokens
	// for a server's (RFC 8693).
	TokenEndpoint string `json:"token_endpoint"`
}

func newIssuer(j identity.JWTAuthenticator, res *Resource, o Options) (*issuer, error) {
	mapper, err := identity.NewMapper(j)
	if err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if ca := j.Issuer.CertificateAuthority; ca != "" {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM([]byte(ca))
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	iss := &issuer{
		url: j.Issuer.URL, discoveryURL: j.Issuer.DiscoveryURL, mapper: mapper,
		audiences: j.Issuer.Audiences, resource: res, leeway: o.Leeway, log: o.Log,
		client: &http.Client{Transport: transport, Timeout: o.FetchTimeout,
			// The issuer's documents are where it says they are; a
			// redirect is not followed to somewhere else.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	}
	if o.AllowHTTP {
		iss.endpointOpts = []identity.Option{identity.AllowInsecureIssuers()}
	}
	iss.keys = &keySet{fetch: iss.fetchKeys, minRefresh: o.MinKeyRefresh, maxAge: o.MaxKeyAge, now: o.Now}
	if in := j.Issuer.Introspection; in != nil {
		if iss.introspection, err = newIntrospection(in); err != nil {
			return nil, fmt.Errorf("issuer %s: %w", j.Issuer.URL, err)
		}
	}
	return iss, nil
}

// verify checks a JWT this issuer signed (by its unverified iss) and maps
// its claims. Every refusal wraps authn.ErrUnauthenticated with the reason.
func (iss *issuer) verify(ctx context.Context, tok *jwt.JSONWebToken, now time.Time) (verified, error) {
	header := tok.Headers[0]
	candidates, err := iss.keys.lookup(ctx, header.KeyID)
	if err != nil {
		return verified{}, err
	}
	var std jwt.Claims
	var raw map[string]any
	var used *keyRef
	for _, c := range candidates {
		if c.key.Algorithm != "" && c.key.Algorithm != header.Algorithm {
			err = refused("the token's algorithm %s is not its key's (%s)", header.Algorithm, c.key.Algorithm)
			continue
		}
		switch err = tok.Claims(c.key.Key, &std, &raw); {
		case err == nil:
			used = &c.ref
		case errors.Is(err, jose.ErrCryptoFailure):
			err = refused("the signature does not verify")
			continue
		default:
			// Signed by this key, but the claims are not what a JWT's
			// must be (exp a string, aud a number...).
			return verified{}, refused("the token's claims are malformed: %s", strings.TrimPrefix(err.Error(), "go-jose/go-jose/jwt: "))
		}
		break
	}
	if used == nil {
		return verified{}, err
	}
	if std.Expiry == nil {
		return verified{}, refused("the token has no exp: it would never expire")
	}
	if err := std.ValidateWithLeeway(jwt.Expected{Issuer: iss.url, Time: now}, iss.leeway); err != nil {
		return verified{}, refused("%s", strings.TrimPrefix(err.Error(), "go-jose/go-jose/jwt: "))
	}
	if err := iss.accessTokenFor(std.Audience, typeOf(header), raw); err != nil {
		return verified{}, err
	}
	id, err := iss.mapper.Identity(raw)
	if err != nil {
		return verified{}, fmt.Errorf("%w: %w", authn.ErrUnauthenticated, err)
	}
	return verified{id: id, expires: std.Expiry.Time(), key: used, scopes: scopesOf(raw)}, nil
}

// typeOf is a JWS header's typ, "" when it has none.
func typeOf(h jose.Header) string {
	t, _ := h.ExtraHeaders[jose.HeaderType].(string)
	return t
}

// isAccessTokenType says whether typ is RFC 9068's at+jwt (media types are
// case-insensitive, and the application/ prefix may be written out).
func isAccessTokenType(typ string) bool {
	t := strings.ToLower(typ)
	return t == "at+jwt" || t == "application/at+jwt"
}

// accessTokenFor says why a signed token is not an access token for this
// bridge, nil when it is one. Its aud must name the bridge's resource, or
// an audience the configuration accepts. An OIDC ID token is signed by the
// same keys and, when the configured audience is a client id, names it in
// aud: so a token with the marks of an ID token (nonce, at_hash) is never
// taken for an access token unless its typ says at+jwt, and a token that
// names only a configured audience (no resource) must say at+jwt; a
// client's ID token would otherwise sign anyone it was shown to in.
func (iss *issuer) accessTokenFor(aud []string, typ string, claims map[string]any) error {
	atJWT := isAccessTokenType(typ)
	if !atJWT {
		for _, mark := range []string{"nonce", "at_hash"} {
			if _, ok := claims[mark]; ok {
				return refused("the token has %s and its typ is %q, not at+jwt: it is an ID token, not an access token", mark, typ)
			}
		}
	}
	byResource, byAudience := iss.audienceMatch(aud)
	switch {
	case byResource:
		return nil
	case byAudience && atJWT:
		return nil
	case byAudience:
		return refused("the token names a configured audience but not this bridge (%s), and its typ is %q, not at+jwt: it may be an ID token", iss.resource.URL, typ)
	}
	return refused("the token's audience %q does not name this bridge (%s)", aud, iss.resource.URL)
}

// verified is an accepted token.
type verified struct {
	id      identity.Identity
	expires time.Time
	// key is the key that signed it (nil for an introspected token): the
	// token stops being accepted from the cache when the issuer drops it.
	key    *keyRef
	scopes []string
}

// audienceMatch: whether one of aud is the bridge's resource (RFC 8707),
// and whether one is an audience the configuration accepts explicitly.
func (iss *issuer) audienceMatch(aud []string) (byResource, byAudience bool) {
	for _, a := range aud {
		if iss.resource.Accepts(a) {
			byResource = true
		}
		if slices.Contains(iss.audiences, a) {
			byAudience = true
		}
	}
	return byResource, byAudience
}

// scopesOf reads the token's scopes: scope, space-separated (RFC 9068,
// RFC 8693), or scp, a list (as some issuers write it).
func scopesOf(claims map[string]any) []string {
	if s, ok := claims["scope"].(string); ok {
		return strings.Fields(s)
	}
	var out []string
	switch v := claims["scp"].(type) {
	case string:
		out = strings.Fields(v)
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", authn.ErrUnauthenticated, fmt.Sprintf(format, args...))
}

// metadata reads the issuer's discovery document once: OIDC discovery at
// the issuer's /.well-known/openid-configuration, else RFC 8414's
// /.well-known/oauth-authorization-server (or the configured discoveryURL).
// Its issuer must be the configured one exactly.
func (iss *issuer) metadata(ctx context.Context) (*serverMetadata, error) {
	iss.mu.Lock()
	m := iss.meta
	iss.mu.Unlock()
	if m != nil {
		return m, nil
	}
	var candidates []string
	if iss.discoveryURL != "" {
		candidates = []string{iss.discoveryURL}
	} else {
		u, err := url.Parse(iss.url)
		if err != nil {
			return nil, err
		}
		path := strings.TrimSuffix(u.Path, "/")
		candidates = []string{
			strings.TrimSuffix(iss.url, "/") + "/.well-known/openid-configuration",
			u.Scheme + "://" + u.Host + "/.well-known/oauth-authorization-server" + path,
		}
	}
	var errs []error
	for _, c := range candidates {
		var doc serverMetadata
		if err := iss.getJSON(ctx, c, &doc); err != nil {
			errs = append(errs, err)
			continue
		}
		if doc.Issuer != iss.url {
			return nil, fmt.Errorf("the discovery document at %s names the issuer %q, not %q", c, doc.Issuer, iss.url)
		}
		iss.mu.Lock()
		iss.meta = &doc
		iss.mu.Unlock()
		return &doc, nil
	}
	return nil, fmt.Errorf("while reading issuer %s's discovery document: %w", iss.url, errors.Join(errs...))
}

// fetchKeys reads the issuer's JWKS from its discovery document's jwks_uri.
// Each key is read on its own: a key of a type the bridge cannot use (an
// X25519 encryption key, a curve go-jose lacks) is skipped, not a reason
// to refuse the set and with it every token.
func (iss *issuer) fetchKeys(ctx context.Context) ([]jose.JSONWebKey, error) {
	meta, err := iss.metadata(ctx)
	if err != nil {
		return nil, err
	}
	if meta.JWKSURI == "" {
		return nil, fmt.Errorf("issuer %s's discovery document has no jwks_uri", iss.url)
	}
	if err := identity.ValidateEndpointURL("the discovery document's jwks_uri", meta.JWKSURI, iss.endpointOpts...); err != nil {
		return nil, err
	}
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := iss.getJSON(ctx, meta.JWKSURI, &doc); err != nil {
		return nil, err
	}
	keys := make([]jose.JSONWebKey, 0, len(doc.Keys))
	for n, raw := range doc.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			iss.log.V(1).Info("a key of the issuer's JWKS is skipped", "issuer", iss.url, "index", n, "why", err.Error())
			continue
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// getJSON GETs a document of the issuer's.
func (iss *issuer) getJSON(ctx context.Context, u string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := iss.client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	return decodeAnswer(resp, u, into, maxDocumentBytes)
}

// decodeAnswer reads a 200 answer's JSON, within limit bytes.
func decodeAnswer(resp *http.Response, u string, into any, limit int64) error {
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, limit))
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, limit)).Decode(into); err != nil {
		return fmt.Errorf("%s: %w", u, err)
	}
	return nil
}
