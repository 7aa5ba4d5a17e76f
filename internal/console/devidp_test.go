package console

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/devidp"
	"github.com/mcp-operator/mcp-operator/internal/identity"
)

// startDevIDP serves the project's development identity provider (a real
// OAuth 2.1 / OIDC provider) on loopback, and returns options that sign in
// with it as the console's client and map people with the bridge's
// --oidc-issuer-url shortcut.
func startDevIDP(t *testing.T) envOption {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	issuer := "http://" + srv.Listener.Addr().String()
	p, err := devidp.New(devidp.Config{Issuer: issuer})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = p
	srv.Start()
	t.Cleanup(srv.Close)
	cfg, err := identity.IssuerConfig(issuer)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := identity.NewMapper(cfg.JWT[0])
	if err != nil {
		t.Fatal(err)
	}
	return func(o *Options) {
		o.Mapper = mapper
		o.SignIn = SignInOptions{IssuerURL: issuer, ClientID: devidp.ConsoleClientID, ClientSecret: devidp.ConsoleSecret, Scopes: []string{"profile", "email", "groups"}}
	}
}

var loginForm = regexp.MustCompile(`<form method="post" action="([^"]+)">\s*<input type="hidden" name="authRequestID" value="([^"]+)">`)

// signInAtDevIDP signs in on the provider's login page with a password.
func (b *browser) signInAtDevIDP(user, password string) (int, string) {
	b.t.Helper()
	status, page := b.get("/login")
	m := loginForm.FindStringSubmatch(page)
	if status != http.StatusOK || m == nil {
		b.t.Fatalf("no login page at the identity provider (%d): %s", status, page)
	}
	resp, err := b.nav.PostForm(strings.ReplaceAll(m[1], "&amp;", "&"), url.Values{"authRequestID": {m[2]}, "username": {user}, "password": {password}})
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, readAll(resp)
}

// A person signs in at the real provider's login page and is named as the
// bridge names them: sub and groups (from the ID token) prefixed oidc:. The
// agent's identity signed in cannot decide its own request.
func TestSignInAtTheDevIdentityProvider(t *testing.T) {
	e := newEnv(t, startDevIDP(t))
	e.approver(aliceUser)
	e.approver(bobUser)
	e.approval("dev-1", bobUser, `{}`)
	b := e.browser()
	if status, page := b.signInAtDevIDP("alice", "wrong"); status != http.StatusUnauthorized || strings.Contains(page, "Signed in") {
		t.Fatalf("a wrong password signed in (%d): %s", status, page)
	}
	if status, page := b.signInAtDevIDP("alice", devidp.Alice.Password); status != http.StatusOK || !strings.Contains(page, "Signed in") {
		t.Fatalf("sign-in at the identity provider ended with %d: %s", status, page)
	}
	if _, body := b.get("/approvals"); !strings.Contains(body, `id="whoami">`+aliceUser+"<") {
		t.Fatalf("not signed in as %s: %s", aliceUser, body)
	}
	var person Person
	e.console.sessions.mu.Lock()
	defer e.console.sessions.mu.Unlock()
	for _, x := range e.console.sessions.byID {
		if x.person.Username == aliceUser {
			person = x.person
		}
	}
	if !slices.Contains(person.Groups, "oidc:engineering") {
		t.Errorf("groups %v lack oidc:engineering (the ID token's groups)", person.Groups)
	}
	e.console.sessions.mu.Unlock()
	defer e.console.sessions.mu.Lock()

	agent := e.browser()
	agent.signInAtDevIDP("bob", devidp.Bob.Password)
	if page := agent.decide("dev-1", v1alpha1.VerdictAllowOnce, ""); !strings.Contains(page, "nobody decides their own request") {
		t.Fatalf("the requester decided its own request: %s", page)
	}
	if page := b.decide("dev-1", v1alpha1.VerdictAllowOnce, ""); !strings.Contains(page, "Approved once") {
		t.Fatalf("alice could not approve: %s", page)
	}
}
