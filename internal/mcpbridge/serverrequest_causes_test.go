package mcpbridge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// TestServerRequestSaysTheAgentWentAway: a session-era agent that goes away
// while the server's elicitation waits for its answer leaves an
// mcp.server_request event that says so, not a reason that ends with "context
// canceled".
func TestServerRequestSaysTheAgentWentAway(t *testing.T) {
	reason := serverRequestReasonWhen(t, func(_ *testing.T, _, _ string, leave func()) {
		leave() // the agent goes away without answering
	})
	if !strings.Contains(reason, errAgentGone.Error()) {
		t.Fatalf("the server request's event gives the reason %q, want it to say %q", reason, errAgentGone)
	}
}

// TestServerRequestSaysTheAgentEndedItsSession: an agent that ends its session
// (DELETE) while the server's elicitation waits for its answer leaves an
// mcp.server_request event that says so; the session's end does not tell the
// call the agent cancelled it (notifications/cancelled).
func TestServerRequestSaysTheAgentEndedItsSession(t *testing.T) {
	reason := serverRequestReasonWhen(t, func(t *testing.T, url, sid string, _ func()) {
		endSession(t, url, "alice-token", sid)
	})
	if !strings.Contains(reason, session.ErrEnded.Error()) {
		t.Fatalf("the server request's event gives the reason %q, want it to say %q", reason, session.ErrEnded)
	}
}

// serverRequestReasonWhen has a session-era agent call a tool whose server
// asks it a question (elicitation), runs end once the question reached the
// agent (leave closes the agent's call), and returns the reason of the
// mcp.server_request event the unanswered question leaves. The agent is
// raw HTTP: it reads its call's stream up to the server's request and
// never answers it.
func serverRequestReasonWhen(t *testing.T, end func(t *testing.T, url, sid string, leave func())) string {
	t.Helper()
	up := testpeers.GoEverything(t, false)
	srv := bridgetest.PublishedRelaying(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{}, v1alpha1.ServerRequests{Elicitation: v1alpha1.RelayAllowed})
	pol := toolPolicy("tools", "callers", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.*"))
	h := newHarness(t, []v1alpha1.MCPServer{srv}, []v1alpha1.ToolPolicy{pol}, nil)
	url := h.url + "/mcp"
	status, code, hdr := post(t, url, "alice-token", "", strings.Replace(initBody, `"capabilities":{}`, `"capabilities":{"elicitation":{}}`, 1), nil)
	sid := hdr.Get("Mcp-Session-Id")
	if status != http.StatusOK || code != 0 || sid == "" {
		t.Fatalf("initialize: status %d, code %d, session %q", status, code, sid)
	}
	version := map[string]string{"MCP-Protocol-Version": "2025-11-25"}
	if status, _, _ := post(t, url, "alice-token", sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, version); status != http.StatusAccepted {
		t.Fatalf("notifications/initialized: status %d", status)
	}

	ctx, leave := context.WithCancel(testkit.Context(t))
	defer leave()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp.everything.test_elicitation","arguments":{"message":"q"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer alice-token")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	found := false
	for !found && lines.Scan() {
		found = strings.Contains(lines.Text(), `"elicitation/create"`)
	}
	if !found {
		t.Fatalf("the call's stream ended before the server's request (read error: %v)", lines.Err())
	}
	end(t, url, sid, leave)

	var reason string
	testkit.Eventually(t, "the server request's event", func() bool {
		for _, ev := range h.events(t) {
			if ev["type"] == "mcp.server_request" {
				reason, _ = ev["reason"].(string)
				return true
			}
		}
		return false
	})
	return reason
}

// TestParkedCallDecisionWins: a parked call the bridge ends (denied
// meanwhile) hands the server's waiting request the bridge's decision, in
// every run. The decision is given before the call is cancelled; the
// request waited on both, and select picked either at random, so about
// one run in two recorded "the call ended before the agent answered"
// instead of the denial.
func TestParkedCallDecisionWins(t *testing.T) {
	const why = "the call was denied meanwhile"
	for i := range 50 {
		ctx, cancel := context.WithCancelCause(context.Background())
		p := &parkable{ctx: ctx, cancel: cancel, asks: make(chan serverAsk), done: make(chan parkableEnd, 1), ended: make(chan struct{})}
		asking, asked := make(chan struct{}), make(chan *relayFailure, 1)
		go func() { // the relay hook of the server's request, and the call ending after it
			close(asking)
			_, failed := relayParked(ctx, p, "elicitation/create", json.RawMessage(`{}`))
			asked <- failed
			p.done <- parkableEnd{err: errors.New("the call ended")}
		}()
		// The hook waits to hand its request over before the bridge takes
		// it, as it does when the agent's retry comes fast: then the bridge
		// gives its decision and cancels before the hook waits for either
		// (these yields only make that order likely; the outcome must not
		// depend on it).
		<-asking
		for range 3 {
			runtime.Gosched()
		}
		pc := &parkedCall{p: p, ask: <-p.asks}
		pc.end(CodeDenied, why)
		switch failed := <-asked; {
		case failed == nil:
			t.Fatalf("run %d: the server's request was answered, want it ended with %q", i, why)
		case failed.err.Message != why:
			t.Fatalf("run %d: the server's request ended with %q, want %q", i, failed.err.Message, why)
		}
	}
}

// TestRequestContextOfAnAgentGone: the context of a request whose agent is
// gone already is done when requestContext returns, with the reason, so no
// work starts for it: it does not wait for AfterFunc's goroutine to run.
func TestRequestContextOfAnAgentGone(t *testing.T) {
	agent, leave := context.WithCancel(context.Background())
	leave()
	ctx, cancel := requestContext(agent)
	defer cancel(nil)
	if ctx.Err() == nil {
		t.Fatal("the request's context is not done, while its agent is gone")
	}
	if cause := context.Cause(ctx); cause != errAgentGone {
		t.Fatalf("the request's context ended with %v, want %v", cause, errAgentGone)
	}
}

// TestCallDeadlineCause: a forwarded call ended at its deadline is told so,
// with the deadline's length, and still reads as a deadline; the cause is
// built once per bridge (every call gets the same error), not per call.
func TestCallDeadlineCause(t *testing.T) {
	b := New(Config{CallTimeout: time.Millisecond})
	first, stop := b.contextWithCallTimeout(context.Background())
	defer stop()
	second, stop2 := b.contextWithCallTimeout(context.Background())
	defer stop2()
	<-first.Done()
	<-second.Done()
	cause := context.Cause(first)
	if !errors.Is(cause, context.DeadlineExceeded) || !strings.Contains(cause.Error(), "deadline (1ms) passed") {
		t.Fatalf("a call ended at its deadline is told %v, want the deadline and its length", cause)
	}
	if context.Cause(second) != cause {
		t.Fatalf("two calls' deadline causes differ (%p, %p): the cause is built per call", context.Cause(second), cause)
	}
}
