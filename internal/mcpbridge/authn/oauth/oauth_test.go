package oauth_test

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mcp-operator/mcp-operator/internal/identity"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn/oauth"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn/oauth/oauthtest"
)

const bridgeURL = "https://bridge.example.com"

// saTokens stands in for TokenReview in these unit tests (the bridge's
// envtest checks the real one behind this Authenticator): it accepts one
// token and counts what reaches it.
type saTokens struct {
	mu    sync.Mutex
	calls int
}

func (s *saTokens) Authenticate(_ context.Context, token string) (identity.Identity, error) {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	if token == "sa-token" {
		return identity.FromUserInfo("system:serviceaccount:agents:alice", nil), nil
	}
	return identity.Identity{}, authn.ErrUnauthenticated
}

type fixture struct {
	idp   *oauthtest.Issuer
	auth  *oauth.Authenticator
	sa    *saTokens
	clock *clocktesting.FakeClock
}

// newFixture runs an issuer and an Authenticator for it; yaml, when set,
// is the issuer's part of the configuration (claim mappings and so on).
func newFixture(t *testing.T, scopes []string, issuerYAML string) *fixture {
	t.Helper()
	idp := oauthtest.New()
	t.Cleanup(idp.Close)
	if issuerYAML == "" {
		issuerYAML = "  claimMappings:\n    username: {claim: sub, prefix: 'oidc:'}\n    groups: {claim: groups, prefix: 'oidc:'}\n"
	}
	cfg, err := identity.ParseAuthenticationConfig([]byte(fmt.Sprintf(
		"apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt:\n- issuer: {url: '%s'}\n%s", idp.URL, issuerYAML)))
	if err != nil {
		t.Fatal(err)
	}
	res, err := oauth.NewResource(bridgeURL, []string{idp.URL}, scopes)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{idp: idp, sa: &saTokens{}, clock: clocktesting.NewFakeClock(time.Now())}
	f.auth, err = oauth.New(cfg, oauth.Options{Resource: res, Fallback: f.sa, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestJWTAccepted(t *testing.T) {
	f := newFixture(t, nil, "")
	c := f.idp.Claims("alice", bridgeURL+"/mcp")
	c["groups"] = []string{"dev"}
	tok := f.idp.Sign(c)
	id, err := f.auth.Authenticate(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if id.Kind != identity.User || id.Username != "oidc:alice" || strings.Join(id.Groups, ",") != "oidc:dev,system:authenticated" || id.Issuer != f.idp.URL {
		t.Fatalf("identity %+v", id)
	}
	if cached, ok := f.auth.Cached(tok); !ok || cached.Username != "oidc:alice" {
		t.Fatalf("Cached = %+v, %v", cached, ok)
	}
	// The bridge's own URL, and a per-server endpoint's, are its resource
	// too; so is the URL written another way that is the same.
	for _, aud := range []string{bridgeURL, bridgeURL + "/servers/github/mcp", "HTTPS://Bridge.Example.com:443/mcp/"} {
		if _, err := f.auth.Authenticate(context.Background(), f.idp.Sign(f.idp.Claims("alice", aud))); err != nil {
			t.Errorf("aud %s: %v", aud, err)
		}
	}
	if f.sa.calls != 0 {
		t.Fatalf("the issuer's tokens reached the fallback %d times", f.sa.calls)
	}
}

// Each attack of an outside caller on the JWT path, and that it is
// refused (as unauthenticated, never as an error of the bridge's).
func TestJWTAttacks(t *testing.T) {
	f := newFixture(t, nil, "")
	other := oauthtest.New()
	defer other.Close()
	now := time.Now()
	_, kid := f.idp.Key()
	pub := f.idp.JWKS().Keys[0].Key
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})

	with := func(change func(map[string]any)) map[string]any {
		c := f.idp.Claims("alice", bridgeURL+"/mcp")
		change(c)
		return c
	}
	cases := map[string]struct {
		token string
		why   string
	}{
		"another audience":                       {f.idp.Sign(with(func(c map[string]any) { c["aud"] = "https://other.example.com/mcp" })), "audience"},
		"a path of the bridge it does not serve": {f.idp.Sign(with(func(c map[string]any) { c["aud"] = bridgeURL + "/admin" })), "audience"},
		"no audience":                            {f.idp.Sign(with(func(c map[string]any) { delete(c, "aud") })), "audience"},
		"expired":                                {f.idp.Sign(with(func(c map[string]any) { c["exp"] = now.Add(-time.Minute).Unix() })), "expired"},
		"not yet valid": {f.idp.Sign(with(func(c map[string]any) {
			c["nbf"] = now.Add(5 * time.Minute).Unix()
			c["iat"] = now.Add(5 * time.Minute).Unix()
		})), "not valid yet"},
		"no expiry": {f.idp.Sign(with(func(c map[string]any) { delete(c, "exp") })), "no exp"},
		// A token naming the configured issuer but signed by another
		// issuer's key under the same kid.
		"signed by another issuer": {oauthtest.SignWith(jose.RS256, mustKey(other), kid, f.idp.Claims("alice", bridgeURL)), "signature"},
		"alg none":                 {unsigned(f.idp.Claims("alice", bridgeURL), kid), "unexpected signature algorithm"},
		"HS256 with the JWKS public key": {oauthtest.SignWith(jose.HS256, pubPEM, kid, f.idp.Claims("alice", bridgeURL)),
			"unexpected signature algorithm"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := f.auth.Authenticate(context.Background(), tc.token)
			if !errors.Is(err, authn.ErrUnauthenticated) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("error %v, want a refusal saying %q", err, tc.why)
			}
		})
	}
	// A token of an issuer that is not configured goes to the fallback
	// (which refuses it): it is never verified by a key it names itself.
	before := f.sa.calls
	if _, err := f.auth.Authenticate(context.Background(), other.Sign(other.Claims("alice", bridgeURL))); !errors.Is(err, authn.ErrUnauthenticated) || f.sa.calls != before+1 {
		t.Fatalf("an unknown issuer's token: %v (fallback calls %d -> %d)", err, before, f.sa.calls)
	}
}

// The prefix keeps a person from being taken for a ServiceAccount: a sub
// that is a ServiceAccount's name is the user oidc:system:serviceaccount:...
// of the User kind, which no ServiceAccount subject matches.
func TestPrefixedServiceAccountName(t *testing.T) {
	f := newFixture(t, nil, "")
	c := f.idp.Claims("system:serviceaccount:agents:alice", bridgeURL)
	c["groups"] = []string{"system:masters"}
	id, err := f.auth.Authenticate(context.Background(), f.idp.Sign(c))
	if err != nil {
		t.Fatal(err)
	}
	if id.Kind != identity.User || id.Username != "oidc:system:serviceaccount:agents:alice" || id.Subject().Kind != "User" || id.Groups[0] != "oidc:system:masters" {
		t.Fatalf("identity %+v, subject %+v", id, id.Subject())
	}
}

func mustKey(i *oauthtest.Issuer) any {
	k, _ := i.Key()
	return k
}

// unsigned is the alg none token an attacker writes by hand.
func unsigned(claims map[string]any, kid string) string {
	h, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT", "kid": kid})
	p, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p) + "."
}

// flood sends 200 tokens signed by the issuer's key under made-up kids, at
// once, and returns their errors.
func (f *fixture) flood(t *testing.T, round string) []error {
	t.Helper()
	priv, _ := f.idp.Key()
	errs := make([]error, 200)
	var wg sync.WaitGroup
	for n := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := oauthtest.SignWith(jose.RS256, priv, fmt.Sprintf("%s-%d", round, n), f.idp.Claims("alice", bridgeURL))
			_, errs[n] = f.auth.Authenticate(context.Background(), tok)
		}()
	}
	wg.Wait()
	return errs
}

// A flood of tokens with made-up key ids costs one fetch of the issuer's
// keys per interval, not one per token. Within the interval an unknown kid
// is not refused (the issuer may have rotated a moment ago) but answered
// "try later"; after a fetch that does not find it, it is refused.
func TestUnknownKidFlood(t *testing.T) {
	f := newFixture(t, nil, "")
	if _, err := f.auth.Authenticate(context.Background(), f.idp.Sign(f.idp.Claims("alice", bridgeURL))); err != nil {
		t.Fatal(err)
	}
	warm := f.idp.JWKSFetches.Load()
	for _, err := range f.flood(t, "within") {
		var later *authn.TryLater
		if !errors.As(err, &later) || later.After <= 0 || later.After > oauth.DefaultMinKeyRefresh {
			t.Fatalf("a made-up kid within the interval: %v, want a TryLater", err)
		}
	}
	if got := f.idp.JWKSFetches.Load() - warm; got != 0 {
		t.Fatalf("200 made-up kids within the interval fetched the keys %d times, want 0", got)
	}
	f.clock.Step(oauth.DefaultMinKeyRefresh)
	refusals := 0
	for _, err := range f.flood(t, "after") {
		switch {
		case errors.Is(err, authn.ErrUnauthenticated):
			refusals++
		case !errors.Is(err, authn.ErrTryLater):
			t.Fatalf("a made-up kid after the interval: %v", err)
		}
	}
	if got := f.idp.JWKSFetches.Load() - warm; got != 1 || refusals == 0 {
		t.Fatalf("200 made-up kids once the interval passed: %d fetches (want exactly 1), %d refusals (want some)", got, refusals)
	}
}

// A genuine token signed by a key the issuer rotated in just after the
// bridge read its keys is not refused, nor is a refusal remembered: it is
// "try later" until the keys may be read again, then accepted.
func TestNewKidWithinInterval(t *testing.T) {
	f := newFixture(t, nil, "")
	if _, err := f.auth.Authenticate(context.Background(), f.idp.Sign(f.idp.Claims("alice", bridgeURL))); err != nil {
		t.Fatal(err)
	}
	f.idp.AddKey(jose.ES256)
	tok := f.idp.Sign(f.idp.Claims("bob", bridgeURL))
	if _, err := f.auth.Authenticate(context.Background(), tok); !errors.Is(err, authn.ErrTryLater) || errors.Is(err, authn.ErrUnauthenticated) {
		t.Fatalf("a new key's token within the interval: %v, want try later", err)
	}
	f.clock.Step(oauth.DefaultMinKeyRefresh)
	if id, err := f.auth.Authenticate(context.Background(), tok); err != nil || id.Username != "oidc:bob" {
		t.Fatalf("the same token once the keys may be read: %+v %v", id, err)
	}
}

// A kid that is in no fetched set is refused after a fetch, and the refusal
// is not remembered: once the interval passes, the keys are read again.
func TestNoKeyRefusalNotRemembered(t *testing.T) {
	f := newFixture(t, nil, "")
	priv, _ := f.idp.Key()
	tok := oauthtest.SignWith(jose.RS256, priv, "not-published", f.idp.Claims("alice", bridgeURL))
	if _, err := f.auth.Authenticate(context.Background(), tok); !errors.Is(err, authn.ErrUnauthenticated) || !strings.Contains(err.Error(), "no key") {
		t.Fatalf("a kid the first fetch lacks: %v", err)
	}
	f.clock.Step(oauth.DefaultMinKeyRefresh)
	before := f.idp.JWKSFetches.Load()
	_, _ = f.auth.Authenticate(context.Background(), tok)
	if f.idp.JWKSFetches.Load() != before+1 {
		t.Fatal("the refusal for an unpublished kid was remembered: the keys were not read again")
	}
}

// Rotation: a new key is fetched when a token names it; the key the
// issuer removed stops verifying at the next fetch, even a token the cache
// accepted.
func TestKeyRotation(t *testing.T) {
	f := newFixture(t, nil, "")
	_, oldKid := f.idp.Key()
	old := f.idp.Sign(f.idp.Claims("alice", bridgeURL))
	if _, err := f.auth.Authenticate(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	newKid := f.idp.AddKey(jose.ES256)
	f.idp.RemoveKey(oldKid)
	f.clock.Step(oauth.DefaultMinKeyRefresh)
	fresh := f.idp.Sign(f.idp.Claims("bob", bridgeURL))
	id, err := f.auth.Authenticate(context.Background(), fresh)
	if err != nil || id.Username != "oidc:bob" {
		t.Fatalf("a token of the new key %s: %+v, %v", newKid, id, err)
	}
	if _, ok := f.auth.Cached(old); ok {
		t.Fatal("the cache still accepts a token of the removed key")
	}
	if _, err := f.auth.Authenticate(context.Background(), old); !errors.Is(err, authn.ErrTryLater) {
		t.Fatalf("a token of the removed key, just after the fetch: %v", err)
	}
	f.clock.Step(oauth.DefaultMinKeyRefresh)
	if _, err := f.auth.Authenticate(context.Background(), old); !errors.Is(err, authn.ErrUnauthenticated) {
		t.Fatalf("a token of the removed key: %v", err)
	}
}

func TestRequiredScopes(t *testing.T) {
	f := newFixture(t, []string{"mcp:tools"}, "")
	c := f.idp.Claims("alice", bridgeURL)
	if _, err := f.auth.Authenticate(context.Background(), f.idp.Sign(c)); !errors.Is(err, authn.ErrInsufficientScope) || !strings.Contains(err.Error(), "mcp:tools") {
		t.Fatalf("no scope: %v", err)
	}
	c["scope"] = "openid mcp:tools"
	if _, err := f.auth.Authenticate(context.Background(), f.idp.Sign(c)); err != nil {
		t.Fatal(err)
	}
	delete(c, "scope")
	c["scp"] = []string{"mcp:tools"}
	if _, err := f.auth.Authenticate(context.Background(), f.idp.Sign(c)); err != nil {
		t.Fatal(err)
	}
	// ServiceAccount tokens carry no scopes and need none.
	if _, err := f.auth.Authenticate(context.Background(), "sa-token"); err != nil {
		t.Fatal(err)
	}
}

// What is not a configured issuer's JWT reaches the fallback, unchanged.
func TestFallback(t *testing.T) {
	f := newFixture(t, nil, "")
	id, err := f.auth.Authenticate(context.Background(), "sa-token")
	if err != nil || id.Kind != identity.ServiceAccount {
		t.Fatalf("%+v %v", id, err)
	}
	if _, err := f.auth.Authenticate(context.Background(), ""); !errors.Is(err, authn.ErrUnauthenticated) {
		t.Fatal(err)
	}
	if f.sa.calls != 2 {
		t.Fatalf("fallback calls %d, want 2", f.sa.calls)
	}
}

func TestIntrospection(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(oauthtest.ClientSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, nil, "")
	// The fixture's issuer again, now also introspecting.
	cfg, err := identity.ParseAuthenticationConfig([]byte(fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: '%s'
    introspection: {clientID: %s, clientSecretFile: '%s'}
  claimMappings:
    username: {claim: username, prefix: 'corp:'}
`, f.idp.URL, oauthtest.ClientID, secret)))
	if err != nil {
		t.Fatal(err)
	}
	res, _ := oauth.NewResource(bridgeURL, []string{f.idp.URL}, nil)
	a, err := oauth.New(cfg, oauth.Options{Resource: res, Fallback: f.sa})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour).Unix()
	f.idp.Opaque("opaque-alice", map[string]any{"iss": f.idp.URL, "aud": bridgeURL, "exp": exp, "username": "alice"})
	f.idp.Opaque("opaque-other", map[string]any{"iss": f.idp.URL, "aud": "https://other.example.com", "exp": exp, "username": "alice"})
	f.idp.Opaque("opaque-expired", map[string]any{"iss": f.idp.URL, "aud": bridgeURL, "exp": time.Now().Add(-time.Hour).Unix(), "username": "alice"})
	id, err := a.Authenticate(context.Background(), "opaque-alice")
	if err != nil || id.Username != "corp:alice" {
		t.Fatalf("%+v %v", id, err)
	}
	for token, why := range map[string]string{"opaque-other": "audience", "opaque-expired": "expired", "opaque-unknown": "not active"} {
		if _, err := a.Authenticate(context.Background(), token); !errors.Is(err, authn.ErrUnauthenticated) || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: %v, want a refusal saying %q", token, err, why)
		}
	}
	if f.sa.calls != 0 {
		t.Fatalf("opaque tokens reached the fallback %d times though an issuer introspects", f.sa.calls)
	}
}

// An issuer whose keys cannot be read makes its tokens unverifiable, not
// bad: the answer is an error of the bridge's (503), never a refusal a
// client would act on by signing in again, and tokens are accepted once
// the keys can be fetched again.
func TestIssuerDown(t *testing.T) {
	f := newFixture(t, nil, "")
	f.idp.Down.Store(true)
	tok := f.idp.Sign(f.idp.Claims("alice", bridgeURL))
	for range 3 {
		if _, err := f.auth.Authenticate(context.Background(), tok); err == nil || errors.Is(err, authn.ErrUnauthenticated) {
			t.Fatalf("with the issuer down: %v, want an error that is not a refusal", err)
		}
	}
	if n := f.idp.JWKSFetches.Load(); n != 1 {
		t.Fatalf("%d fetches within the interval, want 1", n)
	}
	f.idp.Down.Store(false)
	f.clock.Step(oauth.DefaultMinKeyRefresh)
	if _, err := f.auth.Authenticate(context.Background(), tok); err != nil {
		t.Fatalf("with the issuer back: %v", err)
	}
}

// Discovery: RFC 8414 metadata when the issuer has no OIDC discovery; a
// document naming another issuer is not used (mix-up), so its keys verify
// nothing.
func TestDiscovery(t *testing.T) {
	f := newFixture(t, nil, "")
	f.idp.OAuthOnly.Store(true)
	if _, err := f.auth.Authenticate(context.Background(), f.idp.Sign(f.idp.Claims("alice", bridgeURL))); err != nil {
		t.Fatalf("with RFC 8414 metadata only: %v", err)
	}

	g := newFixture(t, nil, "")
	other := "https://attacker.example.com"
	g.idp.ClaimedIssuer.Store(&other)
	_, err := g.auth.Authenticate(context.Background(), g.idp.Sign(g.idp.Claims("alice", bridgeURL)))
	if err == nil || !strings.Contains(err.Error(), "names the issuer") {
		t.Fatalf("a discovery document naming another issuer: %v", err)
	}
}
