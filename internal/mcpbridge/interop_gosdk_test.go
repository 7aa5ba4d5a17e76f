package mcpbridge

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// goSDKAgent connects the official Go SDK client to the bridge, at
// protocol version 2026-07-28 (its default: server/discover, no session)
// or the given one; answers are what its elicitation handler says.
func goSDKAgent(t *testing.T, url, token, version string, answers *[]string, asked *[]string) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if answers != nil {
		opts.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			*asked = append(*asked, req.Params.Message)
			if len(*answers) == 0 {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
			a := (*answers)[0]
			*answers = (*answers)[1:]
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": a}}, nil
		}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "go-agent", Version: "1.0.0"}, opts)
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}, DisableStandaloneSSE: true}
	var sopts *mcp.ClientSessionOptions
	if version != "" {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := c.Connect(testkit.Context(t), tr, sopts)
	if err != nil {
		t.Fatalf("the Go SDK client could not connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestGoSDKAgentAsksInBothEras: the official Go SDK client is asked for
// approval as its era allows — an input_required result it answers by
// retrying (2026-07-28), or an elicitation/create request on the response
// stream (2025-11-25) — and the answer decides.
func TestGoSDKAgentAsksInBothEras(t *testing.T) {
	up := testpeers.GoEverything(t, false)
	server := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice")},
		rule("allow", "mcp.everything.*"), rule("ask", "mcp.everything.test_simple_text"))
	h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, nil)

	for _, version := range []string{"", "2025-11-25"} {
		name := version
		if name == "" {
			name = "2026-07-28"
		}
		t.Run(name, func(t *testing.T) {
			answers, asked := []string{"allow_once", "deny"}, []string{}
			cs := goSDKAgent(t, h.url+"/mcp", "alice-token", version, &answers, &asked)
			if got := cs.InitializeResult().ProtocolVersion; got != name {
				t.Fatalf("negotiated %s, want %s", got, name)
			}
			tools, err := cs.ListTools(testkit.Context(t), nil)
			if err != nil || len(tools.Tools) < 5 {
				t.Fatalf("tools/list: %v (%d tools)", err, len(tools.Tools))
			}
			res, err := cs.CallTool(testkit.Context(t), &mcp.CallToolParams{Name: "mcp.everything.test_simple_text"})
			if err != nil || res.IsError {
				t.Fatalf("a call the user allowed once failed: %v %+v", err, res)
			}
			if text := res.Content[0].(*mcp.TextContent).Text; !strings.HasPrefix(text, "[mcp:everything:test_simple_text] ") {
				t.Fatalf("result text %q", text)
			}
			_, err = cs.CallTool(testkit.Context(t), &mcp.CallToolParams{Name: "mcp.everything.test_simple_text"})
			if err == nil || !strings.Contains(err.Error(), "denied") {
				t.Fatalf("a call the user denied: %v", err)
			}
			if len(asked) != 2 || !strings.Contains(asked[0], "mcp.everything.test_simple_text") {
				t.Fatalf("the user was asked %q", asked)
			}
			events := h.events(t)
			id := ""
			for _, ev := range events {
				if ev["type"] == "permission.resolved" && ev["sourcedFrom"] == "approval:once" {
					id, _ = ev["toolCallId"].(string)
				}
			}
			chain := strings.Join(typesOf(events, id), " ")
			if chain != "permission.requested permission.resolved mcp.call.started tool.started mcp.call.completed tool.completed" {
				t.Fatalf("the chain of the approved call is %q", chain)
			}
		})
	}
	t.Run("tampered requestState", func(t *testing.T) {
		st := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"mcp.everything.test_simple_text","requestState":"forged.state","inputResponses":{"approval":{"action":"accept","content":{"decision":"allow_once"}}},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
		status, code, _ := post(t, h.url+"/mcp", "alice-token", "", st, map[string]string{"MCP-Protocol-Version": "2026-07-28"})
		if status != 200 || code != jsonrpc.CodeInvalidParams {
			t.Fatalf("a forged requestState: status %d code %d, want a -32602 error", status, code)
		}
	})
}
