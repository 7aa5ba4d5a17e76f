package mcpbridge

import (
	"slices"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// Two session-era agents calling a server that keeps state per session,
// through the bridge, each see their own state (each agent session has an
// upstream session of its own), and an agent's DELETE ends its upstream
// session (DELETE upstream) and no other. A 2026-07-28 agent's calls go
// without a session.
func TestAgentSessionsHaveTheirOwnUpstreamSessions(t *testing.T) {
	st := bridgetest.NewStateful(t, false)
	server := bridgetest.Published(t, "agents", "stateful", st.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("agents", "callers", []v1alpha1.Subject{sa("agents", "alice"), sa("agents", "bob")}, rule("allow", "mcp.stateful.*"))
	h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, nil)
	alice := h.connect(t, "alice-token", "/mcp", client.EraSession)
	bob := h.connect(t, "bob-token", "/mcp", client.EraSession)
	stateless := h.connect(t, "alice-token", "/mcp", client.EraStateless)
	st.Calls()

	call := func(c *client.Client, tool, args string) string {
		t.Helper()
		res, err := c.CallTool(testkit.Context(t), "mcp.stateful."+tool, []byte(args))
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return string(res)
	}
	call(alice, "remember", `{"value":"apple"}`)
	call(bob, "remember", `{"value":"banana"}`)
	if res := call(alice, "recall", `{}`); !strings.Contains(res, "recalled apple") {
		t.Errorf("alice's session recalls %s; want its own value, apple", res)
	}
	if res := call(bob, "recall", `{}`); !strings.Contains(res, "recalled banana") {
		t.Errorf("bob's session recalls %s; want its own value, banana", res)
	}
	if res := call(stateless, "recall", `{}`); strings.Contains(res, "apple") || strings.Contains(res, "banana") {
		t.Errorf("a 2026-07-28 agent recalls %s; want nothing of the sessions'", res)
	}
	seen := st.Calls()
	if len(seen) != 5 || seen[0] == "" || seen[1] == "" || seen[0] == seen[1] || !slices.Equal(seen[2:4], seen[:2]) || seen[4] != "" {
		t.Fatalf("the server saw the calls in sessions %q; want alice's and bob's own sessions, twice, then one call without a session", seen)
	}

	alice.Close() // the agent's DELETE
	testkit.Eventually(t, "alice's upstream session DELETEd after alice's session ended", func() bool { return slices.Contains(st.Deleted(), seen[0]) })
	if slices.Contains(st.Deleted(), seen[1]) {
		t.Fatalf("bob's upstream session was DELETEd with alice's: %q", st.Deleted())
	}
	if res := call(bob, "recall", `{}`); !strings.Contains(res, "recalled banana") {
		t.Errorf("bob's session after alice left recalls %s; want banana", res)
	}
}
