// Package oauth makes the bridge an OAuth 2.1 resource server: it accepts
// access tokens of the issuers an AuthenticationConfiguration names, beside
// the ServiceAccount tokens the API server reviews.
//
// A token is routed by what it says of itself, unverified: a JWT whose iss
// is a configured issuer is verified against that issuer's keys (go-jose;
// asymmetric algorithms only, exp/nbf with a small leeway, iss exact, aud
// naming the bridge) and its claims mapped to an identity; any other JWT
// (a ServiceAccount's) goes to the fallback, TokenReview; a token that is
// not a JWT goes to the issuer configured for RFC 7662 introspection, if
// any, else to the fallback. Results are cached by the token's hash, never
// past its expiry, and a cached token stops being accepted once a fetch of
// its issuer's keys (at most DefaultMaxKeyAge apart) no longer finds the
// key that signed it.
package oauth

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/go-logr/logr"

	"github.com/mcp-operator/mcp-operator/internal/identity"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/inflight"
)

// Defaults of Options.
const (
	// DefaultLeeway is the clock skew allowed on exp and nbf.
	DefaultLeeway = 30 * time.Second
	// DefaultMinKeyRefresh is the least time between two fetches of an
	// issuer's keys for tokens naming a key it does not know.
	DefaultMinKeyRefresh = 30 * time.Second
	// DefaultMaxKeyAge is how long a fetched key set is used before it is
	// fetched again (keys the issuer removed stop verifying by then).
	DefaultMaxKeyAge = 10 * time.Minute
	// DefaultFetchTimeout bounds one request to an issuer.
	DefaultFetchTimeout = 10 * time.Second
	// DefaultMaxIntrospections bounds the introspection requests in
	// flight, made before the caller is known.
	DefaultMaxIntrospections = 32
	maxTokenBytes            = 16 << 10
)

// Options of an Authenticator. Resource is required.
type Options struct {
	// Resource is the bridge as tokens must name it, with the scopes
	// they must carry.
	Resource *Resource
	// Fallback authenticates the tokens no configured issuer claims
	// (ServiceAccount tokens: TokenReview).
	Fallback authn.Authenticator
	// Leeway, MinKeyRefresh, MaxKeyAge, FetchTimeout, MaxIntrospections:
	// the defaults above when zero.
	Leeway            time.Duration
	MinKeyRefresh     time.Duration
	MaxKeyAge         time.Duration
	FetchTimeout      time.Duration
	MaxIntrospections int
	// Now reads the clock (time.Now when nil).
	Now func() time.Time
	// AllowHTTP accepts http:// URLs in issuers' discovery documents
	// (jwks_uri, introspection_endpoint) on hosts that are not loopback,
	// as the configuration's issuers were: development clusters only.
	AllowHTTP bool
	// Log gets what is skipped at debug level (a key of a JWKS the bridge
	// cannot use).
	Log logr.Logger
}

// Authenticator accepts configured issuers' tokens and hands the rest to
// its fallback. Safe for concurrent use.
type Authenticator struct {
	issuers map[string]*issuer
	// opaque is the issuer that introspects tokens that are not JWTs.
	opaque   *issuer
	fallback authn.Authenticator
	scopes   []string
	now      func() time.Time
	limit    *inflight.Limit

	mu      sync.Mutex
	cache   map[[32]byte]entry
	refused map[[32]byte]refusal
}

type entry struct {
	v       verified
	iss     *issuer
	expires time.Time
	// err: the token is genuine but lacks a required scope.
	err error
}

type refusal struct {
	until time.Time
	err   error
}

// Cache bounds, as TokenReview's.
const (
	cacheTTL     = authn.DefaultCacheTTL
	refusedTTL   = authn.DefaultRefusedTTL
	cacheEntries = authn.DefaultCacheEntries
)

// New builds the issuers of cfg.
func New(cfg *identity.Config, o Options) (*Authenticator, error) {
	if o.Resource == nil || o.Fallback == nil {
		return nil, errors.New("oauth: Resource and Fallback are required")
	}
	o.Leeway = cmp.Or(o.Leeway, DefaultLeeway)
	o.MinKeyRefresh = cmp.Or(o.MinKeyRefresh, DefaultMinKeyRefresh)
	o.MaxKeyAge = cmp.Or(o.MaxKeyAge, DefaultMaxKeyAge)
	o.FetchTimeout = cmp.Or(o.FetchTimeout, DefaultFetchTimeout)
	if o.Now == nil {
		o.Now = time.Now
	}
	a := &Authenticator{
		issuers: map[string]*issuer{}, fallback: o.Fallback, scopes: o.Resource.Scopes, now: o.Now,
		limit: inflight.New(int64(cmp.Or(o.MaxIntrospections, DefaultMaxIntrospections)), 0),
		cache: map[[32]byte]entry{}, refused: map[[32]byte]refusal{},
	}
	for _, j := range cfg.JWT {
		iss, err := newIssuer(j, o.Resource, o)
		if err != nil {
			return nil, err
		}
		a.issuers[iss.url] = iss
		if iss.introspection != nil {
			if a.opaque != nil {
				return nil, fmt.Errorf("issuers %s and %s both introspect: an opaque token does not say whose it is, so only one issuer may", a.opaque.url, iss.url)
			}
			a.opaque = iss
		}
	}
	return a, nil
}

// Cached returns the identity of a token accepted a moment ago, by a
// configured issuer or by the fallback.
func (a *Authenticator) Cached(token string) (identity.Identity, bool) {
	if token == "" || len(token) > maxTokenBytes {
		return identity.Identity{}, false
	}
	key := authn.Key(token)
	if id, ok, err := a.cached(key, a.now()); ok && err == nil {
		return id, true
	}
	switch c := a.fallback.(type) {
	case authn.KeyCached:
		return c.CachedKey(key)
	case authn.Cached:
		return c.Cached(token)
	}
	return identity.Identity{}, false
}

// cached answers from memory: ok false when the token must be checked.
func (a *Authenticator) cached(key [32]byte, now time.Time) (identity.Identity, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e, ok := a.cache[key]; ok && now.Before(e.expires) && (e.v.key == nil || e.iss.keys.has(*e.v.key)) {
		return e.v.id, true, e.err
	}
	if r, ok := a.refused[key]; ok && now.Before(r.until) {
		return identity.Identity{}, true, r.err
	}
	return identity.Identity{}, false, nil
}

// Authenticate checks a token: a configured issuer's, by its signature or
// by introspection, else by the fallback.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (identity.Identity, error) {
	if token == "" || len(token) > maxTokenBytes {
		return a.fallback.Authenticate(ctx, token)
	}
	now := a.now()
	key := authn.Key(token)
	if id, ok, err := a.cached(key, now); ok {
		return id, err
	}
	iss, isJWT := a.route(token)
	if iss == nil {
		return a.fallback.Authenticate(ctx, token)
	}
	var v verified
	var err error
	if isJWT {
		v, err = a.verifyJWT(ctx, iss, token, now)
	} else {
		if !a.limit.Take("", 1) {
			return identity.Identity{}, authn.ErrBusy
		}
		v, err = iss.introspect(ctx, token, now)
		a.limit.Give("", 1)
	}
	if err != nil {
		if errors.Is(err, authn.ErrUnauthenticated) && !errors.Is(err, errNoKey) {
			a.remember(key, refusal{until: now.Add(refusedTTL), err: err})
		}
		return identity.Identity{}, err
	}
	e := entry{v: v, iss: iss, expires: minTime(v.expires, now.Add(cacheTTL))}
	if missing := a.missingScopes(v.scopes); len(missing) > 0 {
		e.err = fmt.Errorf("%w: the token lacks the scopes %s", authn.ErrInsufficientScope, strings.Join(missing, " "))
	}
	a.store(key, e, now)
	if e.err != nil {
		return identity.Identity{}, e.err
	}
	return v.id, nil
}

// route finds the issuer that answers for token: by a JWT's unverified
// iss, or the introspecting issuer for a token that is not a JWT. nil: the
// fallback's.
func (a *Authenticator) route(token string) (*issuer, bool) {
	iss, ok := unverifiedIssuer(token)
	if !ok {
		return a.opaque, false
	}
	return a.issuers[iss], true
}

func (a *Authenticator) verifyJWT(ctx context.Context, iss *issuer, token string, now time.Time) (verified, error) {
	tok, err := jwt.ParseSigned(token, Algorithms)
	if err != nil {
		// none, HS256 and the like end here, before any key is looked at.
		return verified{}, refused("%s", strings.TrimPrefix(err.Error(), "go-jose/go-jose: "))
	}
	return iss.verify(ctx, tok, now)
}

func (a *Authenticator) missingScopes(have []string) []string {
	var missing []string
	for _, s := range a.scopes {
		if !slices.Contains(have, s) {
			missing = append(missing, s)
		}
	}
	return missing
}

func (a *Authenticator) store(key [32]byte, e entry, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.cache) >= cacheEntries {
		for k, c := range a.cache {
			if !now.Before(c.expires) {
				delete(a.cache, k)
			}
		}
		if len(a.cache) >= cacheEntries {
			clear(a.cache) // an optimization only: a check is always correct
		}
	}
	a.cache[key] = e
}

func (a *Authenticator) remember(key [32]byte, r refusal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.refused) >= cacheEntries {
		clear(a.refused)
	}
	a.refused[key] = r
}

// TokenEndpoint is the token_endpoint of the discovery document of the
// configured issuer that accepted token ("" when none did, or its document
// names none, or names one the issuers' URLs would not be allowed to be):
// the one token endpoint a caller's token may be exchanged at on the
// issuer's word.
func (a *Authenticator) TokenEndpoint(ctx context.Context, token string) string {
	a.mu.Lock()
	e, ok := a.cache[authn.Key(token)]
	a.mu.Unlock()
	if !ok || e.iss == nil || e.err != nil || !a.now().Before(e.expires) {
		return ""
	}
	meta, err := e.iss.metadata(ctx)
	if err != nil || meta.TokenEndpoint == "" {
		return ""
	}
	if identity.ValidateEndpointURL("the discovery document's token_endpoint", meta.TokenEndpoint, e.iss.endpointOpts...) != nil {
		return ""
	}
	return meta.TokenEndpoint
}

// KeyFetches is how many times the issuer's keys were fetched (for tests
// and the benchmark).
func (a *Authenticator) KeyFetches(issuerURL string) int {
	if iss, ok := a.issuers[issuerURL]; ok {
		return iss.keys.fetchesTried()
	}
	return 0
}

// unverifiedIssuer reads the iss of a compact JWS's payload, only to know
// which issuer's keys verify it; false when token is not a JWT.
func unverifiedIssuer(token string) (string, bool) {
	first := strings.IndexByte(token, '.')
	last := strings.LastIndexByte(token, '.')
	if first < 0 || first == last || strings.Count(token, ".") != 2 {
		return "", false
	}
	payload, err := base64.RawURLEncoding.DecodeString(token[first+1 : last])
	if err != nil {
		return "", false
	}
	var claims struct {
		Iss string `json:"iss"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return "", false
	}
	return claims.Iss, true
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
