package devidp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

var noFollow = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// startTestServer serves a provider on a loopback port; its store is the test's to look into.
func startTestServer(t *testing.T) (*Provider, string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	p, err := New(Config{Issuer: "http://" + srv.Listener.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = p
	srv.Start()
	t.Cleanup(srv.Close)
	return p, srv.URL
}

// authURL is an authorization request of mcp-client with PKCE, and its verifier.
func authURL(issuer string) (string, string) {
	verifier := oauth2.GenerateVerifier()
	return issuer + "/authorize?" + url.Values{"client_id": {MCPClientID}, "response_type": {"code"}, "scope": {"openid"}, "state": {"s"},
		"redirect_uri": {LoopbackRedirectURI}, "code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"}}.Encode(), verifier
}

// loginRequest starts an authorization request and returns its id, as the login page gets it.
func loginRequest(t *testing.T, authURL string) string {
	t.Helper()
	resp, err := noFollow.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	login, err := resp.Location()
	if err != nil {
		t.Fatal(err)
	}
	return login.Query().Get("authRequestID")
}

// signInForm answers the login form of request id as u and returns the status.
func signInForm(t *testing.T, issuer, id string, u User) int {
	t.Helper()
	resp, err := noFollow.PostForm(issuer+loginPath, url.Values{"authRequestID": {id}, "username": {u.Username}, "password": {u.Password}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A sign-in form answers once: a second post to the same request (another person's, a replay)
// is refused rather than changing whose code the client redeems.
func TestSignInCompletesOnce(t *testing.T) {
	_, issuer := startTestServer(t)
	u, _ := authURL(issuer)
	id := loginRequest(t, u)
	if status := signInForm(t, issuer, id, Alice); status != http.StatusFound {
		t.Fatalf("the first sign-in: %d", status)
	}
	if status := signInForm(t, issuer, id, Bob); status != http.StatusBadRequest {
		t.Errorf("a second sign-in to the same request: %d, want 400", status)
	}
}

// Authorization requests and codes expire after authRequestLifetime: a sign-in form answered
// later, or a code redeemed later, is refused. The provider's clock is moved, not waited for.
func TestAuthRequestsAndCodesExpire(t *testing.T) {
	p, issuer := startTestServer(t)
	var skew time.Duration
	p.store.now = func() time.Time { return time.Now().Add(skew) }
	later := authRequestLifetime + time.Minute
	authURL, verifier := authURL(issuer)

	// A sign-in form answered after the request expired.
	id := loginRequest(t, authURL)
	skew = later
	if status := signInForm(t, issuer, id, Alice); status != http.StatusBadRequest {
		t.Errorf("a sign-in after the request expired: %d, want 400", status)
	}
	if len(p.store.authRequests) != 0 {
		t.Errorf("%d expired requests are still kept", len(p.store.authRequests))
	}

	// A code redeemed after it expired.
	skew = 0
	loc, err := CompleteLogin(context.Background(), http.DefaultClient, authURL, Alice)
	if err != nil || loc.Query().Get("code") == "" {
		t.Fatalf("signing in: %v %v", loc, err)
	}
	skew = later
	resp, err := http.PostForm(issuer+"/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")},
		"redirect_uri": {LoopbackRedirectURI}, "client_id": {MCPClientID}, "code_verifier": {verifier}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a code redeemed after it expired: %d, want 400", resp.StatusCode)
	}
}

// Dynamic registration stops at maxDynamicClients, with an error that says what to do.
func TestDynamicRegistrationIsBounded(t *testing.T) {
	p, err := New(Config{Issuer: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	register := func() int {
		w := httptest.NewRecorder()
		p.ServeHTTP(w, httptest.NewRequest(http.MethodPost, registerPath, strings.NewReader(`{"redirect_uris":["http://127.0.0.1/callback"]}`)))
		return w.Code
	}
	p.store.dynamic = maxDynamicClients - 1
	if code := register(); code != http.StatusCreated {
		t.Fatalf("the last registration that fits: %d", code)
	}
	clients := len(p.store.clients)
	if code := register(); code != http.StatusBadRequest || len(p.store.clients) != clients {
		t.Errorf("a registration beyond the bound: %d, %d clients (was %d)", code, len(p.store.clients), clients)
	}
}
