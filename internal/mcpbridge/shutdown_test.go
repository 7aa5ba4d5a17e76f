package mcpbridge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// serve serves h on a loopback listener with the bridge's own server
// settings (NewServer), as the manager does, and returns its URL.
func serve(t *testing.T, h http.Handler) (*http.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer("", h)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return srv, "http://" + ln.Addr().String()
}

// TestStopEndsEverythingWithinItsBounds: a replica told to stop while it
// has calls in flight, a call parked for its agent's answer and an open
// GET stream fails readyz at once, still answers during the delay, ends
// the GET stream and the parked call at the start of the drain, lets the
// short call finish, fails the long one with bridge_stopping at the end of
// the drain, DELETEs the agents' upstream sessions, flushes every call's
// audit chain to its end, and returns within StopBounds.Total().
func TestStopEndsEverythingWithinItsBounds(t *testing.T) {
	h, st := statefulAndEverything(t)
	srv, url := serve(t, h.b.Handler())
	h.url = url
	h.b.SetReady(true)
	ops := httptest.NewServer(h.b.OpsHandler(nil))
	defer ops.Close()
	readyz := func() int {
		resp, err := http.Get(ops.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	// A session-era agent with an upstream session of its own.
	agent := h.connect(t, "alice-token", "/mcp", client.EraSession)
	if _, err := agent.CallTool(testkit.Context(t), "mcp.stateful.remember", json.RawMessage(`{"value":"x"}`)); err != nil {
		t.Fatal(err)
	}
	upstreamSessions := slices.Compact(st.Calls())
	if len(upstreamSessions) != 1 || upstreamSessions[0] == "" {
		t.Fatalf("the agent's calls went upstream in sessions %q, want one session", upstreamSessions)
	}
	// A GET stream of another session.
	sid := openSession(t, url+"/mcp", "alice-token")
	req, _ := http.NewRequest(http.MethodGet, url+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer alice-token")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Accept", "text/event-stream")
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %v %v", stream, err)
	}
	streamEnded := make(chan time.Duration, 1)
	// A 2026-07-28 agent's call parked for its answer to the server.
	const tool, args = "mcp.everything.test_elicitation", `{"message":"q"}`
	raw, err := connectAnswering(t, url+"/mcp", "alice-token").CallTool(testkit.Context(t), tool, json.RawMessage(args))
	if err != nil || !strings.Contains(string(raw), "input_required") {
		t.Fatalf("want the call parked: %s %v", raw, err)
	}
	// Two calls in flight: one ends within the drain, one would not.
	short := callAsync(agent, "mcp.stateful.sleep", `{"ms":800}`)
	long := callAsync(agent, "mcp.stateful.sleep", `{"ms":60000}`)
	// Calls drains what it returns: count across polls, as the two calls may
	// reach the server between two of them.
	upstreamCalls := 0
	testkit.Eventually(t, "both calls in flight upstream", func() bool { upstreamCalls += len(st.Calls()); return upstreamCalls >= 2 })

	bounds := StopBounds{Delay: 1500 * time.Millisecond, Drain: 1500 * time.Millisecond, Sessions: 2 * time.Second, Flush: 2 * time.Second}
	start := time.Now()
	go func() {
		_, _ = io.Copy(io.Discard, stream.Body)
		streamEnded <- time.Since(start)
	}()
	stopped := make(chan error, 1)
	go func() { stopped <- h.b.Stop(srv, h.reg, h.audit, nil, bounds) }()
	testkit.Eventually(t, "readyz fails as the stop begins", func() bool { return readyz() == http.StatusServiceUnavailable })
	// During the delay the replica still answers.
	if _, err := agent.CallTool(testkit.Context(t), "mcp.stateful.recall", json.RawMessage(`{}`)); err != nil {
		t.Errorf("a call during the delay: %v, want an answer", err)
	}
	if d := time.Since(start); d >= bounds.Delay {
		t.Errorf("the call meant for the delay was answered %s after the stop began, past the delay %s: the check did not run", d, bounds.Delay)
	}

	var stopErr error
	select {
	case stopErr = <-stopped:
	case <-time.After(2 * bounds.Total()):
		t.Fatalf("Stop did not return within twice its bound %s", bounds.Total())
	}
	took := time.Since(start)
	if stopErr != nil {
		t.Errorf("Stop: %v", stopErr)
	}
	if took > bounds.Total() {
		t.Errorf("Stop took %s, more than its bound %s", took, bounds.Total())
	}
	select {
	case d := <-streamEnded:
		if d > bounds.Delay+bounds.Drain/2 {
			t.Errorf("the GET stream ended %s after the stop began, want at the start of the drain (%s)", d, bounds.Delay)
		}
	default:
		t.Error("the GET stream is still open after Stop")
	}
	if r := <-short; r.err != nil || !strings.Contains(string(r.res), "slept") {
		t.Errorf("the short call: %s %v, want its result", r.res, r.err)
	}
	r := <-long
	var rpcErr *jsonrpc.Error
	// It was with its server when the drain ended: it may have run there,
	// so the agent is not told to send it again (that could run it twice).
	if verdict, ok := retryable(r.err); !errors.As(r.err, &rpcErr) || rpcErr.Code != CodeUpstream || !strings.Contains(string(rpcErr.Data), `"reason":"bridge_stopping"`) ||
		!ok || verdict || !strings.Contains(rpcErr.Message, "it may have run there") || strings.Contains(rpcErr.Message, "send the request again") {
		t.Errorf("the long call: %v, want -32011 bridge_stopping, retryable false, saying it may have run", r.err)
	}
	if n := len(h.b.parkedIDs()); n != 0 {
		t.Errorf("%d calls still parked", n)
	}
	if !slices.Contains(st.Deleted(), upstreamSessions[0]) {
		t.Errorf("the agent's upstream session %s was not DELETEd (DELETEs: %q)", upstreamSessions[0], st.Deleted())
	}

	// Every call's audit chain is complete: one end, last.
	events := sinkEvents(t, h.sink)
	ends := map[string]string{}
	var ids []string
	for _, ev := range events {
		id, _ := ev["toolCallId"].(string)
		switch ev["type"] {
		case "permission.requested":
			ids = append(ids, id)
		case "tool.completed", "tool.failed":
			if prev, ok := ends[id]; ok {
				t.Errorf("call %s ended twice: %s, then %s", id, prev, ev["type"])
			}
			ends[id] = ev["type"].(string) + " " + stringOf(ev["reason"])
		default:
			if _, ok := ends[id]; ok && id != "" {
				t.Errorf("call %s has %s after its end", id, ev["type"])
			}
		}
	}
	stoppedCalls := 0
	for _, id := range ids {
		switch ends[id] {
		case "":
			t.Errorf("call %s has no end in the audit stream: %q", id, typesOf(events, id))
		case "tool.failed " + ReasonStopping:
			stoppedCalls++
		}
	}
	if stoppedCalls != 2 {
		t.Errorf("%d calls ended %s, want 2 (the long call and the parked one): %v", stoppedCalls, ReasonStopping, ends)
	}
}

func stringOf(v any) string { s, _ := v.(string); return s }

// parkedIDs are the ids of the calls parked on b.
func (b *Bridge) parkedIDs() []string {
	var ids []string
	b.parked.Range(func(k, _ any) bool { ids = append(ids, k.(string)); return true })
	return ids
}

// sinkEvents are the audit events in sink (its writer may be closed).
func sinkEvents(t *testing.T, sink *bridgetest.Sink) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(sink.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit line is not JSON: %v: %s", err, sc.Text())
		}
		out = append(out, ev)
	}
	return out
}

// A stopping replica refuses new connections once its delay has passed.
func TestStopRefusesAfterTheDelay(t *testing.T) {
	h := newHarness(t, nil, nil, nil)
	srv, url := serve(t, h.b.Handler())
	done := make(chan error, 1)
	go func() {
		done <- h.b.Stop(srv, h.reg, h.audit, nil, StopBounds{Delay: 200 * time.Millisecond, Drain: time.Second, Sessions: time.Second, Flush: time.Second})
	}()
	if err := <-done; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/mcp", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("after Stop a request must be refused")
	}
}

// TestACallParkedAfterTheWaitsEndedIsEnded: a call that parks for its
// agent's answer after the stopping replica ended its waits (the drain has
// begun, its call was in flight) is ended at once with bridge_stopping,
// not held until its deadline: no answer of its agent reaches it here.
// The agent's retry, on the replica that takes over, is told the call
// reached its server and may have run, and to call again without the state
// only if running it twice does no harm; so called, it is asked again.
func TestACallParkedAfterTheWaitsEndedIsEnded(t *testing.T) {
	everything := testpeers.GoEverything(t, false)
	servers := []v1alpha1.MCPServer{bridgetest.Published(t, "tools", "everything", everything.URL, v1alpha1.ToolsSpec{})}
	pol := toolPolicy("tools", "callers", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.*"))
	h := newHarness(t, servers, []v1alpha1.ToolPolicy{pol}, func(c *Config) { c.CallTimeout = time.Minute })
	_, url := serve(t, h.b.Handler())
	h.b.endWaits()
	const tool, args = "mcp.everything.test_elicitation", `{"message":"q"}`
	raw, err := connectAnswering(t, url+"/mcp", "alice-token").CallTool(testkit.Context(t), tool, json.RawMessage(args))
	if err != nil || !strings.Contains(string(raw), "input_required") {
		t.Fatalf("want the call parked: %s %v", raw, err)
	}
	testkit.Eventually(t, "the parked call ended", func() bool { return len(h.b.parkedIDs()) == 0 })
	testkit.Eventually(t, "the parked call's audit chain ends with tool.failed bridge_stopping", func() bool {
		for _, ev := range sinkEvents(t, h.sink) {
			if ev["type"] == "tool.failed" && ev["reason"] == ReasonStopping {
				return true
			}
		}
		return false
	})

	var parked struct {
		RequestState string `json:"requestState"`
	}
	_ = json.Unmarshal(raw, &parked)
	next := newHarness(t, servers, []v1alpha1.ToolPolicy{pol}, nil)
	agent := connectAnswering(t, next.url+"/mcp", "alice-token")
	_, err = agent.Call(testkit.Context(t), "tools/call", json.RawMessage(`{"name":"`+tool+`","arguments":`+args+`,"inputResponses":{"server":{"action":"accept","content":{"username":"eve"}}},"requestState":"`+parked.RequestState+`"}`))
	if d, ok := retryDataOf(err); rpcCode(err) != jsonrpc.CodeInvalidParams || !ok || d.Reason != reasonParkedGone || !d.says(false, -1, -1) ||
		!strings.Contains(err.Error(), "may have run") || !strings.Contains(err.Error(), "call again without requestState only if running it twice does no harm") {
		t.Errorf("the retry of the ended parked call on the next replica: %v; want -32602 parked_call_gone, not retryable (it reached its server and may have run), saying when to call again without requestState", err)
	}
	if raw, err := agent.CallTool(testkit.Context(t), tool, json.RawMessage(args)); err != nil || !strings.Contains(string(raw), "input_required") {
		t.Errorf("the call made again without requestState: %s %v, want the server's question again", raw, err)
	}
}

// TestStopKeepsIdleConnectionsThroughTheDelay: a connection idle when the
// replica is told to stop is not closed under its agent (whose next
// request on it would be written and never answered: EOF); the request
// sent on it during the delay is answered, with Connection: close, and the
// agent's next request opens a new connection.
func TestStopKeepsIdleConnectionsThroughTheDelay(t *testing.T) {
	h := newHarness(t, nil, nil, nil)
	srv, url := serve(t, h.b.Handler())
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	get := func() (reused bool, resp *http.Response) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url+"/mcp/server-card", nil)
		req = req.WithContext(httptrace.WithClientTrace(testkit.Context(t), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
		}))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("a request during the stop's delay: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return reused, resp
	}
	if _, resp := get(); resp.Close {
		t.Fatal("a replica that is not stopping closed the connection after its answer")
	}

	done := make(chan error, 1)
	go func() {
		done <- h.b.Stop(srv, h.reg, h.audit, nil, StopBounds{Delay: time.Second, Drain: time.Second, Sessions: time.Second, Flush: time.Second})
	}()
	time.Sleep(300 * time.Millisecond) // the stop has begun; its delay has not ended
	reused, resp := get()
	if !reused {
		t.Error("the connection idle when the stop began was closed under its agent")
	}
	if !resp.Close {
		t.Error("an answer of a stopping replica does not carry Connection: close")
	}
	if reused, _ := get(); reused {
		t.Error("the agent's next request went on the connection its last answer closed")
	}
	if err := <-done; err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// statefulAndEverything is a bridge over a recording stateful server and
// the go-sdk everything-server, both of whose tools alice may call.
func statefulAndEverything(t *testing.T) (*harness, *bridgetest.Stateful) {
	st := bridgetest.NewStateful(t, false)
	everything := testpeers.GoEverything(t, false)
	servers := []v1alpha1.MCPServer{
		bridgetest.Published(t, "tools", "stateful", st.URL, v1alpha1.ToolsSpec{}),
		bridgetest.Published(t, "tools", "everything", everything.URL, v1alpha1.ToolsSpec{}),
	}
	pol := toolPolicy("tools", "callers", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.stateful.*", "mcp.everything.*"))
	h := newHarness(t, servers, []v1alpha1.ToolPolicy{pol}, func(c *Config) { c.CallTimeout = time.Minute })
	return h, st
}
