package mcpbridge

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

const (
	askName   = "test_input_required_result_elicitation"
	askSample = "test_input_required_result_sampling"
)

// TestServerInputRequired: a 2026-07-28 server (the go-sdk
// everything-server, stateless) asks for input with input_required
// results. A 2026-07-28 agent (the official Go SDK client) gets them, with
// the server's state sealed in the bridge's, and retries; a session-era
// agent (the official TypeScript SDK client) is asked on its response
// stream and the bridge calls the server again itself. What the MCPServer
// refuses never reaches an agent, and a sealed state serves only the
// caller, tool and arguments it was made for.
func TestServerInputRequired(t *testing.T) {
	url := testpeers.GoEverything(t, true).URL
	asks := bridgetest.PublishedRelaying(t, "tools", "asks", url, v1alpha1.ToolsSpec{},
		v1alpha1.ServerRequests{Elicitation: v1alpha1.RelayAllowed, Sampling: v1alpha1.RelayAllowed})
	quiet := bridgetest.Published(t, "tools", "quiet", url, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "callers", []v1alpha1.Subject{sa("agents", "alice"), sa("agents", "bob")}, rule("allow", "mcp.asks.*", "mcp.quiet.*"))
	h := newHarness(t, []v1alpha1.MCPServer{asks, quiet}, []v1alpha1.ToolPolicy{pol}, nil)

	t.Run("a 2026-07-28 agent answers and retries", func(t *testing.T) {
		cs, asked := answeringGoSDKAgent(t, h.url+"/mcp", "alice-token", map[string]any{"name": "Ada"}, "Paris")
		if got := callText(t, cs, "mcp.asks."+askName); !strings.Contains(got, "Hello, Ada!") {
			t.Errorf("the user's answer must reach the server: %q", got)
		}
		if seen := asked(); len(seen) != 1 || seen[0] != "[mcp:asks:"+askName+"] What is your name?" {
			t.Errorf("the agent must be asked once, told which server asks: %q", seen)
		}
		if got := callText(t, cs, "mcp.asks."+askSample); !strings.Contains(got, "Sampling response: Paris") {
			t.Errorf("the model's answer must reach the server: %q", got)
		}
		res, err := cs.CallTool(testkit.Context(t), &mcp.CallToolParams{Name: "mcp.quiet." + askSample})
		if err == nil && !res.IsError {
			t.Errorf("sampling the MCPServer refuses must fail the call, got %+v", res)
		} else if err != nil && !strings.Contains(err.Error(), "server_request_refused") && !strings.Contains(err.Error(), "does not allow it") {
			t.Errorf("the refusal must say why: %v", err)
		}
	})

	t.Run("a session-era agent is asked on its response stream", func(t *testing.T) {
		res := runTSAgent(t, h.url+"/mcp", "alice-token", tsPlan{
			RelayAnswer: map[string]any{"action": "accept", "content": map[string]any{"name": "Grace"}},
			Sampling:    "Lyon",
			Steps: []tsStep{
				{Op: "call", Name: "mcp.asks." + askName},
				{Op: "call", Name: "mcp.asks." + askSample},
			},
		})
		if got := stepText(res, 0); !strings.Contains(got, "Hello, Grace!") {
			t.Errorf("the user's answer must reach the server: %s", got)
		}
		if got := stepText(res, 1); !strings.Contains(got, "Sampling response: Lyon") {
			t.Errorf("the model's answer must reach the server: %s", got)
		}
		if len(res.Relayed) != 2 || res.Relayed[0].Method != "elicitation/create" || res.Relayed[1].Method != "sampling/createMessage" {
			t.Errorf("the agent must get the server's two questions: %+v", res.Relayed)
		}
	})

	t.Run("a sealed state serves its own call only", func(t *testing.T) {
		alice := connectAnswering(t, h.url+"/mcp", "alice-token")
		first, err := alice.CallTool(testkit.Context(t), "mcp.asks."+askName, nil)
		if err != nil {
			t.Fatal(err)
		}
		var asked struct {
			ResultType    string `json:"resultType"`
			RequestState  string `json:"requestState"`
			InputRequests map[string]struct {
				Params struct {
					Message string `json:"message"`
				} `json:"params"`
			} `json:"inputRequests"`
		}
		_ = json.Unmarshal(first, &asked)
		state := asked.RequestState
		if asked.ResultType != "input_required" || state == "" || asked.InputRequests["user_name"].Params.Message != "[mcp:asks:"+askName+"] What is your name?" {
			t.Fatalf("want input_required with the bridge's state and a marked question: %s", first)
		}
		retry := func(c *client.Client, tool, args string) (json.RawMessage, error) {
			params := `{"name":"` + tool + `","arguments":` + args + `,"inputResponses":{"user_name":{"action":"accept","content":{"name":"Eve"}}},"requestState":"` + state + `"}`
			return c.Call(testkit.Context(t), "tools/call", json.RawMessage(params))
		}
		bob := connectAnswering(t, h.url+"/mcp", "bob-token")
		if _, err := retry(bob, "mcp.asks."+askName, `{}`); rpcCode(err) != jsonrpc.CodeInvalidParams {
			t.Errorf("another caller's retry with alice's state: %v, want -32602", err)
		}
		if _, err := retry(alice, "mcp.asks."+askName, `{"x":1}`); rpcCode(err) != jsonrpc.CodeInvalidParams {
			t.Errorf("a retry with other arguments: %v, want -32602", err)
		}
		if _, err := retry(alice, "mcp.asks."+askSample, `{}`); rpcCode(err) != jsonrpc.CodeInvalidParams {
			t.Errorf("a retry of another tool: %v, want -32602", err)
		}
		got, err := retry(alice, "mcp.asks."+askName, `{}`)
		if err != nil || !strings.Contains(string(got), "Hello, Eve!") {
			t.Errorf("the right retry must reach the server with the answer: %s, %v", got, err)
		}
		if _, err := retry(alice, "mcp.asks."+askName, `{}`); rpcCode(err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), "used already") {
			t.Errorf("the same state again: %v, want -32602 (each retry is a call upstream: no replays)", err)
		}
		// The attack: the used state with its last base64 character changed
		// to one with other spare bits, which a lenient decoder reads as the
		// same MAC.
		used := state
		respelled := 0
		for _, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_" {
			v := used[:len(used)-1] + string(c)
			_, usedSig, _ := strings.Cut(used, ".")
			_, vSig, _ := strings.Cut(v, ".")
			a, _ := base64.RawURLEncoding.DecodeString(usedSig)
			b, err := base64.RawURLEncoding.DecodeString(vSig)
			if v == used || err != nil || string(a) != string(b) {
				continue
			}
			respelled++
			state = v
			if got, err := retry(alice, "mcp.asks."+askName, `{}`); rpcCode(err) != jsonrpc.CodeInvalidParams {
				t.Errorf("the used state spelled %q: %s, %v, want -32602 (the server's action must not run again)", v, got, err)
			}
		}
		if respelled == 0 {
			t.Fatalf("no other spelling of %q found", used)
		}
	})

	var outcomes []string
	for _, ev := range h.events(t) {
		if ev["type"] == "mcp.server_request" {
			outcomes = append(outcomes, ev["server"].(string)+" "+ev["method"].(string)+" "+ev["outcome"].(string))
		}
	}
	want := []string{
		"asks elicitation/create forwarded", "asks sampling/createMessage forwarded", "quiet sampling/createMessage refused",
		"asks elicitation/create accept", "asks sampling/createMessage answered",
		"asks elicitation/create forwarded",
	}
	if strings.Join(outcomes, ", ") != strings.Join(want, ", ") {
		t.Errorf("mcp.server_request events:\n got %q\nwant %q", outcomes, want)
	}
}

// TestServerInputRequiredRateLimited: the retry that answers a server's
// question is another call upstream, so it takes from the rate limit like
// the first.
func TestServerInputRequiredRateLimited(t *testing.T) {
	url := testpeers.GoEverything(t, true).URL
	asks := bridgetest.PublishedRelaying(t, "tools", "asks", url, v1alpha1.ToolsSpec{}, v1alpha1.ServerRequests{})
	pol := toolPolicy("tools", "callers", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.asks.*"))
	pol.Spec.RateLimit = &v1alpha1.RateLimit{CallsPerMinute: 1, Burst: 2}
	h := newHarness(t, []v1alpha1.MCPServer{asks}, []v1alpha1.ToolPolicy{pol}, nil)
	alice := connectAnswering(t, h.url+"/mcp", "alice-token")
	first, err := alice.CallTool(testkit.Context(t), "mcp.asks."+askName, nil)
	if err != nil {
		t.Fatal(err)
	}
	state := resultMember(t, first, "requestState")
	got, err := alice.Call(testkit.Context(t), "tools/call", json.RawMessage(`{"name":"mcp.asks.`+askName+`","arguments":{},"inputResponses":{"user_name":{"action":"accept","content":{"name":"Eve"}}},"requestState":"`+state+`"}`))
	if err != nil || !strings.Contains(string(got), "Hello, Eve!") {
		t.Fatalf("the retry within the burst: %s, %v", got, err)
	}
	if _, err := alice.CallTool(testkit.Context(t), "mcp.asks."+askName, nil); rpcCode(err) != CodeDenied || !strings.Contains(err.Error(), "rate_limited") {
		t.Fatalf("a third call upstream past a burst of 2: %v, want rate_limited", err)
	}
}

// resultMember is a string member of a raw result.
func resultMember(t *testing.T, raw json.RawMessage, key string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	v, _ := m[key].(string)
	if v == "" {
		t.Fatalf("no %s in %s", key, raw)
	}
	return v
}

// callText calls a tool with the Go SDK client and returns its text.
func callText(t *testing.T, cs *mcp.ClientSession, name string) string {
	t.Helper()
	res, err := cs.CallTool(testkit.Context(t), &mcp.CallToolParams{Name: name})
	if err != nil {
		return "error " + err.Error()
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// connectAnswering is our own client in the 2026-07-28 era, declaring that
// it answers form elicitations (it sends each retry by hand).
func connectAnswering(t *testing.T, url, token string) *client.Client {
	t.Helper()
	conn, err := streamhttp.New(streamhttp.Options{URL: url, BearerToken: token})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Connect(testkit.Context(t), conn, client.Options{Era: client.EraStateless, ClientName: "test-agent", Capabilities: map[string]any{"elicitation": map[string]any{}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// answeringGoSDKAgent is the official Go SDK client at 2026-07-28: it
// accepts every elicitation with content and answers every sampling request
// with text; asked lists the elicitation messages it got.
func answeringGoSDKAgent(t *testing.T, url, token string, content map[string]any, text string) (cs *mcp.ClientSession, asked func() []string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	c := mcp.NewClient(&mcp.Implementation{Name: "go-agent", Version: "1.0.0"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			seen = append(seen, req.Params.Message)
			mu.Unlock()
			return &mcp.ElicitResult{Action: "accept", Content: content}, nil
		},
		CreateMessageHandler: func(_ context.Context, _ *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "go-agent-model", Role: "assistant", Content: &mcp.TextContent{Text: text}}, nil
		},
	})
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}, DisableStandaloneSSE: true}
	cs, err := c.Connect(testkit.Context(t), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}
