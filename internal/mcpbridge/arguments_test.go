package mcpbridge

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// The bridge hands a call's arguments to the engine as JSON text, decoded
// only when a condition reads them: a `when` on the arguments still decides
// each call by its own arguments, and arguments that are not an object are
// refused before any decision.
func TestArgumentsReachTheConditions(t *testing.T) {
	up := testpeers.NodeEverything(t)
	server := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice")},
		v1alpha1.ToolRule{Tools: []string{"mcp.everything.echo"}, Decision: "allow", When: "args.message.startsWith('ok')"})
	h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, nil)
	c := h.connect(t, "alice-token", "/mcp", client.EraSession)

	res, err := c.CallTool(testkit.Context(t), "mcp.everything.echo", json.RawMessage(`{"message":"ok, go"}`))
	if err != nil || !strings.Contains(firstText(t, res), "ok, go") {
		t.Fatalf("a call whose arguments meet the condition: %s, %v", res, err)
	}
	_, err = c.CallTool(testkit.Context(t), "mcp.everything.echo", json.RawMessage(`{"message":"not ok"}`))
	if rpcCode(err) != CodeDenied {
		t.Fatalf("a call whose arguments fail the condition must be denied: %v", err)
	}
	for _, args := range []string{`["ok"]`, `"ok"`, `7`} {
		_, err = c.CallToolParams(testkit.Context(t), json.RawMessage(`{"name":"mcp.everything.echo","arguments":`+args+`}`))
		if rpcCode(err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), "must be a JSON object") {
			t.Errorf("arguments %s: %v, want an invalid-params error", args, err)
		}
	}
}
