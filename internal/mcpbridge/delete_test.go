package mcpbridge

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// deleteStatus sends a DELETE of session sid to url and returns the
// answer's status. auth is the Authorization header's value; nil sends
// none, a pointer to "" sends the header empty.
func deleteStatus(t *testing.T, url, sid string, auth *string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	if auth != nil {
		req.Header["Authorization"] = []string{*auth}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func header(v string) *string { return &v }

// TestServerRequestSaysADeleteByIDEndedTheSession: a DELETE without
// credentials that ends a session while a call of it waits (here for the
// agent's answer to its server's question) tells the call so, and its
// mcp.server_request event says so, apart from the agent's own DELETE
// (TestServerRequestSaysTheAgentEndedItsSession): whoever sent it knew the
// id, which need not be the agent.
func TestServerRequestSaysADeleteByIDEndedTheSession(t *testing.T) {
	reason := serverRequestReasonWhen(t, func(t *testing.T, url, sid string, _ func()) {
		if status := deleteStatus(t, url, sid, nil); status != http.StatusNoContent {
			t.Fatalf("DELETE without credentials: status %d, want 204", status)
		}
	})
	if !strings.Contains(reason, session.ErrEndedByID.Error()) {
		t.Fatalf("the server request's event gives the reason %q, want it to say %q", reason, session.ErrEndedByID)
	}
}

// logLines is a logger that keeps its lines, for tests that read them.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) with(msg string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, msg) {
			out = append(out, line)
		}
	}
	return out
}

// TestDeleteRefusedChangesNothing: a DELETE with a token that is not
// accepted (an invalid one, another identity's) is refused and its
// session stays; an empty Authorization header is taken as none, and the
// session its id names ends, logged with where the DELETE came from; a
// DELETE of an ended or too old id is refused (404) and ends, and logs,
// nothing.
func TestDeleteRefusedChangesNothing(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Unix(1_800_000_000, 0).UnixNano())
	logs := &logLines{}
	h := newHarness(t, nil, nil, func(c *Config) {
		c.Sessions = session.NewManager(c.Sealer, session.Options{Now: func() time.Time { return time.Unix(0, now.Load()) }})
		c.Log = funcr.New(func(_, args string) {
			logs.mu.Lock()
			logs.lines = append(logs.lines, args)
			logs.mu.Unlock()
		}, funcr.Options{})
	})
	url := h.url + "/mcp"
	sid, other := openSession(t, url, "alice-token"), openSession(t, url, "alice-token")
	live := func(sid string) int {
		status, _, _ := post(t, url, "alice-token", sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, map[string]string{"MCP-Protocol-Version": "2025-11-25"})
		return status
	}
	const logged = "a DELETE without credentials ended a session by its id"

	for _, d := range []struct {
		what string
		auth *string
		want int
	}{
		{"a token that is not accepted", header("Bearer not-a-token"), http.StatusUnauthorized},
		{"a malformed Authorization header", header("Basic YWxpY2U6eA=="), http.StatusUnauthorized},
		{"another identity's token", header("Bearer bob-token"), http.StatusNotFound},
	} {
		if status := deleteStatus(t, url, sid, d.auth); status != d.want {
			t.Fatalf("DELETE with %s: status %d, want %d", d.what, status, d.want)
		}
		if status := live(sid); status != http.StatusOK {
			t.Fatalf("the session after a DELETE with %s: status %d, want 200 (still live)", d.what, status)
		}
	}
	if n := len(logs.with(logged)); n != 0 {
		t.Fatalf("%d log lines of a DELETE without credentials before any was sent", n)
	}

	if status := deleteStatus(t, url, sid, header("")); status != http.StatusNoContent {
		t.Fatalf("DELETE with an empty Authorization header: status %d, want 204 (taken as none)", status)
	}
	if status := live(sid); status != http.StatusNotFound {
		t.Fatalf("the session after its DELETE: status %d, want 404", status)
	}
	lines := logs.with(logged)
	if len(lines) != 1 || !strings.Contains(lines[0], `"remote"="127.0.0.1:`) || !strings.Contains(lines[0], `"subject"="system:serviceaccount:agents:alice"`) {
		t.Fatalf("log lines of the DELETE without credentials: %q; want one, naming the identity and the remote address", lines)
	}

	// Ended already, then too old: 404 with and without credentials, and
	// the caller's other session stays.
	refused := func(what, sid string) {
		t.Helper()
		for _, auth := range []*string{nil, header("Bearer alice-token")} {
			if status := deleteStatus(t, url, sid, auth); status != http.StatusNotFound {
				t.Fatalf("DELETE of %s (credentials: %v): status %d, want 404", what, auth != nil, status)
			}
		}
		if n := h.b.cfg.Sessions.Len(); n != 1 {
			t.Fatalf("after the DELETEs of %s: %d sessions live, want the other one", what, n)
		}
		if n := len(logs.with(logged)); n != 1 {
			t.Fatalf("after the DELETEs of %s: %d log lines of ended sessions, want the first one only", what, n)
		}
	}
	refused("an ended session", sid)
	if status := live(other); status != http.StatusOK {
		t.Fatalf("the caller's other session: status %d, want 200", status)
	}
	now.Add(int64(session.DefaultMaxAge + time.Minute))
	refused("a session older than its maximum age", other)
}

// TestDeleteOfASessionLiveElsewhereEndsNothingHere: a DELETE, with or without
// credentials, of a session another replica holds leaves this replica's
// tombstone only. alice is at her session cap here with two idle sessions: a
// DELETE that adopted the session to end it would, at the cap, forget her
// least recently used session here, closing its upstream session and losing
// what the server kept for it.
func TestDeleteOfASessionLiveElsewhereEndsNothingHere(t *testing.T) {
	st := bridgetest.NewStateful(t, false)
	servers := []v1alpha1.MCPServer{bridgetest.Published(t, "agents", "stateful", st.URL, v1alpha1.ToolsSpec{})}
	policies := []v1alpha1.ToolPolicy{toolPolicy("agents", "callers", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.stateful.*"))}
	// Two replicas: the same key (newHarness's), sessions of their own.
	elsewhere := newHarness(t, servers, policies, nil)
	here := newHarness(t, servers, policies, func(c *Config) {
		c.Sessions = session.NewManager(c.Sealer, session.Options{MaxPerSubject: 2})
	})
	wire := &wireLog{next: http.DefaultTransport.(*http.Transport).Clone()}

	var mine []*mcpgoclient.Client
	for i := range 2 {
		c, _ := mcpgoAgent(t, here.url+"/mcp", "alice-token", wire)
		defer c.Close()
		if got := statefulText(t, c, "remember", map[string]any{"value": string(rune('a' + i))}); got != "[mcp:stateful:remember] remembered" {
			t.Fatalf("remember answered %q", got)
		}
		mine = append(mine, c)
	}
	upstreamHere := st.Calls()

	for _, auth := range []*string{nil, header("Bearer alice-token")} {
		c, tr := mcpgoAgent(t, elsewhere.url+"/mcp", "alice-token", wire)
		defer c.Close()
		sid := tr.GetSessionId()
		if status := deleteStatus(t, here.url+"/mcp", sid, auth); status != http.StatusNoContent {
			t.Fatalf("DELETE here of a session live elsewhere (credentials: %v): status %d, want 204", auth != nil, status)
		}
		status, _, _ := post(t, here.url+"/mcp", "alice-token", sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, map[string]string{"MCP-Protocol-Version": "2025-11-25"})
		if status != http.StatusNotFound {
			t.Fatalf("the session ended here, presented here again: status %d, want 404", status)
		}
	}
	if n := here.b.cfg.Sessions.Len(); n != 2 {
		t.Fatalf("%d sessions live here after the DELETEs, want alice's 2", n)
	}
	for i, c := range mine {
		want := "[mcp:stateful:recall] recalled " + string(rune('a'+i))
		if got := statefulText(t, c, "recall", nil); got != want {
			t.Fatalf("alice's session %d here after the DELETEs: recall answered %q, want %q (its upstream session kept)", i, got, want)
		}
	}
	if deleted := st.Deleted(); slices.ContainsFunc(upstreamHere, func(s string) bool { return slices.Contains(deleted, s) }) {
		t.Fatalf("the server's sessions %q were DELETEd (%q); want none of the replica's own", upstreamHere, deleted)
	}
}

// statefulText calls tool of the stateful server in c's session and returns
// the answer's one text.
func statefulText(t *testing.T, c *mcpgoclient.Client, tool string, args map[string]any) string {
	t.Helper()
	var req mcpgo.CallToolRequest
	req.Params.Name, req.Params.Arguments = "mcp.stateful."+tool, args
	res, err := c.CallTool(testkit.Context(t), req)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("%s answered an error or not one item: %+v", tool, res)
	}
	text, ok := mcpgo.AsTextContent(res.Content[0])
	if !ok {
		t.Fatalf("%s answered %T, want text", tool, res.Content[0])
	}
	return text.Text
}
