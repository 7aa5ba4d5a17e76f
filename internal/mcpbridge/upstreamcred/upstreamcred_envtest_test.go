package upstreamcred_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstreamcred"
	"github.com/mcp-operator/mcp-operator/internal/redact"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

// The Secrets are read from a real API server (envtest): the client
// Secret by name, the callers' Secrets by label.
var k8s client.Client

func TestMain(m *testing.M) {
	env, err := testenv.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

func namespace(t testing.TB) string {
	t.Helper()
	name := strings.ToLower(strings.ReplaceAll(t.Name(), "_", "-"))
	if len(name) > 60 {
		name = name[:60]
	}
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

func createSecret(t testing.TB, s *corev1.Secret) {
	t.Helper()
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

// exchangeServer is a server whose callers' tokens are exchanged at te.
func exchangeServer(t testing.TB, te *bridgetest.TokenEndpoint) upstreamcred.Server {
	t.Helper()
	ns := namespace(t)
	createSecret(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bridge-client"},
		StringData: map[string]string{"client_id": te.ClientID, "client_secret": te.ClientSecret}})
	return upstreamcred.Server{Namespace: ns, Name: "github", Remote: &v1alpha1.Remote{URL: "https://mcp.example.com/mcp", Auth: &v1alpha1.RemoteAuth{
		TokenExchange: &v1alpha1.TokenExchange{TokenURL: te.URL, Audience: te.Audience, Scopes: []string{"repo"}, ClientSecretRef: v1alpha1.LocalSecretReference{Name: "bridge-client"}},
	}}}
}

// clock is a time tests move on.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

var (
	alice = upstreamcred.Caller{Username: "oidc:alice@example.com", Token: "alice-own-access-token"}
	bob   = upstreamcred.Caller{Username: "system:serviceaccount:agents:bob", Token: "bob-own-projected-token"}
)

func tokenOf(c upstreamcred.Credential) string {
	return strings.TrimPrefix(c.Header.Get("Authorization"), "Bearer ")
}

// TestExchangeIsEachCallersOwn: concurrent first calls of one caller
// share one exchange; another caller gets a token of its own; a later
// call is served from the cache until shortly before expiry, then
// exchanged again; the caller's own token is never what it gets.
func TestExchangeIsEachCallersOwn(t *testing.T) {
	te := bridgetest.NewTokenEndpoint(t, "github", map[string]string{alice.Token: "alice", bob.Token: "bob"})
	srv := exchangeServer(t, te)
	clk := &clock{now: time.Now()}
	st := upstreamcred.New(upstreamcred.Options{Secrets: k8s, Clock: clk.Now, TokenEndpoints: []string{te.URL}})
	ctx := context.Background()

	const n = 16
	got := make([]upstreamcred.Credential, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c, err := st.Credential(ctx, srv, alice, "")
			if err != nil {
				t.Error(err)
			}
			got[i] = c
		})
	}
	wg.Wait()
	if x := te.Exchanges("alice"); x != 1 {
		t.Fatalf("%d concurrent first calls made %d exchanges, want 1", n, x)
	}
	a := tokenOf(got[0])
	for _, c := range got {
		if tokenOf(c) != a || c.Kind != upstreamcred.Exchanged {
			t.Fatalf("concurrent calls of one caller got different credentials: %q, %q (%s)", a, tokenOf(c), c.Kind)
		}
	}
	if a == alice.Token || !strings.HasPrefix(a, "exchanged-alice-") {
		t.Fatalf("alice's credential is %q, want a token exchanged for her", a)
	}
	b, err := st.Credential(ctx, srv, bob, "")
	if err != nil {
		t.Fatal(err)
	}
	if tokenOf(b) == a || !strings.HasPrefix(tokenOf(b), "exchanged-bob-") {
		t.Fatalf("bob got %q, alice %q: want a token of bob's own", tokenOf(b), a)
	}

	clk.add(58 * time.Minute)
	again, _ := st.Credential(ctx, srv, alice, "")
	if tokenOf(again) != a || te.Exchanges("alice") != 1 {
		t.Fatalf("within its lifetime alice's token was exchanged again (%d exchanges)", te.Exchanges("alice"))
	}
	clk.add(90 * time.Second) // within a minute of expiry
	fresh, _ := st.Credential(ctx, srv, alice, "")
	if tokenOf(fresh) == a || te.Exchanges("alice") != 2 {
		t.Fatalf("shortly before expiry the token was not refreshed: %q (%d exchanges)", tokenOf(fresh), te.Exchanges("alice"))
	}
	// Both of alice's tokens, and bob's, are redacted from the server's
	// output; the base redactor is unchanged.
	red := st.Redactor(srv.Namespace+"/"+srv.Name, redact.Shapes())
	for _, v := range []string{a, tokenOf(fresh), tokenOf(b)} {
		if out := red.String("echo "+v, nil); strings.Contains(out, v) {
			t.Fatalf("the server's redactor lets %q through: %q", v, out)
		}
	}
	if out := redact.Shapes().String("echo "+a, nil); !strings.Contains(out, a) {
		t.Fatal("the base redactor was changed")
	}
}

// TestExchangeKeyedByToken: a caller presenting another token of its own
// (a refreshed access token) gets an exchange of that token, and a session
// ending forgets what was exchanged in it.
func TestExchangeKeyedByToken(t *testing.T) {
	second := upstreamcred.Caller{Username: alice.Username, Token: "alice-refreshed-access-token"}
	te := bridgetest.NewTokenEndpoint(t, "github", map[string]string{alice.Token: "alice", second.Token: "alice"})
	srv := exchangeServer(t, te)
	st := upstreamcred.New(upstreamcred.Options{Secrets: k8s, TokenEndpoints: []string{te.URL}})
	ctx := context.Background()
	first, _ := st.Credential(ctx, srv, alice, "sess-1")
	other, err := st.Credential(ctx, srv, second, "sess-1")
	if err != nil {
		t.Fatal(err)
	}
	if tokenOf(first) == tokenOf(other) || te.Exchanges("alice") != 2 {
		t.Fatalf("a new subject token reused the exchange of the old one (%d exchanges)", te.Exchanges("alice"))
	}
	st.Forget("sess-1")
	if _, err := st.Credential(ctx, srv, alice, "sess-2"); err != nil {
		t.Fatal(err)
	}
	if x := te.Exchanges("alice"); x != 3 {
		t.Fatalf("after the session ended the token was not exchanged again: %d exchanges, want 3", x)
	}
}

// TestExchangeRefused: a refusal names the server and the endpoint's error
// code, never its description (which quotes the subject token here), and
// stands for a few seconds without the endpoint being asked again.
func TestExchangeRefused(t *testing.T) {
	te := bridgetest.NewTokenEndpoint(t, "github", map[string]string{alice.Token: "alice"})
	srv := exchangeServer(t, te)
	clk := &clock{now: time.Now()}
	st := upstreamcred.New(upstreamcred.Options{Secrets: k8s, Clock: clk.Now, TokenEndpoints: []string{te.URL}})
	ctx := context.Background()

	_, err := st.Credential(ctx, srv, bob, "") // a token the endpoint does not know
	var ce *upstreamcred.Error
	if !errors.As(err, &ce) || ce.Reason != upstreamcred.ReasonExchangeFailed || ce.Code != "invalid_grant" {
		t.Fatalf("error %v, want token_exchange_failed with code invalid_grant", err)
	}
	if !strings.Contains(err.Error(), srv.Namespace+"/github") || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("the error does not name the server and the code: %v", err)
	}
	if strings.Contains(err.Error(), bob.Token) || strings.Contains(err.Error(), "is not valid") {
		t.Fatalf("the error repeats the endpoint's description (and the token): %v", err)
	}
	if _, again := st.Credential(ctx, srv, bob, ""); !errors.As(again, &ce) || ce.Code != "invalid_grant" || te.Refusals() != 1 {
		t.Fatalf("a second call at once: %v, %d refusals asked; want the same refusal from memory", again, te.Refusals())
	}
	// bob's refusal stands for bob alone: alice's call meanwhile is
	// exchanged.
	if c, err := st.Credential(ctx, srv, alice, ""); err != nil || tokenOf(c) == "" || te.Exchanges("alice") != 1 {
		t.Fatalf("alice, while bob's refusal stands: %v (%d exchanges), want her own token", err, te.Exchanges("alice"))
	}
	clk.add(6 * time.Second)
	if _, _ = st.Credential(ctx, srv, bob, ""); te.Refusals() != 2 {
		t.Fatalf("after the refusal lapsed the endpoint was asked %d times, want 2", te.Refusals())
	}

	// A wrong client secret: invalid_client.
	wrong := srv
	wrong.Remote = srv.Remote.DeepCopy()
	createSecret(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: srv.Namespace, Name: "wrong-client"},
		StringData: map[string]string{"client_id": te.ClientID, "client_secret": "not-the-secret"}})
	wrong.Remote.Auth.TokenExchange.ClientSecretRef.Name = "wrong-client"
	if _, err := st.Credential(ctx, wrong, alice, ""); !errors.As(err, &ce) || ce.Code != "invalid_client" {
		t.Fatalf("error %v, want code invalid_client", err)
	}
	// A client Secret that is not there: unavailable, saying which.
	wrong.Remote.Auth.TokenExchange.ClientSecretRef.Name = "absent"
	if _, err := st.Credential(ctx, wrong, alice, ""); !errors.As(err, &ce) || ce.Reason != upstreamcred.ReasonUnavailable || !strings.Contains(err.Error(), "absent") {
		t.Fatalf("error %v, want credential_unavailable naming the Secret", err)
	}
	// No token to exchange (an anonymous caller).
	if _, err := st.Credential(ctx, srv, upstreamcred.Caller{Username: "system:anonymous"}, ""); !errors.As(err, &ce) || ce.Reason != upstreamcred.ReasonMissing {
		t.Fatalf("error %v, want credential_missing", err)
	}
	// A token URL in clear text off loopback is refused unsent.
	plain := srv
	plain.Remote = srv.Remote.DeepCopy()
	plain.Remote.Auth.TokenExchange.TokenURL = "http://idp.example.com/token"
	if _, err := st.Credential(ctx, plain, alice, ""); !errors.As(err, &ce) || !strings.Contains(err.Error(), "https") {
		t.Fatalf("error %v, want a refusal of the http token URL", err)
	}
}

// A token endpoint that fails for now (overloaded, restarting, behind a
// proxy that lost it) gives a transient error, whose call may be sent
// again; one that refuses the request as such does not.
func TestExchangeFailureForNow(t *testing.T) {
	te := bridgetest.NewTokenEndpoint(t, "github", map[string]string{alice.Token: "alice"})
	srv := exchangeServer(t, te)
	for _, c := range []struct {
		status    int
		body      string
		transient bool
	}{
		{http.StatusServiceUnavailable, "", true},
		{http.StatusBadGateway, "<html>bad gateway</html>", true},
		{http.StatusTooManyRequests, "", true},
		{http.StatusBadRequest, `{"error":"temporarily_unavailable"}`, true},
		{http.StatusBadRequest, `{"error":"invalid_grant"}`, false},
		{http.StatusBadRequest, "", false},
		{http.StatusUnauthorized, `{"error":"invalid_client"}`, false},
	} {
		var asked atomic.Int32
		endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			asked.Add(1)
			if c.body != "" && c.body[0] == '{' {
				w.Header().Set("Content-Type", "application/json")
			}
			w.WriteHeader(c.status)
			_, _ = io.WriteString(w, c.body)
		}))
		failing := srv
		failing.Remote = srv.Remote.DeepCopy()
		failing.Remote.Auth.TokenExchange.TokenURL = endpoint.URL
		st := upstreamcred.New(upstreamcred.Options{Secrets: k8s, TokenEndpoints: []string{endpoint.URL}})
		_, err := st.Credential(context.Background(), failing, alice, "")
		_, _ = st.Credential(context.Background(), failing, alice, "") // sent again at once
		endpoint.Close()
		var ce *upstreamcred.Error
		if !errors.As(err, &ce) || ce.Transient != c.transient {
			t.Errorf("HTTP %d %q: error %v (%+v), want transient %v", c.status, c.body, err, ce, c.transient)
		}
		// A refusal with a code stands a while; one for now does not.
		remembered := !c.transient && strings.HasPrefix(c.body, `{"error"`)
		if want := map[bool]int32{true: 1, false: 2}[remembered]; asked.Load() != want {
			t.Errorf("HTTP %d %q: the endpoint was asked %d times for two calls, want %d", c.status, c.body, asked.Load(), want)
		}
	}
}

// jwtWithExpiry is a token shaped as a JWT whose exp is exp (unsigned: the
// Store reads exp only of tokens the bridge already accepted).
func jwtWithExpiry(sub string, exp time.Time) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"none"}`)) + "." + enc.EncodeToString([]byte(fmt.Sprintf(`{"sub":%q,"exp":%d}`, sub, exp.Unix()))) + ".sig"
}

// TestExchangeBoundedByCallersToken: an exchanged token that lives longer
// than the caller's own token is not used past the caller's token's exp.
func TestExchangeBoundedByCallersToken(t *testing.T) {
	clk := &clock{now: time.Now()}
	carol := upstreamcred.Caller{Username: "oidc:carol@example.com", Token: jwtWithExpiry("carol", clk.now.Add(2*time.Minute))}
	te := bridgetest.NewTokenEndpoint(t, "github", map[string]string{carol.Token: "carol"}) // an hour's tokens
	srv := exchangeServer(t, te)
	st := upstreamcred.New(upstreamcred.Options{Secrets: k8s, Clock: clk.Now, TokenEndpoints: []string{te.URL}})
	ctx := context.Background()
	if _, err := st.Credential(ctx, srv, carol, ""); err != nil {
		t.Fatal(err)
	}
	clk.add(time.Minute)
	if _, _ = st.Credential(ctx, srv, carol, ""); te.Exchanges("carol") != 1 {
		t.Fatalf("within the caller's token's life: %d exchanges, want the cached one", te.Exchanges("carol"))
	}
	clk.add(90 * time.Second)
	if _, _ = st.Credential(ctx, srv, carol, ""); te.Exchanges("carol") != 2 {
		t.Fatalf("past the caller's token's exp the exchanged token was still used (%d exchanges)", te.Exchanges("carol"))
	}
}

// TestExchangeDetachedFromCaller: an exchange runs for every caller waiting
// on it, whatever the first one's context: a caller that already gave up
// does not fail it. And every session that used an exchanged token forgets
// it when it ends, not only the session whose call made the exchange.
func TestExchangeDetachedFromCaller(t *testing.T) {
	te := bridgetest.NewTokenEndpoint(t, "github", map[string]string{alice.Token: "alice"})
	srv := exchangeServer(t, te)
	st := upstreamcred.New(upstreamcred.Options{Secrets: k8s, TokenEndpoints: []string{te.URL}})
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := st.Credential(gone, srv, alice, "sess-1"); err != nil {
		t.Fatalf("an exchange for a caller whose context ended: %v, want it made (the client Secret read and the exchange are the flight's)", err)
	}
	ctx := context.Background()
	if _, err := st.Credential(ctx, srv, alice, "sess-2"); err != nil || te.Exchanges("alice") != 1 {
		t.Fatalf("a second session of the caller: %v, %d exchanges, want the cached token", err, te.Exchanges("alice"))
	}
	st.Forget("sess-2")
	if _, err := st.Credential(ctx, srv, alice, "sess-3"); err != nil || te.Exchanges("alice") != 2 {
		t.Fatalf("after the second session ended: %v, %d exchanges, want a new exchange", err, te.Exchanges("alice"))
	}
}

// recorder is a loopback HTTP server that counts what reaches it: where a
// hostile token URL would send the caller's token.
func recorder(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"harvested","token_type":"Bearer","expires_in":3600}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

// TestExchangeNeverRedirected: a token endpoint answering 307 to another
// server is not followed, even by a client that would follow it: the
// other server receives nothing (neither the caller's token nor the
// client secret), and the call is refused as credential_unavailable.
func TestExchangeNeverRedirected(t *testing.T) {
	redirected, got := recorder(t)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, redirected, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	te := bridgetest.NewTokenEndpoint(t, "github", map[string]string{alice.Token: "alice"})
	srv := exchangeServer(t, te)
	srv.Remote.Auth.TokenExchange.TokenURL = redirect.URL + "/token"
	// A client of the caller's that follows redirects: the Store's rule wins.
	st := upstreamcred.New(upstreamcred.Options{Secrets: k8s, HTTP: &http.Client{}, TokenEndpoints: []string{redirect.URL + "/token"}})
	_, err := st.Credential(context.Background(), srv, alice, "")
	var ce *upstreamcred.Error
	if !errors.As(err, &ce) || ce.Reason != upstreamcred.ReasonUnavailable {
		t.Fatalf("error %v, want credential_unavailable", err)
	}
	if n := got.Load(); n != 0 {
		t.Fatalf("the redirect target received %d requests: the caller's token was re-posted", n)
	}
}

// TestExchangeOnlyAtTrustedEndpoint: a tokenURL that is neither the
// caller's issuer's token_endpoint nor one the bridge lists is refused
// before anything is sent, naming the server; the issuer's endpoint serves
// the callers that issuer signed, and no one else.
func TestExchangeOnlyAtTrustedEndpoint(t *testing.T) {
	hostileURL, got := recorder(t)
	te := bridgetest.NewTokenEndpoint(t, "github", map[string]string{alice.Token: "alice", bob.Token: "bob"})
	srv := exchangeServer(t, te)
	hostile := srv
	hostile.Remote = srv.Remote.DeepCopy()
	hostile.Remote.Auth.TokenExchange.TokenURL = hostileURL + "/token"
	// alice's token is the issuer's, whose discovery names te; bob's is not.
	issuerOf := func(_ context.Context, token string) string {
		if token == alice.Token {
			return te.URL
		}
		return ""
	}
	st := upstreamcred.New(upstreamcred.Options{Secrets: k8s, IssuerTokenEndpoint: issuerOf})
	ctx := context.Background()
	var ce *upstreamcred.Error
	for _, c := range []upstreamcred.Caller{alice, bob} {
		_, err := st.Credential(ctx, hostile, c, "")
		if !errors.As(err, &ce) || ce.Reason != upstreamcred.ReasonUnavailable || !strings.Contains(err.Error(), srv.Namespace+"/github") || !strings.Contains(err.Error(), "not a token endpoint this bridge trusts") {
			t.Fatalf("%s at an untrusted URL: %v, want credential_unavailable naming the server and why", c.Username, err)
		}
	}
	if n := got.Load(); n != 0 {
		t.Fatalf("the untrusted endpoint received %d requests", n)
	}
	if _, err := st.Credential(ctx, srv, alice, ""); err != nil {
		t.Fatalf("alice at her issuer's token endpoint: %v", err)
	}
	if _, err := st.Credential(ctx, srv, bob, ""); !errors.As(err, &ce) || ce.Reason != upstreamcred.ReasonUnavailable || te.Exchanges("bob") != 0 {
		t.Fatalf("bob, whose token that issuer did not sign: %v (%d exchanges), want refused unsent", err, te.Exchanges("bob"))
	}
}

// TestPerCallerSecret: the caller's Secret is found by the digest label
// and taken only when its annotation names the caller exactly.
func TestPerCallerSecret(t *testing.T) {
	ns := namespace(t)
	srv := upstreamcred.Server{Namespace: ns, Name: "jira", Remote: &v1alpha1.Remote{URL: "https://mcp.example.com/mcp", Auth: &v1alpha1.RemoteAuth{
		PerCallerSecret: &v1alpha1.PerCallerSecret{Key: "token", Header: "X-Api-Key"},
	}}}
	label := map[string]string{v1alpha1.CallerLabel: v1alpha1.CallerLabelValue(alice.Username)}
	// A Secret carrying alice's label but naming someone else: not hers.
	createSecret(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged", Labels: label,
		Annotations: map[string]string{v1alpha1.CallerNameAnnotation: "oidc:mallory@example.com"}}, StringData: map[string]string{"token": "mallory-pat-0123456789"}})
	st := upstreamcred.New(upstreamcred.Options{Secrets: k8s})
	ctx := context.Background()
	_, err := st.Credential(ctx, srv, alice, "")
	var ce *upstreamcred.Error
	if !errors.As(err, &ce) || ce.Reason != upstreamcred.ReasonMissing || !strings.Contains(err.Error(), v1alpha1.CallerLabelValue(alice.Username)) {
		t.Fatalf("error %v, want credential_missing saying which label to set", err)
	}
	createSecret(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-jira", Labels: label,
		Annotations: map[string]string{v1alpha1.CallerNameAnnotation: alice.Username}}, StringData: map[string]string{"token": "alice-pat-0123456789\n"}})
	c, err := st.Credential(ctx, srv, alice, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != upstreamcred.PerCaller || c.Header.Get("X-Api-Key") != "alice-pat-0123456789" || c.Header.Get("Authorization") != "" {
		t.Fatalf("credential %s %v, want alice's value in X-Api-Key alone", c.Kind, c.Header)
	}
	if _, err := st.Credential(ctx, srv, bob, ""); !errors.As(err, &ce) || ce.Reason != upstreamcred.ReasonMissing {
		t.Fatalf("bob, who has no Secret, got %v, want credential_missing", err)
	}
	if out := st.Redactor(ns+"/jira", redact.Shapes()).String("key alice-pat-0123456789", nil); strings.Contains(out, "alice-pat") {
		t.Fatalf("the caller's Secret value is not redacted: %q", out)
	}
}

// TestCallerLabelValue: any user name maps to a valid label value.
func TestCallerLabelValue(t *testing.T) {
	for _, name := range []string{"oidc:alice@example.com", "system:serviceaccount:ns:sa", strings.Repeat("x", 300), ""} {
		v := v1alpha1.CallerLabelValue(name)
		if len(v) != 40 || strings.Trim(v, "0123456789abcdef") != "" {
			t.Fatalf("label value %q of %q is not 40 hex digits", v, name)
		}
	}
	if v1alpha1.CallerLabelValue("a") == v1alpha1.CallerLabelValue("b") {
		t.Fatal("two names share a label value")
	}
}
