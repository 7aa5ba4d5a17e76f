package console

import (
	"bufio"
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// The sign-in cookie binds a sign-in to the browser that started it, the
// session cookie is HttpOnly and SameSite=Strict, and no token is ever in
// a URL the console sends the browser to.
func TestSignInSetsAStrictSessionCookie(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	e.idp.signInAs(alice)
	resp, err := b.post.Get(e.url + "/login?next=/servers")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	authorize, _ := url.Parse(resp.Header.Get("Location"))
	q := authorize.Query()
	if resp.StatusCode != http.StatusFound || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("nonce") == "" || q.Get("state") == "" {
		t.Fatalf("login sends the browser to %s (status %d): want PKCE S256, a nonce and a state", authorize, resp.StatusCode)
	}
	if q.Get("redirect_uri") != e.url+"/callback" {
		t.Errorf("redirect_uri %q", q.Get("redirect_uri"))
	}
	binding := cookieHeader(resp, signInCookie)
	if !strings.Contains(binding, "HttpOnly") || !strings.Contains(binding, "SameSite=Lax") || !strings.Contains(binding, "Path=/callback") {
		t.Errorf("sign-in cookie %q", binding)
	}
	// The identity provider sends the browser back with a code.
	resp, err = b.post.Get(authorize.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = b.post.Get(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	session := cookieHeader(resp, sessionCookie)
	if resp.StatusCode != http.StatusOK || !strings.Contains(session, "HttpOnly") || !strings.Contains(session, "SameSite=Strict") || strings.Contains(session, "Secure") {
		t.Fatalf("callback: status %d, session cookie %q (want HttpOnly, SameSite=Strict, not Secure on http://)", resp.StatusCode, session)
	}
	page := readAll(resp)
	// The page moves on by its Continue link (the script follows it): no
	// meta refresh, whose URL the browser would read more loosely.
	if !strings.Contains(page, `<a id="continue" href="/servers">`) || strings.Contains(page, "http-equiv") {
		t.Errorf("the signed-in page does not move on to /servers by its link alone: %s", page)
	}
	if _, body := b.get("/servers"); !strings.Contains(body, "Signed in as <strong id=\"whoami\">"+aliceUser) {
		t.Errorf("not signed in as %s: %s", aliceUser, body)
	}
}

// refresh fetches path as the console script does when its page changed.
func (b *browser) refresh(path string) int {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.e.url+path, nil)
	req.Header.Set(refreshHeader, "1")
	resp, err := b.nav.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func cookieHeader(resp *http.Response, name string) string {
	for _, c := range resp.Header.Values("Set-Cookie") {
		if strings.HasPrefix(c, name+"=") {
			return c
		}
	}
	return ""
}

func readAll(resp *http.Response) string {
	var sb strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		sb.WriteString(sc.Text() + "\n")
	}
	return sb.String()
}

func TestSecureCookiesAndHSTSOnHTTPS(t *testing.T) {
	e := newEnv(t)
	e.idp.signInAs(alice)
	b := e.browser()
	resp, err := b.post.Get(e.url + "/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if h := resp.Header.Get("Strict-Transport-Security"); h != "" {
		t.Errorf("HSTS over http: %q", h)
	}
	e.console.secure = true // as with an https public URL
	resp, err = b.post.Get(e.url + "/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if c := cookieHeader(resp, signInCookie); !strings.Contains(c, "Secure") {
		t.Errorf("sign-in cookie without Secure: %q", c)
	}
	if h := resp.Header.Get("Strict-Transport-Security"); h != hsts {
		t.Errorf("HSTS over https: %q, want %q", h, hsts)
	}
}

// Callbacks the console did not ask for, or tokens it must not take, sign
// nobody in.
func TestCallbackRefusals(t *testing.T) {
	e := newEnv(t)
	e.idp.signInAs(alice)
	// startSignIn returns the callback URL the identity provider sends
	// browser b to.
	startSignIn := func(b *browser) string {
		resp, err := b.post.Get(e.url + "/login")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		resp, err = b.post.Get(resp.Header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("Location")
	}
	refused := func(name string, b *browser, callback, want string) {
		t.Helper()
		resp, err := b.post.Get(callback)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(resp)
		resp.Body.Close()
		if resp.StatusCode < 400 || !strings.Contains(body, want) || cookieHeader(resp, sessionCookie) != "" {
			t.Errorf("%s: status %d, session cookie %q, page lacks %q: %s", name, resp.StatusCode, cookieHeader(resp, sessionCookie), want, body)
		}
	}
	b := e.browser()
	refused("unknown state", b, e.url+"/callback?code=x&state=made-up", "not started in this browser")
	// An error for a sign-in this browser did not start says only that.
	refused("provider error, unknown state", b, e.url+"/callback?error=access_denied&state=made-up", "not started in this browser")
	// errorFor is the provider's answer to a sign-in b started: error
	// code and a description anyone could have written.
	errorFor := func(b *browser, code string) string {
		u, _ := url.Parse(startSignIn(b))
		q := url.Values{"state": {u.Query().Get("state")}, "error": {code}, "error_description": {"Call +1 555 0100 to unlock your account"}}
		u.RawQuery = q.Encode()
		return u.String()
	}
	for code, want := range map[string]string{
		"access_denied":             "did not sign you in: access_denied.",
		"login_required":            "did not sign you in: login_required.",
		"Visit evil.example to fix": "did not sign you in: an error the console does not know.",
	} {
		fresh := e.browser()
		resp, err := fresh.post.Get(errorFor(fresh, code))
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(resp)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, want) || strings.Contains(body, "555") || strings.Contains(body, "evil.example") {
			t.Errorf("provider error %q: %d, want %q and no text of the provider's: %s", code, resp.StatusCode, want, body)
		}
	}

	// A code the provider does not know: its error code is shown, its
	// description is not.
	swapped := e.browser()
	u, _ := url.Parse(startSignIn(swapped))
	q := u.Query()
	q.Set("code", "made-up")
	u.RawQuery = q.Encode()
	resp, err := swapped.post.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(resp)
	resp.Body.Close()
	if want := "refused the sign-in code: invalid_grant."; resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, want) || strings.Contains(body, "555") {
		t.Errorf("a code the provider refused: %d, want %q and no text of the provider's: %s", resp.StatusCode, want, body)
	}

	callback := startSignIn(b)
	refused("another browser", e.browser(), callback, "not started in this browser")
	callback = startSignIn(b)
	if status, _ := b.get(strings.TrimPrefix(callback, e.url)); status != http.StatusOK {
		t.Fatalf("a proper callback answered %d", status)
	}
	refused("replayed", b, callback, "used already")

	for name, tc := range map[string]struct {
		change func(map[string]any)
		want   string
	}{
		"another audience":  {func(c map[string]any) { c["aud"] = "mcp-bridge" }, "did not verify"},
		"another issuer":    {func(c map[string]any) { c["iss"] = "https://idp.example" }, "did not verify"},
		"expired":           {func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() }, "did not verify"},
		"another nonce":     {func(c map[string]any) { c["nonce"] = "other" }, "nonce"},
		"unverified email":  {func(c map[string]any) { c["email_verified"] = false }, "could not be mapped"},
		"no username claim": {func(c map[string]any) { delete(c, "email") }, "could not be mapped"},
	} {
		e.idp.misbehave = tc.change
		fresh := e.browser()
		refused(name, fresh, startSignIn(fresh), tc.want)
	}
	e.idp.misbehave = nil
	// A code redeemed without the verifier the console holds fails at the
	// provider: the state's verifier is checked by the token endpoint.
}

// The person is mapped from the ID token's claims alone, as the bridge maps
// a token's: groups the provider's userinfo adds are not the person's.
func TestOnlyTheIDTokenNamesThePerson(t *testing.T) {
	e := newEnv(t)
	e.idp.mu.Lock()
	e.idp.userinfo = map[string]any{"sub": carol["sub"], "email": carol["email"], "groups": []any{"cluster-admins"}}
	e.idp.mu.Unlock()
	b := e.browser()
	b.signIn(carol)
	e.console.sessions.mu.Lock()
	defer e.console.sessions.mu.Unlock()
	if len(e.console.sessions.byID) != 1 {
		t.Fatalf("%d sessions after one sign-in", len(e.console.sessions.byID))
	}
	for _, x := range e.console.sessions.byID {
		if x.person.Username != "oidc:carol@example.com" || slices.Contains(x.person.Groups, "oidc:cluster-admins") {
			t.Errorf("signed in as %+v, want oidc:carol@example.com without userinfo's groups", x.person)
		}
	}
}

func TestPagesWithoutSessionOfferSignIn(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	for _, path := range []string{"/approvals", "/servers", "/servers/x/y", "/policies", "/activity"} {
		status, body := b.get(path)
		if status != http.StatusUnauthorized || !strings.Contains(body, `href="/login?next=`+strings.ReplaceAll(path, "/", "%2f")+`"`) {
			t.Errorf("%s: status %d, no sign-in link: %s", path, status, body)
		}
	}
	resp, err := b.nav.Get(e.url + "/events?topic=approvals")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/events without a session: %d", resp.StatusCode)
	}
}

// next after sign-in stays on the console.
func TestLocalPath(t *testing.T) {
	for in, want := range map[string]string{
		"/servers": "/servers", "": "/approvals", "//evil.example/x": "/approvals", "/\\evil.example": "/approvals",
		"https://evil.example": "/approvals", "javascript:alert(1)": "/approvals", "/policies?tool=a": "/policies?tool=a",
		"/\t/evil.example": "/approvals", "/%09/evil.example": "/approvals", "/\\/evil.example": "/approvals",
		"/\r\n//evil.example": "/approvals", "/%2F/evil.example": "/approvals", "/%5Cevil.example": "/approvals",
		"/\x7f/evil.example": "/approvals", "///evil.example": "/approvals", "/servers/a%20b": "/servers/a%20b",
	} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.signIn(alice)
	for _, path := range []string{"/approvals", "/login", "/static/console.js"} {
		resp, err := b.post.Get(e.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		h := resp.Header
		csp := h.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "same-origin" {
			t.Errorf("%s: headers %v", path, h)
		}
		if noStore := h.Get("Cache-Control") == "no-store"; noStore == strings.HasPrefix(path, "/static/") {
			t.Errorf("%s: Cache-Control %q", path, h.Get("Cache-Control"))
		}
	}
	_, body := b.get("/approvals")
	if strings.Contains(body, "<script>") || strings.Contains(body, " on") && strings.Contains(body, "onclick=") {
		t.Errorf("a page carries inline script")
	}
}

func TestSessionsExpireAndLogoutEnds(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.SessionIdle = time.Hour; o.SessionMaxAge = 8 * time.Hour })
	b := e.browser()
	b.signIn(alice)
	e.clock.advance(59 * time.Minute)
	if status, _ := b.get("/approvals"); status != http.StatusOK {
		t.Fatalf("a session used within the idle time ended: %d", status)
	}
	e.clock.advance(61 * time.Minute)
	if status, _ := b.get("/approvals"); status != http.StatusUnauthorized {
		t.Fatalf("an idle session still holds: %d", status)
	}
	// An open live page refreshes itself whenever something changes: that
	// is not the person using the console, nor is its event stream.
	b.signIn(alice)
	e.clock.advance(50 * time.Minute)
	if status := b.refresh("/approvals"); status != http.StatusOK {
		t.Fatalf("a live refresh within the idle time: %d", status)
	}
	if status := b.refresh("/events?topic=nothing"); status != http.StatusBadRequest {
		t.Fatalf("an event stream within the idle time: %d", status)
	}
	e.clock.advance(20 * time.Minute)
	if status := b.refresh("/approvals"); status != http.StatusUnauthorized {
		t.Fatalf("live refreshes kept an idle session: %d", status)
	}
	b.signIn(alice)
	for i := 0; i < 9; i++ {
		e.clock.advance(55 * time.Minute)
		b.get("/approvals")
	}
	if status, _ := b.get("/approvals"); status != http.StatusUnauthorized {
		t.Fatalf("a session outlived its maximum age: %d", status)
	}
	b.signIn(alice)
	csrf := b.csrf()
	if resp := b.submit("/logout", url.Values{"csrf": {"wrong"}}, ""); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("logout without the CSRF token: %d", resp.StatusCode)
	}
	if resp := b.submit("/logout", url.Values{"csrf": {csrf}}, ""); resp.StatusCode != http.StatusOK || !strings.Contains(cookieHeader(resp, sessionCookie), "Max-Age=0") {
		t.Fatalf("logout: %d, cookie %q", resp.StatusCode, cookieHeader(resp, sessionCookie))
	}
	if status, _ := b.get("/approvals"); status != http.StatusUnauthorized {
		t.Fatalf("signed out, the session still holds: %d", status)
	}
}

// The approvals page's event stream says "changed" when an approval in a
// namespace the person may see is created, and nothing for another one.
func TestEventStreamPushesChanges(t *testing.T) {
	e := newEnv(t)
	e.approver(aliceUser)
	b := e.browser()
	b.signIn(alice)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp := b.stream(ctx)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("event stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	e.approval("live-1", bobUser, `{}`)
	for line := range lines {
		if line == "event: changed" {
			return
		}
	}
	t.Fatal("no changed event after an approval was created")
}

func TestEventStreamRefusesUnknownTopics(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.signIn(alice)
	if status, _ := b.get("/events?topic=secrets"); status != http.StatusBadRequest {
		t.Fatalf("unknown topic: %d", status)
	}
}

// The small handlers: the root, health, a sign-in while signed in, and a
// form too large to read.
func TestSmallHandlers(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	resp, err := b.post.Get(e.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/approvals" {
		t.Errorf("/: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if status, body := b.get("/healthz"); status != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz: %d %q", status, body)
	}
	// The static files are served, their folder is not listed.
	if status, body := b.get("/static/"); status != http.StatusNotFound || strings.Contains(body, "console.js") {
		t.Errorf("/static/: %d %q", status, body)
	}
	if status, body := b.get("/static/console.js"); status != http.StatusOK || !strings.Contains(body, "EventSource") {
		t.Errorf("/static/console.js: %d", status)
	}
	b.signIn(alice)
	resp, err = b.post.Get(e.url + "/login?next=/servers")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/servers" {
		t.Errorf("signing in while signed in: %d to %q, want straight to /servers", resp.StatusCode, resp.Header.Get("Location"))
	}
	// A tab in next would make "/\t/evil.example" //evil.example to a browser.
	resp, err = b.post.Get(e.url + "/login?next=%2F%09%2Fevil.example")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Location") != "/approvals" {
		t.Errorf("next with a tab leads to %q, want /approvals", resp.Header.Get("Location"))
	}
	big := url.Values{"csrf": {b.csrf()}, "verdict": {"Deny"}, "comment": {strings.Repeat("x", 20<<10)}}
	if resp := b.submit("/approvals/"+e.ns+"/any", big, ""); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a form over 16 KB: %d, want 400", resp.StatusCode)
	}
	if resp := b.submit("/approvals", url.Values{}, ""); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("a post to the approvals page: %d, want 405", resp.StatusCode)
	}
}
