package mcpbridge

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// droppingServer is an MCP server (stateless) whose one tool's call loses
// its connection before any answer, as a server's process does when it
// dies mid-call; that death cannot be timed with a real server, the close
// can. Its URL carries credentials in its userinfo and query
// (testkit.URLSecrets).
func droppingServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m, err := jsonrpc.Decode(body)
		if r.Method != http.MethodPost || err != nil || !m.IsRequest() {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		reply := func(result string) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":`+result+`}`)
		}
		switch m.Method {
		case "initialize":
			reply(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"dropping","version":"1"}}`)
		case "tools/list":
			reply(`{"tools":[{"name":"work","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		default:
			reply(`{}`)
		}
	}))
	t.Cleanup(srv.Close)
	return testkit.WithCredentials(srv.URL, "/mcp")
}

// A call that loses its connection to a server whose URL carries
// credentials: the agent's error and the audit events say what failed
// without them (net/http's error names the URL with its user and query).
func TestServerURLCredentialsReachNoAgentNorAudit(t *testing.T) {
	server := bridgetest.Published(t, "agents", "dropping", droppingServer(t), v1alpha1.ToolsSpec{})
	pol := toolPolicy("agents", "callers", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.dropping.*"))
	h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, nil)
	for _, era := range []client.Era{client.EraSession, client.EraStateless} {
		agent := h.connect(t, "alice-token", "/mcp", era)
		_, err := agent.CallTool(testkit.Context(t), "mcp.dropping.work", []byte(`{}`))
		if rpcCode(err) != CodeUpstream || !strings.Contains(err.Error(), "EOF") {
			t.Fatalf("%s agent: the call failed with %v, want %d saying the connection ended", era, err, CodeUpstream)
		}
		if secret := testkit.ShownSecret(err.Error()); secret != "" {
			t.Fatalf("%s agent: the error %q shows %q of the server's URL", era, err, secret)
		}
	}
	failed := 0
	for _, ev := range h.events(t) {
		if ev["type"] == "tool.failed" {
			failed++
		}
	}
	if failed != 2 {
		t.Fatalf("the audit has %d tool.failed events, want 2: %s", failed, h.sink.String())
	}
	if secret := testkit.ShownSecret(h.sink.String()); secret != "" {
		t.Fatalf("the audit shows %q of the server's URL: %s", secret, h.sink.String())
	}
}
