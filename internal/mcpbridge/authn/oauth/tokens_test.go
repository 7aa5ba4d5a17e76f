package oauth_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcp-operator/mcp-operator/internal/identity"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn/oauth"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn/oauth/oauthtest"
)

// clientAudience is a configured audience named after a client, as issuers
// that cannot put the resource in aud have it.
const clientAudience = "mcp-cli"

func withClientAudience(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, nil, "")
	cfg, err := identity.ParseAuthenticationConfig(fmt.Appendf(nil, `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer: {url: '%s', audiences: [%s]}
  claimMappings:
    username: {claim: sub, prefix: 'oidc:'}
`, f.idp.URL, clientAudience))
	if err != nil {
		t.Fatal(err)
	}
	res, _ := oauth.NewResource(bridgeURL, []string{f.idp.URL}, nil)
	if f.auth, err = oauth.New(cfg, oauth.Options{Resource: res, Fallback: f.sa, Now: f.clock.Now}); err != nil {
		t.Fatal(err)
	}
	return f
}

func authenticate(f *fixture, tok string) error {
	_, err := f.auth.Authenticate(context.Background(), tok)
	return err
}

// An ID token is signed by the same keys as access tokens and names the
// client in aud: it must not pass for an access token where the client's
// name is a configured audience.
func TestIDTokenRefused(t *testing.T) {
	f := withClientAudience(t)
	forClient := f.idp.Claims("alice", clientAudience)
	cases := map[string]struct {
		token string
		want  string // "" accepted
	}{
		"at+jwt for the client audience":             {f.idp.SignTyped("at+jwt", forClient), ""},
		"application/AT+JWT for the client audience": {f.idp.SignTyped("application/AT+JWT", forClient), ""},
		"typ JWT for the client audience":            {f.idp.SignTyped("JWT", forClient), "not at+jwt"},
		"no typ for the client audience":             {f.idp.SignTyped("", forClient), "not at+jwt"},
		// A resource-bound token needs no typ (the dev issuer writes JWT).
		"typ JWT for the bridge": {f.idp.SignTyped("JWT", f.idp.Claims("alice", bridgeURL)), ""},
	}
	for _, mark := range []string{"nonce", "at_hash"} {
		c := f.idp.Claims("alice", bridgeURL)
		c[mark] = "x"
		cases[mark+" with typ JWT for the bridge"] = struct{ token, want string }{f.idp.SignTyped("JWT", c), "ID token"}
		cases[mark+" with typ at+jwt for the bridge"] = struct{ token, want string }{f.idp.SignTyped("at+jwt", c), ""}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := authenticate(f, tc.token)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (!errors.Is(err, authn.ErrUnauthenticated) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
}

// aud may name several audiences: one naming the bridge is enough (by
// design: RFC 7519 lets a token serve several recipients).
func TestMultipleAudiences(t *testing.T) {
	f := newFixture(t, nil, "")
	c := f.idp.Claims("alice", "")
	c["aud"] = []string{"https://other.example.com", bridgeURL}
	if err := authenticate(f, f.idp.Sign(c)); err != nil {
		t.Fatalf("aud [other, bridge]: %v", err)
	}
	c["aud"] = []string{"https://other.example.com", "https://third.example.com"}
	if err := authenticate(f, f.idp.Sign(c)); !errors.Is(err, authn.ErrUnauthenticated) {
		t.Fatalf("aud [other, third]: %v", err)
	}
}

// A signed token whose claims are malformed is refused for what it is,
// not as a bad signature.
func TestMalformedClaimsReason(t *testing.T) {
	f := newFixture(t, nil, "")
	c := f.idp.Claims("alice", bridgeURL)
	c["exp"] = "tomorrow"
	err := authenticate(f, f.idp.Sign(c))
	if !errors.Is(err, authn.ErrUnauthenticated) || !strings.Contains(err.Error(), "malformed") || strings.Contains(err.Error(), "signature") {
		t.Fatalf("exp a string: %v, want a refusal for malformed claims", err)
	}
}

// A JWKS entry the bridge cannot read (a key type or curve go-jose does not
// know) is skipped; the issuer's other keys still verify.
func TestJWKSWithUnreadableKey(t *testing.T) {
	f := newFixture(t, nil, "")
	f.idp.PublishRaw(`{"kty":"OKP","crv":"X25519","x":"hSDwCYkwp1R0i33ctD73Wg2_Og0mOBr066SpjqqbTmo","use":"enc","kid":"x"}`)
	f.idp.PublishRaw(`{"kty":"EC","crv":"P-256K","x":"AAAA","y":"AAAA","kid":"k1"}`)
	if err := authenticate(f, f.idp.Sign(f.idp.Claims("alice", bridgeURL))); err != nil {
		t.Fatalf("with unreadable keys beside the signing one: %v", err)
	}
}

// Keys without a kid are each kept and tried for a token without a kid;
// a cached token of one stops being accepted once it is removed.
func TestKeysWithoutKid(t *testing.T) {
	f := newFixture(t, nil, "")
	f.idp.AddUnnamedKey(jose.RS256)
	first := f.idp.Sign(f.idp.Claims("alice", bridgeURL))
	f.idp.AddUnnamedKey(jose.ES256)
	second := f.idp.Sign(f.idp.Claims("bob", bridgeURL))
	for name, tok := range map[string]string{"first": first, "second": second} {
		if err := authenticate(f, tok); err != nil {
			t.Fatalf("a token of the %s key without a kid: %v", name, err)
		}
	}
	// Remove the first key without a kid (the issuer's keys are, in
	// order: key-1, the first unnamed, the second unnamed).
	f.idp.RemoveKey("")
	f.clock.Step(oauth.DefaultMaxKeyAge)
	if err := authenticate(f, second); err != nil {
		t.Fatalf("the remaining key's token: %v", err)
	}
	if _, ok := f.auth.Cached(first); ok {
		t.Fatal("the cache still accepts a token of a removed key without a kid")
	}
}

// The URLs a discovery document gives follow the issuer URL rule: the
// bridge neither reads keys nor sends tokens over http to another host.
func TestDiscoveredEndpointsOverHTTP(t *testing.T) {
	f := newFixture(t, nil, "")
	plain := "http://idp.example.test/jwks"
	f.idp.JWKSURI.Store(&plain)
	err := authenticate(f, f.idp.Sign(f.idp.Claims("alice", bridgeURL)))
	if err == nil || errors.Is(err, authn.ErrUnauthenticated) || !strings.Contains(err.Error(), "jwks_uri") {
		t.Fatalf("an http jwks_uri: %v, want an error of the bridge naming jwks_uri", err)
	}

	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(oauthtest.ClientSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	g := newFixture(t, nil, "")
	endpoint := "http://idp.example.test/introspect"
	g.idp.IntrospectionEndpoint.Store(&endpoint)
	cfg, err := identity.ParseAuthenticationConfig(fmt.Appendf(nil, `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer: {url: '%s', introspection: {clientID: %s, clientSecretFile: '%s'}}
  claimMappings:
    username: {claim: sub, prefix: 'corp:'}
`, g.idp.URL, oauthtest.ClientID, secret))
	if err != nil {
		t.Fatal(err)
	}
	res, _ := oauth.NewResource(bridgeURL, []string{g.idp.URL}, nil)
	a, err := oauth.New(cfg, oauth.Options{Resource: res, Fallback: g.sa})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(context.Background(), "opaque"); err == nil || !strings.Contains(err.Error(), "introspection_endpoint") {
		t.Fatalf("an http introspection_endpoint: %v", err)
	}
}
