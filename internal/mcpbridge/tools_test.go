package mcpbridge

import (
	"slices"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// TestToolsThroughTheBridge runs an agent in both protocol eras, against a
// real upstream (the go-sdk everything-server in the session era): listing
// shows only what the caller may call, calls are prefixed, names are strict,
// deny and an ask that cannot be asked are refused, and each call leaves its
// event chain.
func TestToolsThroughTheBridge(t *testing.T) {
	up := testpeers.GoEverything(t, false)
	server := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice")},
		rule("allow", "mcp.everything.test_simple_text", "mcp.everything.test_error_handling", "mcp.everything.test_audio_content"),
		rule("deny", "mcp.everything.test_audio_content"),
		rule("ask", "mcp.everything.test_image_content"),
	)
	h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, nil)

	for _, era := range []client.Era{client.EraSession, client.EraStateless} {
		t.Run(string(era), func(t *testing.T) {
			c := h.connect(t, "alice-token", "/mcp", era)
			if c.Era() != era {
				t.Fatalf("negotiated era %s, want %s", c.Era(), era)
			}
			names := listNames(t, c)
			want := []string{"mcp.everything.test_error_handling", "mcp.everything.test_image_content", "mcp.everything.test_simple_text"}
			if !slices.Equal(names, want) {
				t.Fatalf("tools/list = %v, want %v", names, want)
			}
			res, err := c.CallTool(testkit.Context(t), "mcp.everything.test_simple_text", nil)
			if err != nil {
				t.Fatalf("allowed call failed: %v", err)
			}
			if text := firstText(t, res); !strings.HasPrefix(text, "[mcp:everything:test_simple_text] ") {
				t.Fatalf("text %q lacks the server prefix", text)
			}
			id := lastCallID(h.events(t), "mcp.everything.test_simple_text")
			chain := typesOf(h.events(t), id)
			wantChain := []string{"permission.requested", "permission.resolved", "mcp.call.started", "tool.started", "mcp.call.completed", "tool.completed"}
			if !slices.Equal(chain, wantChain) {
				t.Fatalf("event chain %v, want %v", chain, wantChain)
			}

			_, err = c.CallTool(testkit.Context(t), "test_simple_text", nil)
			if rpcCode(err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), "never guessed") {
				t.Fatalf("a bare name must be refused, not guessed: %v", err)
			}
			_, err = c.CallTool(testkit.Context(t), "mcp.everything.test_audio_content", nil)
			if rpcCode(err) != CodeDenied {
				t.Fatalf("a denied tool must be refused with %d: %v", CodeDenied, err)
			}
			_, err = c.CallTool(testkit.Context(t), "mcp.everything.test_image_content", nil)
			if rpcCode(err) != CodeDenied || !strings.Contains(err.Error(), "approval_unavailable") {
				t.Fatalf("an ask the client cannot answer must deny with approval_unavailable: %v", err)
			}
			// No channel to ask: asked again, it is refused the same.
			if d, ok := retryDataOf(err); !ok || !d.says(false, -1, -1) {
				t.Errorf("an ask no channel can carry: %v, want retryable false", err)
			}
			_, err = c.CallTool(testkit.Context(t), "mcp.everything.no_such_tool", nil)
			if rpcCode(err) != jsonrpc.CodeInvalidParams {
				t.Fatalf("an unknown tool must be an invalid-params error: %v", err)
			}
			if d, ok := retryDataOf(err); !ok || !d.says(false, -1, -1) {
				t.Errorf("an unknown tool: %v, want retryable false (refused the same until the catalogs change)", err)
			}
			res, err = c.CallTool(testkit.Context(t), "mcp.everything.test_error_handling", nil)
			if err != nil || !strings.Contains(string(res), `"isError":true`) {
				t.Fatalf("a tool error must pass through as a result with isError: %s, %v", res, err)
			}
		})
	}
	t.Run("another caller sees nothing", func(t *testing.T) {
		c := h.connect(t, "bob-token", "/mcp", client.EraSession)
		if names := listNames(t, c); len(names) != 0 {
			t.Fatalf("bob has no policy but sees %v", names)
		}
		if _, err := c.CallTool(testkit.Context(t), "mcp.everything.test_simple_text", nil); rpcCode(err) != CodeDenied {
			t.Fatalf("bob's call must be denied: %v", err)
		}
	})
	t.Run("server endpoint uses upstream names", func(t *testing.T) {
		c := h.connect(t, "alice-token", "/servers/everything/mcp", client.EraSession)
		names := listNames(t, c)
		if !slices.Contains(names, "test_simple_text") || slices.Contains(names, "test_audio_content") {
			t.Fatalf("tools/list on the server endpoint = %v", names)
		}
		res, err := c.CallTool(testkit.Context(t), "test_simple_text", nil)
		if err != nil || !strings.HasPrefix(firstText(t, res), "[mcp:everything:test_simple_text] ") {
			t.Fatalf("call on the server endpoint: %s, %v", res, err)
		}
	})
}
