package mcpbridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// wireLog records what an HTTP client sends, and the answers' statuses.
type wireLog struct {
	mu   sync.Mutex
	sent []string // "METHOD jsonrpc-method auth=yes|no version=V -> status"
	next http.RoundTripper
}

func (l *wireLog) RoundTrip(r *http.Request) (*http.Response, error) {
	var m struct{ Method string }
	if r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		_ = json.Unmarshal(body, &m)
	}
	resp, err := l.next.RoundTrip(r)
	status := "error"
	if err == nil {
		status = strconv.Itoa(resp.StatusCode)
	}
	auth := "no"
	if r.Header.Get("Authorization") != "" {
		auth = "yes"
	}
	l.mu.Lock()
	l.sent = append(l.sent, fmt.Sprintf("%s %s auth=%s version=%s -> %s", r.Method, m.Method, auth, r.Header.Get("Mcp-Protocol-Version"), status))
	l.mu.Unlock()
	return resp, err
}

func (l *wireLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.sent
	l.sent = nil
	return out
}

// mcpgoAgent connects mcp-go's Streamable HTTP client to url as issue
// 14's harness and the bridge bench's session-era agents do: a 2025-11-25
// session, on an HTTP client of its own (logged by wire), the bearer token
// given with WithHTTPHeaders, no GET listening stream. Close is the
// caller's.
func mcpgoAgent(t *testing.T, url, token string, wire *wireLog) (*mcpgoclient.Client, *mcpgotransport.StreamableHTTP) {
	t.Helper()
	tr, err := mcpgotransport.NewStreamableHTTP(url,
		mcpgotransport.WithHTTPBasicClient(&http.Client{Transport: wire}),
		mcpgotransport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		t.Fatal(err)
	}
	c := mcpgoclient.NewClient(tr, mcpgoclient.WithProtocolVersion(mcpgo.LATEST_LEGACY_PROTOCOL_VERSION))
	if err := c.Start(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}
	var init mcpgo.InitializeRequest
	init.Params.ClientInfo = mcpgo.Implementation{Name: "mcp-go-agent", Version: "1"}
	res, err := c.Initialize(testkit.Context(t), init)
	if err != nil {
		t.Fatalf("mcp-go's client could not initialize through the bridge: %v", err)
	}
	if res.ProtocolVersion != "2025-11-25" || tr.GetSessionId() == "" {
		t.Fatalf("negotiated %q with session id %q; want 2025-11-25 and a session", res.ProtocolVersion, tr.GetSessionId())
	}
	return c, tr
}

// statefulBehindBridge is a bridge serving one Stateful server (mcp-go's),
// whose tools alice may call.
func statefulBehindBridge(t *testing.T) (*harness, *bridgetest.Stateful) {
	t.Helper()
	st := bridgetest.NewStateful(t, false)
	server := bridgetest.Published(t, "agents", "stateful", st.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("agents", "callers", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.stateful.*"))
	return newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, nil), st
}

// mcp-go's Streamable HTTP client (mcpgoAgent) lists and calls tools
// through the bridge and gets the upstream's answers, in one upstream
// session of its own, and what it sends is as docs/bridge.md says: no
// server/discover, initialize, notifications/initialized, one POST per
// request, no GET, and at Close a DELETE without its token, which ends the
// bridge's session and so the upstream one.
func TestMCPGoAgentCallsThroughTheBridge(t *testing.T) {
	h, st := statefulBehindBridge(t)
	wire := &wireLog{next: http.DefaultTransport.(*http.Transport).Clone()}
	c, tr := mcpgoAgent(t, h.url+"/mcp", "alice-token", wire)
	closed := false
	t.Cleanup(func() {
		if !closed {
			c.Close()
		}
	})
	sid := tr.GetSessionId()

	tools, err := c.ListTools(testkit.Context(t), mcpgo.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if slices.Sort(names); !slices.Equal(names, []string{"mcp.stateful.recall", "mcp.stateful.remember", "mcp.stateful.sleep"}) {
		t.Fatalf("mcp-go's client lists %q", names)
	}

	st.Calls()
	if got := statefulText(t, c, "remember", map[string]any{"value": "apple"}); got != "[mcp:stateful:remember] remembered" {
		t.Fatalf("remember answered %q", got)
	}
	if got := statefulText(t, c, "recall", nil); got != "[mcp:stateful:recall] recalled apple" {
		t.Fatalf("recall answered %q; want what this session remembered", got)
	}
	seen := st.Calls()
	if len(seen) != 2 || seen[0] == "" || seen[1] != seen[0] {
		t.Fatalf("the server saw the calls in sessions %q; want both in one session of their own", seen)
	}

	closed = true
	if err := c.Close(); err != nil { // DELETE
		t.Fatal(err)
	}
	want := []string{
		"POST initialize auth=yes version= -> 200",
		"POST notifications/initialized auth=yes version=2025-11-25 -> 202",
		"POST tools/list auth=yes version=2025-11-25 -> 200",
		"POST tools/call auth=yes version=2025-11-25 -> 200",
		"POST tools/call auth=yes version=2025-11-25 -> 200",
		"DELETE  auth=no version=2025-11-25 -> 204",
	}
	if got := wire.take(); !slices.Equal(got, want) {
		t.Fatalf("mcp-go's client sent\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	testkit.Eventually(t, "the agent's upstream session DELETEd after mcp-go's Close", func() bool { return slices.Contains(st.Deleted(), seen[0]) })
	status, _, _ := post(t, h.url+"/mcp", "alice-token", sid, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`,
		map[string]string{"MCP-Protocol-Version": "2025-11-25"})
	if status != http.StatusNotFound {
		t.Fatalf("a request in the session mcp-go ended: status %d, want 404", status)
	}
}

// mcp-go's client ends its sessions at Close with a DELETE that carries
// none of its headers, so none of its token: the bridge ends the session
// its sealed id names all the same. Refused, each closed session stayed
// until it idled out, and the caller's 101st session was refused
// (MaxPerSubject, 100 by default): a harness of 5 rounds at 32 sessions
// opens more.
func TestMCPGoAgentsEndTheirSessions(t *testing.T) {
	h, _ := statefulBehindBridge(t)
	wire := &wireLog{next: http.DefaultTransport.(*http.Transport).Clone()}
	for i := range session.DefaultMaxPerSubject + 1 {
		c, tr := mcpgoAgent(t, h.url+"/mcp", "alice-token", wire)
		sid := tr.GetSessionId()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		sent := wire.take()
		if last := sent[len(sent)-1]; last != "DELETE  auth=no version=2025-11-25 -> 204" {
			t.Fatalf("session %d: mcp-go's DELETE: %s, want 204", i+1, last)
		}
		status, _, _ := post(t, h.url+"/mcp", "alice-token", sid, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`,
			map[string]string{"MCP-Protocol-Version": "2025-11-25"})
		if status != http.StatusNotFound {
			t.Fatalf("session %d after its DELETE: status %d, want 404", i+1, status)
		}
	}
	// The id alone ends nothing else: not a session of another endpoint,
	// and not a forged one.
	c, tr := mcpgoAgent(t, h.url+"/servers/stateful/mcp", "alice-token", wire)
	defer c.Close()
	for _, d := range []struct {
		what, sid string
		want      int
	}{
		{"the id of a session of /servers/stateful/mcp", tr.GetSessionId(), http.StatusNotFound},
		{"a forged id", "forged", http.StatusUnauthorized},
	} {
		if status := deleteStatus(t, h.url+"/mcp", d.sid, nil); status != d.want {
			t.Fatalf("a DELETE on /mcp without a token, with %s: status %d, want %d", d.what, status, d.want)
		}
	}
	if _, err := c.ListTools(testkit.Context(t), mcpgo.ListToolsRequest{}); err != nil {
		t.Fatalf("the session on /servers/stateful/mcp after a DELETE of its id on /mcp: %v", err)
	}
}
