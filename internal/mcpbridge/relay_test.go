package mcpbridge

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// TestServerRequestsRelayed: a server's own elicitation and sampling
// requests during a call reach the calling agent (the official TypeScript
// SDK client) marked with their origin and with secrets redacted, its
// answers reach the server, and each is audited; a server whose spec
// refuses them, and an agent that cannot answer them, are never asked.
func TestServerRequestsRelayed(t *testing.T) {
	everything := bridgetest.PublishedRelaying(t, "agents", "everything", testpeers.NodeEverything(t).URL, v1alpha1.ToolsSpec{},
		v1alpha1.ServerRequests{Elicitation: v1alpha1.RelayAllowed, Sampling: v1alpha1.RelayAllowed})
	quiet := bridgetest.PublishedRelaying(t, "agents", "quiet", testpeers.GoEverything(t, false).URL, v1alpha1.ToolsSpec{},
		v1alpha1.ServerRequests{Elicitation: v1alpha1.RelayRefused})
	pol := toolPolicy("agents", "callers", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.*", "mcp.quiet.*"))
	h := newHarness(t, []v1alpha1.MCPServer{everything, quiet}, []v1alpha1.ToolPolicy{pol}, nil)

	token := "ghp_" + strings.Repeat("a1B2", 9)
	res := runTSAgent(t, h.url+"/mcp", "alice-token", tsPlan{
		RelayAnswer: map[string]any{"action": "accept", "content": map[string]any{"name": "Ada Lovelace", "check": true}},
		Sampling:    "the model's reply",
		Steps: []tsStep{
			{Op: "call", Name: "mcp.everything.trigger-elicitation-request"},
			{Op: "call", Name: "mcp.everything.trigger-sampling-request", Args: map[string]any{"prompt": "summarize with " + token}},
			{Op: "call", Name: "mcp.quiet.test_elicitation", Args: map[string]any{"message": "who are you?"}},
		},
	})
	text := func(i int) string { return stepText(res, i) }
	if got := text(0); !strings.Contains(got, "Ada Lovelace") {
		t.Errorf("the user's answer must reach the server, which echoes it: %s", got)
	}
	if got := text(1); !strings.Contains(got, "the model's reply") {
		t.Errorf("the agent's sampling answer must reach the server, which echoes it: %s", got)
	}
	if got := text(2); !strings.Contains(got, "does not support elicitation") {
		t.Errorf("a server whose spec refuses elicitation is told the client cannot answer (the bridge declares no elicitation to it): %s", got)
	}
	if len(res.Relayed) != 2 {
		t.Fatalf("the agent got %d server requests, want 2 (elicitation and sampling of everything, none of quiet): %+v", len(res.Relayed), res.Relayed)
	}
	elicit, sample := res.Relayed[0], res.Relayed[1]
	var ep struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(elicit.Params, &ep)
	if elicit.Method != "elicitation/create" || !strings.HasPrefix(ep.Message, "[mcp:everything:trigger-elicitation-request] Please provide") {
		t.Errorf("the elicitation must name the server and tool asking: %s %s", elicit.Method, elicit.Params)
	}
	if sample.Method != "sampling/createMessage" || strings.Contains(string(sample.Params), token) || !strings.Contains(string(sample.Params), "[REDACTED:") {
		t.Errorf("the sampling request must reach the agent with the token redacted: %s %s", sample.Method, sample.Params)
	}

	// An agent that declared no sampling: the server is refused, the agent
	// never sees the request.
	noSampling := runTSAgent(t, h.url+"/mcp", "alice-token", tsPlan{Steps: []tsStep{
		{Op: "call", Name: "mcp.everything.trigger-sampling-request", Args: map[string]any{"prompt": "hi"}},
	}})
	if got := stepText(noSampling, 0); len(noSampling.Relayed) != 0 || !strings.Contains(got, "did not declare the capability") {
		t.Errorf("without the sampling capability the server must be refused, with the reason: %s; relayed %d", got, len(noSampling.Relayed))
	}

	var outcomes []string
	for _, ev := range h.events(t) {
		if ev["type"] != "mcp.server_request" {
			continue
		}
		if ev["toolCallId"] == "" || ev["server"] != "everything" {
			t.Errorf("a server request event names its call and server: %v", ev)
		}
		outcomes = append(outcomes, ev["method"].(string)+" "+ev["outcome"].(string))
	}
	want := []string{"elicitation/create accept", "sampling/createMessage answered", "sampling/createMessage refused"}
	if strings.Join(outcomes, ", ") != strings.Join(want, ", ") {
		t.Errorf("mcp.server_request events: got %q, want %q", outcomes, want)
	}
}

// stepText is a step's result, or its error.
func stepText(res tsResult, i int) string {
	s := res.Steps[i]
	if !s.OK {
		return "error " + s.Error.Message
	}
	return string(s.Result)
}

// TestRelayedRequestsCleaned: what a rule withholds from a tool's result
// (injection: Block) is not passed on through the server's own request
// either (server-everything puts the agent's prompt into its sampling
// request), and a sampling request never asks the agent's client for
// context: to the agent the bridge is one server, and "thisServer" would be
// every server's results.
func TestRelayedRequestsCleaned(t *testing.T) {
	everything := bridgetest.PublishedRelaying(t, "agents", "everything", testpeers.NodeEverything(t).URL, v1alpha1.ToolsSpec{},
		v1alpha1.ServerRequests{Sampling: v1alpha1.RelayAllowed})
	blocking := rule("allow", "mcp.everything.*")
	blocking.Injection = v1alpha1.InjectionBlock
	pol := toolPolicy("agents", "callers", []v1alpha1.Subject{sa("agents", "alice")}, blocking)
	h := newHarness(t, []v1alpha1.MCPServer{everything}, []v1alpha1.ToolPolicy{pol}, nil)

	res := runTSAgent(t, h.url+"/mcp", "alice-token", tsPlan{Sampling: "ok", Steps: []tsStep{
		{Op: "call", Name: "mcp.everything.trigger-sampling-request", Args: map[string]any{"prompt": injected}},
		{Op: "call", Name: "mcp.everything.trigger-sampling-request", Args: map[string]any{"prompt": "a harmless question"}},
	}})
	if got := stepText(res, 0); !strings.Contains(got, "injection_blocked") {
		t.Errorf("a sampling request carrying injected text must be refused: %s", got)
	}
	if len(res.Relayed) != 1 || strings.Contains(string(res.Relayed[0].Params), "Ignore all previous") {
		t.Fatalf("only the harmless request may reach the agent: %+v", res.Relayed)
	}

	// A server that asks for context (no real peer here does on demand).
	c := &call{exchange: &exchange{rq: &request{}}, tool: &routes.Tool{Server: &routes.Server{Name: "everything"}, Upstream: "t"}}
	params, _, err := h.b.relayedParams(c, &jsonrpc.Message{Method: "sampling/createMessage",
		Params: json.RawMessage(`{"messages":[],"includeContext":"allServers","maxTokens":5}`)})
	if err != nil || !strings.Contains(string(params), `"includeContext":"none"`) {
		t.Errorf("includeContext must go to the agent as none: %s, %v", params, err)
	}
}
