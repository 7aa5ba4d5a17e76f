package mcpbridge

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/redact"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// TestEveryExitRedacted: what a server says reaches neither the
// agent nor the audit log with the server's own Secret values or a token in
// it, at every exit. No real server quotes its Secrets on demand, so the
// server's Secret values here are texts the real go-sdk everything-server
// writes at each exit (a listing's description, a progress message, a log
// line, a result), and where the server echoes what it is sent (a prompt's
// arguments, a resource template's id, a sampling prompt, an elicitation
// message) the agent sends it one more Secret value and a GitHub token
// (fake), as a server that got them from elsewhere would say them.
// Completion is asked of the TypeScript server-everything (the go-sdk one
// completes nothing). JSON-RPC errors are covered by TestFaults (a server
// that quotes its Secret value there).
func TestEveryExitRedacted(t *testing.T) {
	const value = "s3rver-own-Secret-value"
	token := "ghp_" + strings.Repeat("Zx9Qw3", 6)
	// What the server writes at an exit, taken for one of its Secret values.
	said := map[string]string{
		"tools/list":               "Tests simple text content response",
		"prompts/list":             "A prompt with required arguments",
		"resources/list":           "A static text resource for testing",
		"resources/templates/list": "A resource template with parameter substitution",
		"tools/call":               "This is a simple text response for testing",
		"notifications/progress":   "Completed step",
		"notifications/message":    "Tool processing data",
		"completion/complete":      "Engineering", // server-everything's first department
	}
	values := []string{value}
	for _, v := range said {
		values = append(values, v)
	}
	red := redact.New(values...)

	up := testpeers.GoEverything(t, false)
	server := bridgetest.PublishedRelaying(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{},
		v1alpha1.ServerRequests{Elicitation: v1alpha1.RelayAllowed, Sampling: v1alpha1.RelayAllowed})
	teams := bridgetest.Published(t, "tools", "teams", testpeers.NodeEverything(t).URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.*"))
	pol.Spec.Resources = []v1alpha1.ResourceRule{{Servers: []string{"everything"}, Decision: "allow"}}
	pol.Spec.Prompts = []v1alpha1.PromptRule{{Prompts: []string{"mcp.everything.*", "mcp.teams.*"}, Decision: "allow"}}
	h := newHarness(t, []v1alpha1.MCPServer{server, teams}, []v1alpha1.ToolPolicy{pol}, func(c *Config) {
		c.Redactor = func(string, string) *redact.Redactor { return red }
	})
	h.audit.SetRedactor(red) // as the bridge's own writer gets every server's values

	c := h.connect(t, "alice-token", "/mcp", client.EraSession)
	var mu sync.Mutex
	notes := map[string][]string{}
	c.SetNotificationHandler(func(m *jsonrpc.Message) {
		mu.Lock()
		notes[m.Method] = append(notes[m.Method], string(m.Params))
		mu.Unlock()
	})
	// The exits run in subtests: each gets the subtest's t, so that a
	// failure ends that subtest, not its parent from another goroutine.
	heard := func(t *testing.T, method string) string {
		testkit.Eventually(t, "the agent hears "+method, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(notes[method]) > 0
		})
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(notes[method], "\n")
	}
	call := func(method, params string) func(*testing.T) string {
		return func(t *testing.T) string {
			res, err := c.Call(testkit.Context(t), method, json.RawMessage(params))
			if err != nil {
				t.Fatalf("%s: %v", method, err)
			}
			return string(res)
		}
	}
	if _, err := c.Call(testkit.Context(t), "logging/setLevel", json.RawMessage(`{"level":"debug"}`)); err != nil {
		t.Fatalf("logging/setLevel: %v", err)
	}

	echoed := value + " " + token
	for _, exit := range []struct {
		name   string
		answer func(*testing.T) string
		// leaked is what must not be in the answer: the server's value
		// (and the token where the server echoes one).
		leaked []string
	}{
		{"tools/list", call("tools/list", `{}`), []string{said["tools/list"]}},
		{"prompts/list", call("prompts/list", `{}`), []string{said["prompts/list"]}},
		{"resources/list", call("resources/list", `{}`), []string{said["resources/list"]}},
		{"resources/templates/list", call("resources/templates/list", `{}`), []string{said["resources/templates/list"]}},
		{"prompt expansion", call("prompts/get", `{"name":"mcp.everything.test_prompt_with_arguments","arguments":{"arg1":"`+value+`","arg2":"`+token+`"}}`), []string{value, token}},
		{"resource contents", call("resources/read", `{"uri":"mcp://everything/test://template/`+value+`-`+token+`/data"}`), []string{value, token}},
		{"tool result", call("tools/call", `{"name":"mcp.everything.test_simple_text","arguments":{}}`), []string{said["tools/call"]}},
		{"progress notification", func(t *testing.T) string {
			call("tools/call", `{"name":"mcp.everything.test_tool_with_progress","arguments":{},"_meta":{"progressToken":"p-1"}}`)(t)
			return heard(t, "notifications/progress")
		}, []string{said["notifications/progress"]}},
		{"completion result", func(t *testing.T) string {
			res, err := h.connect(t, "alice-token", "/servers/teams/mcp", client.EraSession).Call(testkit.Context(t), "completion/complete",
				json.RawMessage(`{"ref":{"type":"ref/prompt","name":"completable-prompt"},"argument":{"name":"department","value":"Eng"}}`))
			if err != nil {
				t.Fatalf("completion/complete: %v", err)
			}
			return string(res)
		}, []string{said["completion/complete"]}},
		{"log notification", func(t *testing.T) string {
			call("tools/call", `{"name":"mcp.everything.test_tool_with_logging","arguments":{}}`)(t)
			return heard(t, "notifications/message")
		}, []string{said["notifications/message"]}},
	} {
		t.Run(exit.name, func(t *testing.T) {
			got := exit.answer(t)
			for _, l := range exit.leaked {
				if strings.Contains(got, l) {
					t.Errorf("the agent got %q in %s", l, got)
				}
			}
			if !strings.Contains(got, "[REDACTED:") {
				t.Errorf("nothing redacted in %s", got)
			}
		})
	}

	// Requests the server sends the agent in a call, relayed, with the
	// agent's own SDK (which answers them) and the arguments' preview in
	// the audit log.
	t.Run("relayed elicitation and sampling, argument previews", func(t *testing.T) {
		res := runTSAgent(t, h.url+"/mcp", "alice-token", tsPlan{
			RelayAnswer: map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}},
			Sampling:    "the model's reply",
			Steps: []tsStep{
				{Op: "call", Name: "mcp.everything.test_elicitation", Args: map[string]any{"message": echoed}},
				{Op: "call", Name: "mcp.everything.test_sampling", Args: map[string]any{"prompt": echoed}},
			},
		})
		if len(res.Relayed) != 2 {
			t.Fatalf("the agent got %d server requests, want 2: %+v", len(res.Relayed), res)
		}
		for _, r := range res.Relayed {
			if p := string(r.Params); strings.Contains(p, value) || strings.Contains(p, token) || !strings.Contains(p, "[REDACTED:") {
				t.Errorf("%s reached the agent as %s", r.Method, p)
			}
		}
	})

	// A result over the cap is stored as an artifact, redacted: read back,
	// it holds no Secret value either.
	t.Run("artifact", func(t *testing.T) {
		capped := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, func(c *Config) {
			c.Redactor = func(string, string) *redact.Redactor { return red }
			c.Pipeline.MaxResultBytes, c.Pipeline.PreviewBytes = 20, 8
		})
		res := string(statelessPost(t, capped.url, "alice-token", "tools/call", `"name":"mcp.everything.test_simple_text","arguments":{}`))
		i := strings.Index(res, "artifact://")
		if i < 0 {
			t.Fatalf("no artifact for a result over the cap: %s", res)
		}
		read := string(statelessPost(t, capped.url, "alice-token", "resources/read", `"uri":"`+res[i:i+len("artifact://")+64]+`"`))
		if strings.Contains(read, said["tools/call"]) || !strings.Contains(read, "[REDACTED:secret]") {
			t.Errorf("the artifact read back: %s", read)
		}
	})

	h.events(t) // flushes
	log := h.sink.String()
	for _, l := range append(values, token) {
		if strings.Contains(log, l) {
			t.Errorf("the audit log holds %q", l)
		}
	}
	for _, want := range []string{"mcp.prompt.expanded", "mcp.resource.fetched", "mcp.server_request", `"resultPreview"`, `"args"`} {
		if !strings.Contains(log, want) {
			t.Errorf("the audit log has no %s: the exits were not recorded", want)
		}
	}
}
