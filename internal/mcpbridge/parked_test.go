package mcpbridge

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/policy"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// TestParkedCall: a session-era server (the go-sdk everything-server) asks
// for input in the middle of a call; a 2026-07-28 agent can only be asked
// with an input_required result. The call waits, parked on the replica,
// for the agent's retry, whose answer reaches the waiting server: with the
// official Go SDK client, and by hand to check that a parked call serves
// only its own caller, that it is held by one replica only, and that an
// unanswered one ends at its deadline.
func TestParkedCall(t *testing.T) {
	up := testpeers.GoEverything(t, false)
	srv := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "callers", []v1alpha1.Subject{sa("agents", "alice"), sa("agents", "bob")}, rule("allow", "mcp.everything.*"))
	h := newHarness(t, []v1alpha1.MCPServer{srv}, []v1alpha1.ToolPolicy{pol}, func(c *Config) { c.CallTimeout = 5 * time.Second })
	const tool = "mcp.everything.test_elicitation"

	t.Run("the official Go SDK client answers and the server gets it", func(t *testing.T) {
		cs, asked := answeringGoSDKAgent(t, h.url+"/mcp", "alice-token", map[string]any{"username": "ada"}, "")
		res, err := cs.CallTool(testkit.Context(t), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"message": "Pick a username"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(got, "action=accept") || !strings.Contains(got, "ada") {
			t.Errorf("the agent's answer must reach the waiting server: %q", got)
		}
		if seen := asked(); len(seen) != 1 || seen[0] != "[mcp:everything:test_elicitation] Pick a username" {
			t.Errorf("the agent must be asked once, told which server asks: %q", seen)
		}
	})

	first := func(t *testing.T, c *client.Client) string {
		t.Helper()
		raw, err := c.CallTool(testkit.Context(t), tool, json.RawMessage(`{"message":"Who are you?"}`))
		if err != nil {
			t.Fatal(err)
		}
		var asked struct {
			ResultType   string `json:"resultType"`
			RequestState string `json:"requestState"`
		}
		if json.Unmarshal(raw, &asked); asked.ResultType != "input_required" || asked.RequestState == "" {
			t.Fatalf("want input_required: %s", raw)
		}
		return asked.RequestState
	}
	retry := func(c *client.Client, state string) (json.RawMessage, error) {
		return c.Call(testkit.Context(t), "tools/call", json.RawMessage(`{"name":"`+tool+`","arguments":{"message":"Who are you?"},"inputResponses":{"server":{"action":"accept","content":{"username":"eve"}}},"requestState":"`+state+`"}`))
	}

	t.Run("a parked call serves its own caller, once", func(t *testing.T) {
		alice := connectAnswering(t, h.url+"/mcp", "alice-token")
		state := first(t, alice)
		if _, err := retry(connectAnswering(t, h.url+"/mcp", "bob-token"), state); rpcCode(err) != -32602 {
			t.Errorf("bob's retry with alice's state: %v, want -32602", err)
		}
		got, err := retry(alice, state)
		if err != nil || !strings.Contains(string(got), "username:eve") {
			t.Fatalf("alice's retry must reach the waiting server: %s, %v", got, err)
		}
		// The call it answered ran: sending it again is not safe.
		if _, err := retry(alice, state); rpcCode(err) != -32602 || !strings.Contains(err.Error(), "used already") {
			t.Errorf("a second retry of the same question: %v, want -32602 (the call is over)", err)
		} else if d, ok := retryDataOf(err); !ok || d.Reason != reasonInvalidState || !d.says(false, -1, -1) {
			t.Errorf("a second retry of the same question: %v, want reason invalid_request_state, retryable false", err)
		}
	})

	t.Run("another replica does not hold it", func(t *testing.T) {
		other := newHarness(t, []v1alpha1.MCPServer{srv}, []v1alpha1.ToolPolicy{pol}, nil)
		state := first(t, connectAnswering(t, h.url+"/mcp", "alice-token"))
		if _, err := retry(connectAnswering(t, other.url+"/mcp", "alice-token"), state); rpcCode(err) != -32602 || !strings.Contains(err.Error(), "another replica") {
			t.Errorf("a retry on a replica that does not hold the call: %v, want -32602 naming the cause", err)
		}
	})

	t.Run("an unanswered question ends at the call's deadline", func(t *testing.T) {
		state := first(t, connectAnswering(t, h.url+"/mcp", "alice-token"))
		testkit.Eventually(t, "the parked call ends at its 5 s deadline", func() bool {
			n := 0
			h.b.parked.Range(func(any, any) bool { n++; return true })
			return n == 0
		})
		if _, err := retry(connectAnswering(t, h.url+"/mcp", "alice-token"), state); rpcCode(err) != -32602 {
			t.Errorf("a retry after the deadline: %v, want -32602", err)
		}
	})

	// Two answered calls; two abandoned ones (the other replica's and the
	// unanswered one) that ended at their deadline.
	counts := map[string]int{}
	for _, ev := range h.events(t) {
		switch ev["type"] {
		case "mcp.server_request":
			counts["asked "+str(ev["outcome"])]++
		case "tool.completed":
			counts["completed"]++
		case "tool.failed":
			counts["failed "+str(ev["reason"])]++
		}
	}
	want := map[string]int{"asked accept": 2, "completed": 2, "asked timeout": 2, "failed timeout": 2}
	if len(counts) != len(want) {
		t.Errorf("events %v, want %v", counts, want)
	}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("events %v, want %v", counts, want)
			break
		}
	}
}

// TestParkedCallsBounded: a parked call holds an upstream call open though
// its agent's request was answered, so parked calls count against the
// limits of requests in flight: past them the server's question is refused.
func TestParkedCallsBounded(t *testing.T) {
	up := testpeers.GoEverything(t, false)
	srv := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "callers", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.*"))
	h := newHarness(t, []v1alpha1.MCPServer{srv}, []v1alpha1.ToolPolicy{pol}, func(c *Config) {
		c.CallTimeout = 5 * time.Second
		c.MaxSubjectConcurrent = 2
	})
	alice := connectAnswering(t, h.url+"/mcp", "alice-token")
	for i := range 2 {
		raw, err := alice.CallTool(testkit.Context(t), "mcp.everything.test_elicitation", json.RawMessage(`{"message":"q"}`))
		if err != nil || !strings.Contains(string(raw), "input_required") {
			t.Fatalf("call %d: %s %v", i, raw, err)
		}
	}
	raw, err := alice.CallTool(testkit.Context(t), "mcp.everything.test_elicitation", json.RawMessage(`{"message":"q"}`))
	if err != nil || !strings.Contains(string(raw), "too many calls") {
		t.Fatalf("a third parked call of a caller allowed 2 at once: %s %v, want the server's question refused", raw, err)
	}
	n := 0
	h.b.parked.Range(func(any, any) bool { n++; return true })
	if n != 2 {
		t.Fatalf("%d calls parked, want 2", n)
	}
}

// TestParkedCallDeniedMeanwhile: a parked call whose policy denies it by the
// agent's retry is ended, and its chain closes as any call that went upstream
// does: mcp.call.failed, then tool.failed (not tool.failed alone).
func TestParkedCallDeniedMeanwhile(t *testing.T) {
	up := testpeers.GoEverything(t, false)
	srv := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "callers", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.*"))
	h := newHarness(t, []v1alpha1.MCPServer{srv}, []v1alpha1.ToolPolicy{pol}, nil)
	const tool = "mcp.everything.test_elicitation"
	alice := connectAnswering(t, h.url+"/mcp", "alice-token")
	raw, err := alice.CallTool(testkit.Context(t), tool, json.RawMessage(`{"message":"q"}`))
	state := resultString([]byte(`{"jsonrpc":"2.0","id":1,"result":`+string(raw)+`}`), "requestState")
	if err != nil || state == "" {
		t.Fatalf("want the call parked with input_required: %s %v", raw, err)
	}
	h.b.SetEngine(policy.NewEngine()) // the policy is withdrawn: everything is denied
	_, err = alice.Call(testkit.Context(t), "tools/call", json.RawMessage(`{"name":"`+tool+`","arguments":{"message":"q"},"inputResponses":{"server":{"action":"accept","content":{"username":"eve"}}},"requestState":"`+state+`"}`))
	if rpcCode(err) != CodeDenied {
		t.Fatalf("the retry of a call denied meanwhile: %v, want %d", err, CodeDenied)
	}
	events := h.events(t)
	types := typesOf(events, lastCallID(events, tool))
	if n := len(types); n < 3 || !slices.Contains(types, "mcp.call.started") ||
		types[n-2] != "mcp.call.failed" || types[n-1] != "tool.failed" {
		t.Fatalf("the chain of a parked call denied meanwhile: %v, want it to end mcp.call.failed, tool.failed", types)
	}
	// The server's request waiting for the agent ends with the denial, not
	// with the call's cancellation that follows it (parkedCall.end).
	var reasons []any
	for _, ev := range events {
		if ev["type"] == "mcp.server_request" && ev["toolCallId"] == lastCallID(events, tool) {
			reasons = append(reasons, ev["reason"])
		}
	}
	if len(reasons) != 1 || reasons[0] != "the call was denied meanwhile" {
		t.Errorf("the reasons of the server's requests of a call denied meanwhile: %q, want one, %q", reasons, "the call was denied meanwhile")
	}
}

// TestParkedCallEndsWithItsServer: a parked call whose server goes away leaves
// the replica then, with the real reason, instead of holding its slot until
// its deadline (30 s here) and being recorded as a timeout.
func TestParkedCallEndsWithItsServer(t *testing.T) {
	up := testpeers.GoEverything(t, false)
	srv := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "callers", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.*"))
	h := newHarness(t, []v1alpha1.MCPServer{srv}, []v1alpha1.ToolPolicy{pol}, func(c *Config) { c.CallTimeout = 30 * time.Second })
	raw, err := connectAnswering(t, h.url+"/mcp", "alice-token").CallTool(testkit.Context(t), "mcp.everything.test_elicitation", json.RawMessage(`{"message":"q"}`))
	if err != nil || !strings.Contains(string(raw), "input_required") {
		t.Fatalf("want the call parked: %s %v", raw, err)
	}
	up.Kill()
	testkit.Eventually(t, "the parked call leaves with its server", func() bool {
		n := 0
		h.b.parked.Range(func(any, any) bool { n++; return true })
		return n == 0
	})
	var failed map[string]any
	testkit.Eventually(t, "the call's tool.failed", func() bool {
		for _, ev := range h.events(t) {
			if ev["type"] == "tool.failed" {
				failed = ev
			}
		}
		return failed != nil
	})
	if failed["reason"] == "timeout" {
		t.Errorf("the call was recorded as a timeout: %v", failed)
	}
	if used, _ := h.b.limits.parked.Used("system:serviceaccount:agents:alice"); used != 0 {
		t.Errorf("%d parked slots still taken", used)
	}
}
