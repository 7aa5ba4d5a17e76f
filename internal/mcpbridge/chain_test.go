package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-operator/mcp-operator/internal/testpeers"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/signed"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite the golden event chains in testdata")

// steppingClock advances 1.5 ms at every reading, so durations and times in
// the stream are fixed however fast the machine is.
type steppingClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *steppingClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(1500 * time.Microsecond)
	return c.t
}

// TestEventChainsByteForByte: the event chain of one tool call through the
// bridge, and of one call the server answers with a JSON-RPC error, are
// exactly the golden streams (fixed clock, session and call ids).
func TestEventChainsByteForByte(t *testing.T) {
	up := testpeers.GoEverything(t, false)
	server := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "researchers", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.*"))
	for _, tc := range []struct {
		golden, tool string
		args         json.RawMessage
		wantErr      bool
	}{
		{"chain-success.jsonl", "mcp.everything.test_simple_text", json.RawMessage(`{"note":"token ghp_abcdefghijklmnopqrstuvwxyz0123456789"}`), false},
		{"chain-failure.jsonl", "mcp.everything.test_missing_capability", nil, true},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			goldenChain(t, tc.golden, server, pol, func(c *client.Client) {
				_, err := c.CallTool(testkit.Context(t), tc.tool, tc.args)
				if (err != nil) != tc.wantErr {
					t.Fatalf("call: %v (want an error: %v)", err, tc.wantErr)
				}
			})
		})
	}
}

// TestReadAndPromptFailureChains: a read, a subscription and a prompt that fail upstream
// end their event chains as a failed call does (mcp.call.failed, then
// tool.failed with the same reasons), byte for byte. The prompt's server
// is the official Go SDK's, with a prompt whose handler fails.
func TestReadAndPromptFailureChains(t *testing.T) {
	up := testpeers.GoEverything(t, false)
	everything := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	failing := mcp.NewServer(&mcp.Implementation{Name: "failing", Version: "1"}, nil)
	failing.AddPrompt(&mcp.Prompt{Name: "broken"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return nil, errors.New("the template could not be expanded")
	})
	// A resource, and no subscriptions: a subscription to it fails.
	failing.AddResource(&mcp.Resource{URI: "test://plain", Name: "plain"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://plain", Text: "plain"}}}, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return failing }, nil))
	t.Cleanup(srv.Close)
	prompts := bridgetest.Published(t, "tools", "prompts", srv.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "researchers", []v1alpha1.Subject{sa("agents", "alice")})
	pol.Spec.Resources = []v1alpha1.ResourceRule{{Servers: []string{"everything", "prompts"}, Decision: "allow"}}
	pol.Spec.Prompts = []v1alpha1.PromptRule{{Prompts: []string{"mcp.prompts.*"}, Decision: "allow"}}

	t.Run("chain-read-failure.jsonl", func(t *testing.T) {
		goldenChain(t, "chain-read-failure.jsonl", everything, pol, func(c *client.Client) {
			if _, err := c.Call(testkit.Context(t), "resources/read", json.RawMessage(`{"uri":"mcp://everything/test://no-such-resource"}`)); err == nil {
				t.Fatal("a read of a resource the server does not have must fail")
			}
		})
	})
	// A subscription allowed and then refused by its server ends its chain
	// as a failed read does, with tool.failed.
	t.Run("chain-subscribe-failure.jsonl", func(t *testing.T) {
		goldenChain(t, "chain-subscribe-failure.jsonl", prompts, pol, func(c *client.Client) {
			if _, err := c.Call(testkit.Context(t), "resources/subscribe", json.RawMessage(`{"uri":"mcp://prompts/test://plain"}`)); rpcCode(err) != jsonrpc.CodeInvalidParams {
				t.Fatalf("a subscription to a server without subscriptions: %v, want -32602", err)
			}
		})
	})
	t.Run("chain-prompt-failure.jsonl", func(t *testing.T) {
		goldenChain(t, "chain-prompt-failure.jsonl", prompts, pol, func(c *client.Client) {
			if _, err := c.Call(testkit.Context(t), "prompts/get", json.RawMessage(`{"name":"mcp.prompts.broken"}`)); err == nil {
				t.Fatal("a prompt whose expansion fails must fail")
			}
		})
	})
}

// goldenChain runs do as alice's session-era agent against a bridge with
// a fixed clock, session and call ids, and compares the audit stream with
// testdata/golden (rewritten with -update).
func goldenChain(t *testing.T, golden string, server v1alpha1.MCPServer, pol v1alpha1.ToolPolicy, do func(*client.Client)) {
	t.Helper()
	clock := &steppingClock{t: time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC)}
	var n int
	sealer, _ := signed.New(testKey)
	h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, func(c *Config) {
		c.Clock = clock.now
		c.NewCallID = func() string { n++; return fmt.Sprintf("call-%d", n) }
		c.Sessions = session.NewManager(sealer, session.Options{NewID: func() string { return "3f1c9a7e-5b2d-4e8a-9c6f-0d1e2f3a4b5c" }})
	})
	// The audit writer reads the same clock.
	h.audit.Close(context.Background())
	h.sink = &bridgetest.Sink{}
	h.audit = audit.New(audit.Options{Sink: h.sink, Clock: clock.now})
	h.b.cfg.Audit = h.audit

	do(h.connect(t, "alice-token", "/mcp", client.EraSession))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.audit.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := h.sink.String()
	path := filepath.Join("testdata", golden)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Fatalf("the event chain differs from %s:\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}
