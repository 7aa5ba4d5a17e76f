package mcpbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"golang.org/x/oauth2"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/devidp"
	"github.com/mcp-operator/mcp-operator/internal/identity"
	mcpclient "github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn/oauth"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstreamcred"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// operatorToken is the operator's own credential of the servers below
// (spec.remote.auth.bearerTokenSecretRef beside a per-caller kind): its
// listings carry it, a caller's call never does.
const operatorToken = "operator-own-listing-token-0123456789"

// credsHarness is a bridge whose callers' credentials upstream are read
// from a real API server (envtest), in front of one recording server.
type credsHarness struct {
	*harness
	st     *bridgetest.Stateful
	server v1alpha1.MCPServer
	k      client.Client
	ns     string
}

func newCredsHarness(t *testing.T, ns string, sessionOnly bool, auth v1alpha1.RemoteAuth, secrets ...*corev1.Secret) *credsHarness {
	t.Helper()
	return newCredsHarnessOf(t, ns, sessionOnly, nil, auth, []v1alpha1.Subject{sa("agents", "alice"), sa("agents", "bob")}, secrets...)
}

// newCredsHarnessWith is newCredsHarness for the callers mod authenticates
// (subjects: the policy's).
func newCredsHarnessWith(t *testing.T, ns string, mod func(*Config), auth v1alpha1.RemoteAuth, subjects []v1alpha1.Subject, secrets ...*corev1.Secret) *credsHarness {
	t.Helper()
	return newCredsHarnessOf(t, ns, false, mod, auth, subjects, secrets...)
}

func newCredsHarnessOf(t *testing.T, ns string, sessionOnly bool, mod func(*Config), auth v1alpha1.RemoteAuth, subjects []v1alpha1.Subject, secrets ...*corev1.Secret) *credsHarness {
	t.Helper()
	st := bridgetest.NewLeakyStateful(t)
	if sessionOnly {
		st = bridgetest.NewStateful(t, true)
	}
	server := bridgetest.Published(t, ns, "stateful", st.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy(ns, "callers", subjects, rule("allow", "mcp.stateful.*"))
	pol.Spec.Prompts = []v1alpha1.PromptRule{{Prompts: []string{"mcp.stateful.*"}, Decision: v1alpha1.DecisionAllow}}
	h, k := newCredsBridge(t, server, []v1alpha1.ToolPolicy{pol}, mod, auth, secrets...)
	return &credsHarness{harness: h, st: st, server: server, k: k, ns: ns}
}

// newCredsBridge is a bridge in front of server (published, with auth set
// here), whose callers' credentials are read from a real API server
// (envtest) in the server's namespace, where secrets are created. The
// server's own connection carries the operator's credential, as the
// watcher reads it from bearerTokenSecretRef.
func newCredsBridge(t *testing.T, server v1alpha1.MCPServer, policies []v1alpha1.ToolPolicy, mod func(*Config), auth v1alpha1.RemoteAuth, secrets ...*corev1.Secret) (*harness, client.Client) {
	t.Helper()
	cfg, cs := startAPIServer(t)
	ensureNamespace(t, cs, server.Namespace)
	k, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		s.Namespace = server.Namespace
		if err := k.Create(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	server.Spec.Remote.Auth = &auth
	h := newHarness(t, []v1alpha1.MCPServer{server}, policies, func(c *Config) {
		if mod != nil {
			mod(c)
		}
		// The exchange is trusted at the issuer's own token endpoint for
		// its people, and at the listed one for ServiceAccounts.
		o := upstreamcred.Options{Secrets: k}
		if people, ok := c.Auth.(*oauth.Authenticator); ok {
			o.IssuerTokenEndpoint = people.TokenEndpoint
		} else if auth.TokenExchange != nil {
			o.TokenEndpoints = []string{auth.TokenExchange.TokenURL}
		}
		c.Credentials = upstreamcred.New(o)
	})
	h.reg.Update(routes.Build([]v1alpha1.MCPServer{server}), func(s *routes.Server) (upstream.Target, error) {
		tg, err := target(s)
		tg.BearerToken, tg.Credentials = operatorToken, "operator"
		return tg, err
	})
	return h, k
}

// authOf is what each request to the server carried, by JSON-RPC (or
// HTTP) method.
func authOf(r bridgetest.Request) string {
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return "X-Api-Key " + k
	}
	return r.Header.Get("Authorization")
}

// checkNeverSent fails when any request the server got carried one of the
// callers' own tokens to the bridge.
func (h *credsHarness) checkNeverSent(t *testing.T) {
	t.Helper()
	for _, r := range h.st.Requests() {
		for name, vs := range r.Header {
			for _, v := range vs {
				for token := range testCallers {
					if strings.Contains(v, token) {
						t.Fatalf("a %s %s request carried the caller's own token %q in %s", r.HTTPMethod, r.Method, token, name)
					}
				}
			}
		}
	}
}

// TestCallersOwnExchangedTokensUpstream: two callers, each in a session of
// its own and statelessly, calling a server whose callers' tokens are
// exchanged. Every request of each caller carries that caller's exchanged
// token alone, no upstream session ever sees two callers' credentials, the
// operator's listing credential never rides a caller's call, and neither
// caller's own token reaches the server.
func TestCallersOwnExchangedTokensUpstream(t *testing.T) {
	for _, sessionOnly := range []bool{false, true} {
		name := "both-eras"
		if sessionOnly {
			name = "sessions-only"
		}
		t.Run(name, func(t *testing.T) {
			te := bridgetest.NewTokenEndpoint(t, "stateful", map[string]string{"alice-token": "alice", "bob-token": "bob"})
			h := newCredsHarness(t, "xchg-"+name, sessionOnly, v1alpha1.RemoteAuth{
				BearerTokenSecretRef: &v1alpha1.SecretKeySelector{Name: "operator", Key: "token"},
				TokenExchange:        &v1alpha1.TokenExchange{TokenURL: te.URL, Audience: "stateful", ClientSecretRef: v1alpha1.LocalSecretReference{Name: "bridge-client"}},
			}, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bridge-client"}, StringData: map[string]string{"client_id": te.ClientID, "client_secret": te.ClientSecret}})

			alice := h.connect(t, "alice-token", "/mcp", mcpclient.EraSession)
			bob := h.connect(t, "bob-token", "/mcp", mcpclient.EraSession)
			aliceStateless := h.connect(t, "alice-token", "/mcp", mcpclient.EraStateless)
			call := func(c *mcpclient.Client, tool, args string) string {
				t.Helper()
				res, err := c.CallTool(testkit.Context(t), "mcp.stateful."+tool, []byte(args))
				if err != nil {
					t.Fatalf("%s: %v", tool, err)
				}
				return string(res)
			}
			before := len(h.st.Requests())
			call(alice, "remember", `{"value":"apple"}`)
			call(bob, "remember", `{"value":"banana"}`)
			if res := call(alice, "recall", `{}`); !strings.Contains(res, "recalled apple") {
				t.Errorf("alice recalls %s, want apple", res)
			}
			if res := call(bob, "recall", `{}`); !strings.Contains(res, "recalled banana") {
				t.Errorf("bob recalls %s, want banana", res)
			}
			call(aliceStateless, "recall", `{}`)

			// Whose is each upstream session? Set by the credential of the
			// requests that opened and used it.
			owner := map[string]string{}
			callsBy := map[string]int{}
			for _, r := range h.st.Requests()[before:] {
				auth := authOf(r)
				exchanged := strings.HasPrefix(auth, "Bearer exchanged-alice-") || strings.HasPrefix(auth, "Bearer exchanged-bob-")
				switch {
				case r.Method == "tools/call" && !exchanged:
					t.Fatalf("a tools/call carried %q, want a caller's exchanged token", auth)
				case !exchanged && auth != "Bearer "+operatorToken:
					// The operator's own listings carry its credential.
					t.Fatalf("a %s %s carried %q, want an exchanged token or the operator's", r.HTTPMethod, r.Method, auth)
				}
				if r.Method == "tools/call" {
					callsBy[strings.Split(auth, "-")[1]]++
				}
				sid := r.Header.Get("Mcp-Session-Id")
				if sid == "" || auth == "" {
					continue
				}
				if prev, ok := owner[sid]; ok && prev != auth {
					t.Fatalf("upstream session %s carried %q and then %q: two callers (or tokens) in one session", sid, prev, auth)
				}
				owner[sid] = auth
			}
			if callsBy["alice"] != 3 || callsBy["bob"] != 2 {
				t.Fatalf("the server saw %v tools/calls by whose exchanged token, want alice 3, bob 2", callsBy)
			}
			if te.Exchanges("alice") != 1 || te.Exchanges("bob") != 1 {
				t.Fatalf("exchanges: alice %d, bob %d; want one each (the cache serves the rest)", te.Exchanges("alice"), te.Exchanges("bob"))
			}
			h.checkNeverSent(t)

			// The audit names the kind of credential, never its value.
			events := h.events(t)
			started := 0
			for _, ev := range events {
				if ev["type"] == "mcp.call.started" {
					started++
					if ev["credential"] != "exchanged" {
						t.Fatalf("mcp.call.started names credential %v, want exchanged", ev["credential"])
					}
				}
			}
			if started != 5 {
				t.Fatalf("%d mcp.call.started events, want 5", started)
			}
			if s := h.sink.String(); strings.Contains(s, "exchanged-alice-") || strings.Contains(s, "exchanged-bob-") {
				t.Fatal("the audit stream holds an exchanged token")
			}
		})
	}
}

// TestExchangeRefusedForwardsNothing: an exchange the token endpoint
// refuses ends the call with an error naming the server and the refusal's
// code; nothing reaches the server, and the audit says why.
func TestExchangeRefusedForwardsNothing(t *testing.T) {
	te := bridgetest.NewTokenEndpoint(t, "stateful", map[string]string{"alice-token": "alice"})
	h := newCredsHarness(t, "xchg-refused", false, v1alpha1.RemoteAuth{
		TokenExchange: &v1alpha1.TokenExchange{TokenURL: te.URL, Audience: "stateful", ClientSecretRef: v1alpha1.LocalSecretReference{Name: "bridge-client"}},
	}, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bridge-client"}, StringData: map[string]string{"client_id": te.ClientID, "client_secret": te.ClientSecret}})
	te.Refuse("access_denied")
	alice := h.connect(t, "alice-token", "/mcp", mcpclient.EraSession)
	// The operator's own listing of the catalog is not the call.
	if names := listNames(t, alice); len(names) == 0 {
		t.Fatal("alice sees no tools")
	}
	before := len(h.st.Requests())
	_, err := alice.CallTool(testkit.Context(t), "mcp.stateful.recall", []byte(`{}`))
	if rpcCode(err) != CodeUpstream || !strings.Contains(err.Error(), "xchg-refused/stateful") || !strings.Contains(err.Error(), "access_denied") {
		t.Fatalf("error %v, want %d naming the server and access_denied", err, CodeUpstream)
	}
	if strings.Contains(err.Error(), "alice-token") {
		t.Fatalf("the error repeats the caller's token: %v", err)
	}
	// Not sent, and refused the same until the authorization server
	// changes its mind.
	if d, ok := retryDataOf(err); !ok || d.Reason != upstreamcred.ReasonExchangeFailed || !d.says(false, -1, -1) {
		t.Errorf("error %v, want reason token_exchange_failed, retryable false", err)
	}
	if got := h.st.Requests()[before:]; len(got) != 0 {
		t.Fatalf("the server got %d requests after the refused exchange (first %s %s), want none", len(got), got[0].HTTPMethod, got[0].Method)
	}
	failed := false
	for _, ev := range h.events(t) {
		if ev["type"] == "tool.failed" && ev["reason"] == upstreamcred.ReasonExchangeFailed {
			failed = true
		}
	}
	if !failed {
		t.Fatal("no tool.failed event with reason token_exchange_failed")
	}
}

// TestExchangeUnavailableSaysWhetherToRetry: a credential that could not be
// had is retryable only where it may be had next time (the token endpoint
// not reached), not where it fails the same until someone changes the
// setup: the client Secret missing or without its keys.
func TestExchangeUnavailableSaysWhetherToRetry(t *testing.T) {
	tokenURL := fmt.Sprintf("http://127.0.0.1:%d/token", testkit.FreePort(t)) // nothing listens there
	h := newCredsHarness(t, "xchg-unavailable", false, v1alpha1.RemoteAuth{
		TokenExchange: &v1alpha1.TokenExchange{TokenURL: tokenURL, Audience: "stateful", ClientSecretRef: v1alpha1.LocalSecretReference{Name: "bridge-client"}},
	})
	alice := h.connect(t, "alice-token", "/mcp", mcpclient.EraSession)
	before := len(h.st.Requests())
	check := func(step, says string, retryable bool) {
		t.Helper()
		_, err := alice.CallTool(testkit.Context(t), "mcp.stateful.recall", []byte(`{}`))
		if d, ok := retryDataOf(err); rpcCode(err) != CodeUpstream || !ok || d.Reason != upstreamcred.ReasonUnavailable || !d.says(retryable, -1, -1) || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v; want %d credential_unavailable, retryable %v, saying %q", step, err, CodeUpstream, retryable, says)
		}
	}
	check("the client Secret missing", "could not be read", false)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bridge-client", Namespace: h.ns}, StringData: map[string]string{"client_id": "bridge"}}
	if err := h.k.Create(testkit.Context(t), sec); err != nil {
		t.Fatal(err)
	}
	check("the client Secret without client_secret", "needs the keys", false)
	sec.StringData = map[string]string{"client_id": "bridge", "client_secret": "s3cret"}
	if err := h.k.Update(testkit.Context(t), sec); err != nil {
		t.Fatal(err)
	}
	check("the token endpoint not reached", "could not be reached", true)
	for _, r := range h.st.Requests()[before:] {
		if r.Method == "tools/call" {
			t.Errorf("a tools/call reached the server though no credential was had")
		}
	}
	failed := 0
	for _, ev := range h.events(t) {
		if ev["type"] == "tool.failed" && ev["reason"] == upstreamcred.ReasonUnavailable {
			failed++
		}
	}
	if failed != 3 {
		t.Errorf("%d tool.failed events with reason credential_unavailable, want 3", failed)
	}
}

// TestPerCallerSecretUpstream: a caller with a Secret of its own sends its
// value; a caller without one is refused with an audit event, and the
// operator's own credential is never sent in its place.
func TestPerCallerSecretUpstream(t *testing.T) {
	aliceName := "system:serviceaccount:agents:alice"
	h := newCredsHarness(t, "per-caller", false, v1alpha1.RemoteAuth{
		BearerTokenSecretRef: &v1alpha1.SecretKeySelector{Name: "operator", Key: "token"},
		PerCallerSecret:      &v1alpha1.PerCallerSecret{Key: "pat", Header: "X-Api-Key"},
	}, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "alice-stateful",
		Labels:      map[string]string{v1alpha1.CallerLabel: v1alpha1.CallerLabelValue(aliceName)},
		Annotations: map[string]string{v1alpha1.CallerNameAnnotation: aliceName},
	}, StringData: map[string]string{"pat": "alice-personal-access-0123456789"}})

	alice := h.connect(t, "alice-token", "/mcp", mcpclient.EraSession)
	bob := h.connect(t, "bob-token", "/mcp", mcpclient.EraSession)
	before := len(h.st.Requests())
	if _, err := alice.CallTool(testkit.Context(t), "mcp.stateful.remember", []byte(`{"value":"apple"}`)); err != nil {
		t.Fatal(err)
	}
	_, err := bob.CallTool(testkit.Context(t), "mcp.stateful.remember", []byte(`{"value":"banana"}`))
	if rpcCode(err) != CodeUpstream || !strings.Contains(err.Error(), v1alpha1.CallerLabelValue("system:serviceaccount:agents:bob")) {
		t.Fatalf("bob, without a Secret, got %v; want an error saying which Secret to make", err)
	}
	if d, ok := retryDataOf(err); !ok || d.Reason != upstreamcred.ReasonMissing || !d.says(false, -1, -1) {
		t.Errorf("bob, without a Secret, got %v; want reason credential_missing, retryable false (until the Secret exists)", err)
	}
	calls := 0
	for _, r := range h.st.Requests()[before:] {
		if r.Method != "tools/call" && r.Method != "initialize" {
			continue
		}
		if r.Method == "tools/call" {
			calls++
		}
		if got := authOf(r); got != "X-Api-Key alice-personal-access-0123456789" || r.Header.Get("Authorization") != "" {
			t.Fatalf("a %s carried %q (Authorization %q), want alice's own value alone", r.Method, got, r.Header.Get("Authorization"))
		}
	}
	if calls != 1 {
		t.Fatalf("the server got %d tools/calls, want alice's one", calls)
	}
	h.checkNeverSent(t)
	refused := false
	for _, ev := range h.events(t) {
		if ev["type"] == "tool.failed" && ev["reason"] == upstreamcred.ReasonMissing && ev["subject"] == "system:serviceaccount:agents:bob" {
			refused = true
		}
	}
	if !refused {
		t.Fatal("no tool.failed event with reason credential_missing for bob")
	}
}

// TestCallersOwnExchangedTokensAtProvider: two people signed in at a real
// OAuth provider (internal/devidp: authorization code with PKCE, then
// RFC 8693 token exchange by the bridge's confidential client) call one
// server through the bridge, which checks their access tokens as an OAuth
// resource. The recording server sees, on each person's
// calls, a token the provider issued for that person (its sub) and for the
// server (its aud), the two people's tokens differ, and neither is the
// token the person's client presented to the bridge.
func TestCallersOwnExchangedTokensAtProvider(t *testing.T) {
	_, idp, err := devidp.NewTestServer(devidp.Config{BridgeResources: []string{publicURL}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(idp.Close)
	const resource = "https://stateful.example.test/mcp"
	own := map[string]*oauth2.Token{}
	for _, u := range []devidp.User{devidp.Alice, devidp.Bob} {
		tok, err := devidp.SignIn(testkit.Context(t), idp.URL, u, publicURL+"/mcp")
		if err != nil {
			t.Fatalf("signing in %s: %v", u.Username, err)
		}
		own[u.Email] = tok
	}
	cfg, err := identity.IssuerConfig(idp.URL)
	if err != nil {
		t.Fatal(err)
	}
	res, err := oauth.NewResource(publicURL, []string{idp.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	people, err := oauth.New(cfg, oauth.Options{Resource: res, Fallback: testCallers})
	if err != nil {
		t.Fatal(err)
	}
	h := newCredsHarnessWith(t, "xchg-idp", func(c *Config) { c.Auth, c.OAuth = people, res }, v1alpha1.RemoteAuth{
		TokenExchange: &v1alpha1.TokenExchange{TokenURL: idp.URL + "/oauth/token", Resource: resource, Scopes: []string{"repo"},
			ClientSecretRef: v1alpha1.LocalSecretReference{Name: "bridge-client"}},
	}, []v1alpha1.Subject{{Kind: v1alpha1.SubjectUser, Name: "oidc:alice@example.com"}, {Kind: v1alpha1.SubjectUser, Name: "oidc:bob@example.com"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bridge-client"}, StringData: map[string]string{"client_id": devidp.BridgeClientID, "client_secret": devidp.BridgeSecret}})

	before := len(h.st.Requests())
	for email, tok := range own {
		c := h.connect(t, tok.AccessToken, "/mcp", mcpclient.EraSession)
		if _, err := c.CallTool(testkit.Context(t), "mcp.stateful.remember", []byte(`{"value":"`+email+`"}`)); err != nil {
			t.Fatalf("%s: %v", email, err)
		}
	}
	bySubject := map[string]string{}
	for _, r := range h.st.Requests()[before:] {
		if r.Method != "tools/call" {
			continue
		}
		bearer := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		claims, err := devidp.Claims(bearer)
		if err != nil {
			t.Fatalf("the token sent upstream: %v", err)
		}
		sub, _ := claims["sub"].(string)
		if !slices.Contains(devidp.Audience(claims), resource) {
			t.Fatalf("the token sent for %s has audience %v, want %s", sub, claims["aud"], resource)
		}
		for _, tok := range own {
			if bearer == tok.AccessToken {
				t.Fatalf("a person's own access token was sent upstream (sub %s)", sub)
			}
		}
		bySubject[sub] = bearer
	}
	if len(bySubject) != 2 || bySubject["alice@example.com"] == "" || bySubject["bob@example.com"] == "" || bySubject["alice@example.com"] == bySubject["bob@example.com"] {
		t.Fatalf("the server saw tokens for %v, want one of alice's and one of bob's, different", slices.Collect(maps.Keys(bySubject)))
	}
}

// TestCallersCredentialsRedacted: a server that answers each caller with
// the credential it was sent and the previous caller's never shows either
// to anyone: exchanged tokens (of a shape no rule knows) are redacted as
// the values they are, in the answer and in the audit stream. The spans
// name the kind of credential, never a value.
func TestCallersCredentialsRedacted(t *testing.T) {
	te := bridgetest.NewTokenEndpoint(t, "stateful", map[string]string{"alice-token": "alice", "bob-token": "bob"})
	spans := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	h := newCredsHarnessOf(t, "xchg-leaky", false, func(c *Config) { c.Tracer = provider.Tracer("creds-test") }, v1alpha1.RemoteAuth{
		TokenExchange: &v1alpha1.TokenExchange{TokenURL: te.URL, Audience: "stateful", ClientSecretRef: v1alpha1.LocalSecretReference{Name: "bridge-client"}},
	}, []v1alpha1.Subject{sa("agents", "alice"), sa("agents", "bob")},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bridge-client"}, StringData: map[string]string{"client_id": te.ClientID, "client_secret": te.ClientSecret}})
	alice := h.connect(t, "alice-token", "/mcp", mcpclient.EraSession)
	bob := h.connect(t, "bob-token", "/mcp", mcpclient.EraStateless)
	var answers []string
	for _, c := range []*mcpclient.Client{alice, bob} {
		res, err := c.CallTool(testkit.Context(t), "mcp.stateful.whoami", []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, string(res))
	}
	sent := map[string]bool{}
	for _, r := range h.st.Requests() {
		if r.Method == "tools/call" {
			sent[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")] = true
		}
	}
	if len(sent) != 2 {
		t.Fatalf("the server got %d distinct credentials on the calls, want alice's and bob's", len(sent))
	}
	audit := h.sink.String()
	for token := range sent {
		for _, a := range answers {
			if strings.Contains(a, token) {
				t.Fatalf("an answer shows the exchanged token %q: %s", token, a)
			}
		}
		if strings.Contains(audit, token) {
			t.Fatalf("the audit stream shows the exchanged token %q", token)
		}
	}
	if !strings.Contains(answers[1], "[REDACTED:") || strings.Count(answers[1], "[REDACTED:") < 2 {
		t.Fatalf("bob's answer does not show both credentials redacted: %s", answers[1])
	}
	kinds := map[string]int{}
	for _, s := range spans.Ended() {
		for _, kv := range s.Attributes() {
			for token := range sent {
				if strings.Contains(kv.Value.String(), token) {
					t.Fatalf("span %s attribute %s shows the exchanged token", s.Name(), kv.Key)
				}
			}
			if kv.Key == attrCredential {
				kinds[s.Name()+"="+kv.Value.AsString()]++
			}
		}
	}
	if kinds["credential=exchanged"] != 2 || kinds["tools/call whoami=exchanged"] != 2 {
		t.Fatalf("spans naming the credential: %v; want the credential stage and the call to the server, twice each, exchanged", kinds)
	}
}

// TestCallersCredentialsRedactedFromFailures: a server that refuses a
// caller's call with an HTTP error whose body quotes the bare token it was
// sent: neither the caller's answer nor the audit stream shows the token.
func TestCallersCredentialsRedactedFromFailures(t *testing.T) {
	te := bridgetest.NewTokenEndpoint(t, "stateful", map[string]string{"alice-token": "alice"})
	h := newCredsHarness(t, "xchg-refusing", false, v1alpha1.RemoteAuth{
		TokenExchange: &v1alpha1.TokenExchange{TokenURL: te.URL, Audience: "stateful", ClientSecretRef: v1alpha1.LocalSecretReference{Name: "bridge-client"}},
	}, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bridge-client"}, StringData: map[string]string{"client_id": te.ClientID, "client_secret": te.ClientSecret}})
	// In front of the server: tools/calls with an exchanged token are
	// refused, quoting it.
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "); strings.HasPrefix(tok, "exchanged-") {
			http.Error(w, "the token "+tok+" may not call tools", http.StatusForbidden)
			return
		}
		httputil.NewSingleHostReverseProxy(mustParse(t, h.st.URL)).ServeHTTP(w, r)
	}))
	t.Cleanup(refusing.Close)
	h.reg.Update(routes.Build([]v1alpha1.MCPServer{h.server}), func(s *routes.Server) (upstream.Target, error) {
		tg, err := target(s)
		tg.URL, tg.Credentials = refusing.URL+"/mcp", "refusing"
		return tg, err
	})
	alice := h.connect(t, "alice-token", "/mcp", mcpclient.EraStateless)
	_, err := alice.CallTool(testkit.Context(t), "mcp.stateful.recall", []byte(`{}`))
	if err == nil {
		t.Fatal("the refused call succeeded")
	}
	const token = "exchanged-alice-1-for-stateful"
	if strings.Contains(err.Error(), token) {
		t.Fatalf("the caller's answer shows its exchanged token: %v", err)
	}
	h.events(t) // flushed
	if audit := h.sink.String(); strings.Contains(audit, token) || !strings.Contains(audit, "may not call tools") {
		t.Fatalf("the audit stream shows the exchanged token, or not the failure: %s", audit)
	}
}

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = ""
	return u
}

// recordingProxy is a reverse proxy in front of url that records each
// request's JSON-RPC method and Authorization header.
type recordingProxy struct {
	URL  string
	mu   sync.Mutex
	seen []bridgetest.Request
}

func newRecordingProxy(t *testing.T, target string) *recordingProxy {
	t.Helper()
	p := &recordingProxy{}
	rp := httputil.NewSingleHostReverseProxy(mustParse(t, target))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct{ Method string }
		_ = json.Unmarshal(body, &m)
		p.mu.Lock()
		p.seen = append(p.seen, bridgetest.Request{HTTPMethod: r.Method, Method: m.Method, Header: r.Header.Clone()})
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL + "/mcp"
	return p
}

func (p *recordingProxy) requests() []bridgetest.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]bridgetest.Request(nil), p.seen...)
}

// TestCallersOwnCredentialForSkills: skills/get, and the check of a skill
// file read with resources/read (which gets the skill's entry again), go
// upstream with the caller's exchanged token, never the operator's.
func TestCallersOwnCredentialForSkills(t *testing.T) {
	peer := testpeers.StartSkillsServer(t, map[string]string{"acme/billing/refunds": "Process refunds per policy"})
	peer.SetFile("acme/billing/refunds", "examples/email.md", "Dear customer,")
	proxy := newRecordingProxy(t, peer.URL)
	server := bridgetest.Published(t, "xchg-skills", "ops", proxy.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("xchg-skills", "skills", []v1alpha1.Subject{sa("agents", "alice")})
	pol.Spec.Skills = []v1alpha1.SkillRule{{Skills: []string{"mcp.ops.acme.**"}, Decision: v1alpha1.DecisionAllow}}
	te := bridgetest.NewTokenEndpoint(t, "ops", map[string]string{"alice-token": "alice"})
	h, _ := newCredsBridge(t, server, []v1alpha1.ToolPolicy{pol}, nil, v1alpha1.RemoteAuth{
		TokenExchange:        &v1alpha1.TokenExchange{TokenURL: te.URL, Audience: "ops", ClientSecretRef: v1alpha1.LocalSecretReference{Name: "bridge-client"}},
		BearerTokenSecretRef: &v1alpha1.SecretKeySelector{Name: "operator", Key: "token"},
	}, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bridge-client"}, StringData: map[string]string{"client_id": te.ClientID, "client_secret": te.ClientSecret}})
	before := len(proxy.requests())
	alice := h.connect(t, "alice-token", "/mcp", mcpclient.EraSession)
	refunds := BridgeURI("ops", "skill://acme/billing/refunds/SKILL.md")
	email := BridgeURI("ops", "skill://acme/billing/refunds/examples/email.md")
	if _, err := alice.Call(testkit.Context(t), "skills/get", json.RawMessage(`{"uri":"`+refunds+`"}`)); err != nil {
		t.Fatalf("skills/get: %v", err)
	}
	if _, err := alice.Call(testkit.Context(t), "resources/read", json.RawMessage(`{"uri":"`+email+`"}`)); err != nil {
		t.Fatalf("resources/read of a skill file: %v", err)
	}
	counted := map[string]int{}
	for _, r := range proxy.requests()[before:] {
		if r.Method != "skills/get" && r.Method != "resources/read" {
			continue
		}
		if got := r.Header.Get("Authorization"); got != "Bearer exchanged-alice-1-for-ops" {
			t.Fatalf("a %s request carried %q, want alice's exchanged token", r.Method, got)
		}
		counted[r.Method]++
	}
	// skills/get once for the get, once more to check the file read.
	if counted["skills/get"] != 2 || counted["resources/read"] != 1 {
		t.Fatalf("requests upstream: %v, want skills/get twice and resources/read once", counted)
	}
	requested := 0
	for _, ev := range h.events(t) {
		if ev["type"] == "mcp.resource.requested" {
			requested++
			if ev["credential"] != "exchanged" {
				t.Fatalf("mcp.resource.requested names credential %v, want exchanged", ev["credential"])
			}
		}
	}
	if requested != 2 {
		t.Fatalf("%d mcp.resource.requested events, want 2 (the skill got, the file read)", requested)
	}
}

// TestCallersOwnCredentialForPrompts: prompts/get carries the caller's
// exchanged token, and its audit event names the kind.
func TestCallersOwnCredentialForPrompts(t *testing.T) {
	te := bridgetest.NewTokenEndpoint(t, "stateful", map[string]string{"alice-token": "alice"})
	h := newCredsHarness(t, "xchg-prompts", false, v1alpha1.RemoteAuth{
		TokenExchange:        &v1alpha1.TokenExchange{TokenURL: te.URL, Audience: "stateful", ClientSecretRef: v1alpha1.LocalSecretReference{Name: "bridge-client"}},
		BearerTokenSecretRef: &v1alpha1.SecretKeySelector{Name: "operator", Key: "token"},
	}, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bridge-client"}, StringData: map[string]string{"client_id": te.ClientID, "client_secret": te.ClientSecret}})
	alice := h.connect(t, "alice-token", "/mcp", mcpclient.EraSession)
	before := len(h.st.Requests())
	if _, err := alice.Call(testkit.Context(t), "prompts/get", json.RawMessage(`{"name":"mcp.stateful.greet"}`)); err != nil {
		t.Fatalf("prompts/get: %v", err)
	}
	got := 0
	for _, r := range h.st.Requests()[before:] {
		if r.Method == "prompts/get" {
			got++
			if a := r.Header.Get("Authorization"); a != "Bearer exchanged-alice-1-for-stateful" {
				t.Fatalf("prompts/get carried %q, want alice's exchanged token", a)
			}
		}
	}
	if got != 1 {
		t.Fatalf("%d prompts/get requests upstream, want 1", got)
	}
	invoked := false
	for _, ev := range h.events(t) {
		if ev["type"] == "mcp.prompt.invoked" {
			invoked = ev["credential"] == "exchanged"
		}
	}
	if !invoked {
		t.Fatal("mcp.prompt.invoked does not name the credential exchanged")
	}
}

// TestAnonymousCallerHasNoOwnCredential: a bridge that checks no token
// (--insecure-anonymous) refuses calls to a server whose credential is
// each caller's, saying why, and exchanges nothing: the token the request
// carries was never verified.
func TestAnonymousCallerHasNoOwnCredential(t *testing.T) {
	te := bridgetest.NewTokenEndpoint(t, "stateful", map[string]string{"alice-token": "alice"})
	h := newCredsHarnessWith(t, "xchg-anonymous", func(c *Config) { c.Auth = authn.Anonymous{} }, v1alpha1.RemoteAuth{
		TokenExchange: &v1alpha1.TokenExchange{TokenURL: te.URL, Audience: "stateful", ClientSecretRef: v1alpha1.LocalSecretReference{Name: "bridge-client"}},
	}, []v1alpha1.Subject{{Kind: v1alpha1.SubjectUser, Name: "system:anonymous"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bridge-client"}, StringData: map[string]string{"client_id": te.ClientID, "client_secret": te.ClientSecret}})
	c := h.connect(t, "alice-token", "/mcp", mcpclient.EraStateless)
	before := len(h.st.Requests())
	_, err := c.CallTool(testkit.Context(t), "mcp.stateful.recall", []byte(`{}`))
	if rpcCode(err) != CodeUpstream || !strings.Contains(err.Error(), "anonymous") || !strings.Contains(err.Error(), "xchg-anonymous/stateful") {
		t.Fatalf("error %v, want a refusal naming the server and the anonymous caller", err)
	}
	for _, r := range h.st.Requests()[before:] {
		if r.Header.Get("Authorization") != "Bearer "+operatorToken {
			t.Fatalf("a %s request reached the server with a caller's credential", r.Method)
		}
	}
	if n := te.Exchanges("alice"); n != 0 {
		t.Fatalf("%d exchanges were made, want none", n)
	}
}

// TestUpstreamSessionCapSharedByCallers: --max-upstream-sessions bounds a
// server's upstream sessions as a whole, callers' own connections
// included. At a cap of 1, a second caller's session on a session-only
// server is refused as busy while the first caller's session is open, and
// served once it ended.
func TestUpstreamSessionCapSharedByCallers(t *testing.T) {
	te := bridgetest.NewTokenEndpoint(t, "stateful", map[string]string{"alice-token": "alice", "bob-token": "bob"})
	h := newCredsHarnessOf(t, "xchg-cap", true, func(c *Config) { c.Registry.Options.MaxAgentSessions = 1 }, v1alpha1.RemoteAuth{
		TokenExchange: &v1alpha1.TokenExchange{TokenURL: te.URL, Audience: "stateful", ClientSecretRef: v1alpha1.LocalSecretReference{Name: "bridge-client"}},
	}, []v1alpha1.Subject{sa("agents", "alice"), sa("agents", "bob")},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bridge-client"}, StringData: map[string]string{"client_id": te.ClientID, "client_secret": te.ClientSecret}})
	alice := h.connect(t, "alice-token", "/mcp", mcpclient.EraSession)
	bob := h.connect(t, "bob-token", "/mcp", mcpclient.EraSession)
	if _, err := alice.CallTool(testkit.Context(t), "mcp.stateful.remember", []byte(`{"value":"a"}`)); err != nil {
		t.Fatal(err)
	}
	_, err := bob.CallTool(testkit.Context(t), "mcp.stateful.remember", []byte(`{"value":"b"}`))
	if rpcCode(err) != CodeUpstream || !strings.Contains(err.Error(), "limit of 1 upstream sessions") {
		t.Fatalf("bob's session beside alice's at a cap of 1: %v, want refused as busy", err)
	}
	alice.Close() // ends her session, and its upstream one
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err = bob.CallTool(testkit.Context(t), "mcp.stateful.remember", []byte(`{"value":"b"}`))
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("bob's call after alice's session ended: %v", err)
	}
}
