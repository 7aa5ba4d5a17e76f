package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/identity"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/artifact"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/signed"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/policy"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// tokenAuth maps fixed tokens to identities. The bridge's own tests use it
// to have several callers without an API server; TokenReview itself is
// tested against envtest's real API server (authn_envtest_test.go).
type tokenAuth map[string]policy.Subject

func (a tokenAuth) Authenticate(_ context.Context, token string) (identity.Identity, error) {
	s, ok := a[token]
	if !ok {
		return identity.Identity{}, authn.ErrUnauthenticated
	}
	return identity.FromUserInfo(s.Username(), s.Groups), nil
}

var testCallers = tokenAuth{
	"alice-token": policy.ServiceAccount("agents", "alice"),
	"bob-token":   policy.ServiceAccount("agents", "bob"),
}

var testKey = []byte("0123456789abcdef0123456789abcdef")

type harness struct {
	b     *Bridge
	reg   *routes.Registry
	url   string
	sink  *bridgetest.Sink
	audit *audit.Writer
}

func target(s *routes.Server) (upstream.Target, error) {
	return upstream.Target{Namespace: s.Namespace, Name: s.Name, URL: s.URL, Pod: s.Pod}, nil
}

func newHarness(t testing.TB, servers []v1alpha1.MCPServer, policies []v1alpha1.ToolPolicy, mod func(*Config)) *harness {
	t.Helper()
	reg := routes.NewRegistry(upstream.Options{}, testr.NewWithInterface(t, testr.Options{}))
	reg.Update(routes.Build(servers), target)
	sealer, err := signed.New(testKey)
	if err != nil {
		t.Fatal(err)
	}
	sink := &bridgetest.Sink{}
	aw := audit.New(audit.Options{Sink: sink, ArgsMode: audit.ArgsFull})
	store, err := artifact.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Registry: reg, Auth: testCallers, Sessions: session.NewManager(sealer, session.Options{}), Sealer: sealer,
		Audit: aw, Pipeline: &output.Pipeline{Store: store}, Artifacts: store, Limiter: policy.NewRateLimiter(nil),
		Log: testr.NewWithInterface(t, testr.Options{}), CallTimeout: 20 * time.Second,
	}
	if mod != nil {
		mod(&cfg)
	}
	b := New(cfg)
	e, errs := policy.Compile(policies)
	if len(errs) > 0 {
		t.Fatalf("policies do not compile: %v", errs)
	}
	b.SetEngine(e)
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(func() {
		srv.Close()
		// Retire the servers' connections (they keep subscriptions alive
		// on their own) before the servers go away.
		reg.Update(routes.Build(nil), target)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = aw.Close(ctx)
	})
	return &harness{b: b, reg: reg, url: srv.URL, sink: sink, audit: aw}
}

// connect is an agent speaking era through the bridge with our own client.
func (h *harness) connect(t testing.TB, token, path string, era client.Era) *client.Client {
	t.Helper()
	conn, err := streamhttp.New(streamhttp.Options{URL: h.url + path, BearerToken: token, MaxMessageBytes: 128 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, conn, client.Options{Era: era, ClientName: "test-agent"})
	if err != nil {
		t.Fatalf("while connecting to the bridge at %s: %v", path, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// events are the audit events written so far.
func (h *harness) events(t *testing.T) []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.audit.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return sinkEvents(t, h.sink)
}

// typesOf are the types of events about one tool call, in order.
func typesOf(events []map[string]any, toolCallID string) []string {
	var out []string
	for _, ev := range events {
		if ev["toolCallId"] == toolCallID {
			out = append(out, ev["type"].(string))
		}
	}
	return out
}

// lastCallID is the toolCallId of the last permission.requested for tool.
func lastCallID(events []map[string]any, tool string) string {
	id := ""
	for _, ev := range events {
		if ev["type"] == "permission.requested" && ev["tool"] == tool {
			id, _ = ev["toolCallId"].(string)
		}
	}
	return id
}

func toolPolicy(namespace, name string, subjects []v1alpha1.Subject, rules ...v1alpha1.ToolRule) v1alpha1.ToolPolicy {
	var p v1alpha1.ToolPolicy
	p.Namespace, p.Name = namespace, name
	p.Spec.Subjects = subjects
	p.Spec.Rules = rules
	return p
}

func sa(namespace, name string) v1alpha1.Subject {
	return v1alpha1.Subject{Kind: v1alpha1.SubjectServiceAccount, Namespace: namespace, Name: name}
}

func rule(d v1alpha1.Decision, tools ...string) v1alpha1.ToolRule {
	return v1alpha1.ToolRule{Tools: tools, Decision: d}
}

// listNames are the tool names a client sees.
func listNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	items, err := c.ListTools(testkit.Context(t), client.Limits{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, it := range items {
		var tool struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(it, &tool)
		names = append(names, tool.Name)
	}
	return names
}

// rpcCode is the JSON-RPC error code of err, 0 when it is none.
func rpcCode(err error) int {
	var e *jsonrpc.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// retryable is the retry verdict in a JSON-RPC error's data, and whether
// there is one.
func retryable(err error) (verdict, ok bool) {
	var e *jsonrpc.Error
	if !errors.As(err, &e) {
		return false, false
	}
	var data struct {
		Retryable *bool `json:"retryable"`
	}
	if json.Unmarshal(e.Data, &data) != nil || data.Retryable == nil {
		return false, false
	}
	return *data.Retryable, true
}

// firstText is the text of the first content item of a tool result.
func firstText(t *testing.T, res json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(res, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("not a tool result with content: %s", res)
	}
	return r.Content[0].Text
}
