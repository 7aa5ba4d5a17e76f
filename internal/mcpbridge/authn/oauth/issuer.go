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
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

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

	mu   sync.Mutex
	meta *serverMetadata // the discovery document, once read
}

// serverMetadata is what the bridge reads of an OIDC discovery document or
// RFC 8414 authorization server metadata.
type serverMetadata struct {
	Issuer                string `json:"issuer"`
	JWKSURI               string `json:"jwks_uri"`
	IntrospectionEndpoint string `json:"introspection_endpoint"`
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
		audiences: j.Issuer.Audiences, resource: res, leeway: o.Leeway,
		client: &http.Client{Transport: transport, Timeout: o.FetchTimeout,
			// The issuer's documents are where it says they are; a
			// redirect is not followed to somewhere else.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
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
	kid := tok.Headers[0].KeyID
	key, ok, err := iss.keys.key(ctx, kid)
	if !ok {
		if err != nil {
			return verified{}, err // the issuer's keys could not be read: not the token's fault
		}
		return verified{}, refused("no key %q among the issuer's keys", kid)
	}
	if key.Algorithm != "" && key.Algorithm != tok.Headers[0].Algorithm {
		return verified{}, refused("the token's algorithm %s is not its key's (%s)", tok.Headers[0].Algorithm, key.Algorithm)
	}
	var std jwt.Claims
	var raw map[string]any
	if err := tok.Claims(key.Key, &std, &raw); err != nil {
		return verified{}, refused("the signature does not verify")
	}
	if std.Expiry == nil {
		return verified{}, refused("the token has no exp: it would never expire")
	}
	if err := std.ValidateWithLeeway(jwt.Expected{Issuer: iss.url, Time: now}, iss.leeway); err != nil {
		return verified{}, refused("%s", strings.TrimPrefix(err.Error(), "go-jose/go-jose/jwt: "))
	}
	if !iss.audienceOK(std.Audience) {
		return verified{}, refused("the token's audience %q does not name this bridge (%s)", []string(std.Audience), iss.resource.URL)
	}
	id, err := iss.mapper.Identity(raw)
	if err != nil {
		return verified{}, fmt.Errorf("%w: %w", authn.ErrUnauthenticated, err)
	}
	return verified{id: id, expires: std.Expiry.Time(), kid: kid, scopes: scopesOf(raw)}, nil
}

// verified is an accepted token.
type verified struct {
	id      identity.Identity
	expires time.Time
	// kid is the key that signed it ("" for an introspected token): the
	// token stops being accepted from the cache when the issuer drops it.
	kid    string
	scopes []string
}

// audienceOK: one of aud is the bridge's resource (RFC 8707), or an
// audience the configuration accepts explicitly.
func (iss *issuer) audienceOK(aud []string) bool {
	for _, a := range aud {
		if iss.resource.Accepts(a) {
			return true
		}
		for _, x := range iss.audiences {
			if a == x {
				return true
			}
		}
	}
	return false
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
func (iss *issuer) fetchKeys(ctx context.Context) (jose.JSONWebKeySet, error) {
	var set jose.JSONWebKeySet
	meta, err := iss.metadata(ctx)
	if err != nil {
		return set, err
	}
	if meta.JWKSURI == "" {
		return set, fmt.Errorf("issuer %s's discovery document has no jwks_uri", iss.url)
	}
	err = iss.getJSON(ctx, meta.JWKSURI, &set)
	return set, err
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
	return decodeAnswer(resp, u, into)
}

// decodeAnswer reads a 200 answer's JSON, within maxDocumentBytes.
func decodeAnswer(resp *http.Response, u string, into any) error {
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDocumentBytes))
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxDocumentBytes)).Decode(into); err != nil {
		return fmt.Errorf("%s: %w", u, err)
	}
	return nil
}
