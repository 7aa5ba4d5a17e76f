package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// retryData is the retry hint of a JSON-RPC error: its reason, retryable
// (nil when absent) and retryAfterMs (nil when absent).
type retryData struct {
	Reason       string `json:"reason"`
	Retryable    *bool  `json:"retryable"`
	RetryAfterMs *int64 `json:"retryAfterMs"`
}

// retryDataOf reads the retry hint of err, a JSON-RPC error; ok is false
// for any other error.
func retryDataOf(err error) (retryData, bool) {
	var e *jsonrpc.Error
	var d retryData
	if !errors.As(err, &e) || json.Unmarshal(e.Data, &d) != nil {
		return d, false
	}
	return d, true
}

// says is whether d says retryable want, with retryAfterMs within
// [minMs, maxMs] (both -1: none).
func (d retryData) says(want bool, minMs, maxMs int64) bool {
	if d.Retryable == nil || *d.Retryable != want {
		return false
	}
	if minMs < 0 {
		return d.RetryAfterMs == nil
	}
	return d.RetryAfterMs != nil && *d.RetryAfterMs >= minMs && *d.RetryAfterMs <= maxMs
}

// answerError is the JSON-RPC error of a JSON answer body (nil for a
// result or what is not JSON-RPC).
func answerError(body []byte) error {
	var m jsonrpc.Message
	if json.Unmarshal(body, &m) != nil || m.Error == nil {
		return nil
	}
	return m.Error
}

// TestACallerOverItsCapIsToldToRetry: a caller at its bound of requests in
// flight (a real call holding its one slot on a real server) is refused
// the next call with HTTP 429 and -32603, whose data says it did not run
// and may be sent again in a second, as Retry-After does; it never reached
// the server, and sent again once the slot is free it runs.
func TestACallerOverItsCapIsToldToRetry(t *testing.T) {
	up := testpeers.NodeEverything(t)
	fwd := bridgetest.Forward(t, strings.TrimSuffix(strings.TrimPrefix(up.URL, "http://"), "/mcp"), "/mcp")
	server := bridgetest.Published(t, "tools", "everything", fwd.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.*"))
	h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, func(c *Config) { c.MaxSubjectConcurrent = 1 })

	long := callAsync(h.connect(t, "alice-token", "/mcp", client.EraSession), "mcp.everything.trigger-long-running-operation", `{"duration":2,"steps":2}`)
	testkit.Eventually(t, "the long call reaches the server", func() bool { return fwd.Calls() == 1 })

	stateless := map[string]string{"MCP-Protocol-Version": "2026-07-28"}
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"mcp.everything.echo","arguments":{"message":"again"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	status, body, hdr := postBody(t, h.url+"/mcp", "alice-token", "", call, stateless)
	err := answerError(body)
	d, ok := retryDataOf(err)
	if status != http.StatusTooManyRequests || hdr.Get("Retry-After") != "1" || rpcCode(err) != jsonrpc.CodeInternalError ||
		!ok || d.Reason != reasonOverLimit || !d.says(true, 1000, 1000) || !strings.Contains(err.Error(), "it was not run") {
		t.Fatalf("a call over the caller's cap: HTTP %d, Retry-After %q, %v; want 429, Retry-After 1, -32603 over_limit, retryable, retryAfterMs 1000", status, hdr.Get("Retry-After"), err)
	}
	if n := fwd.Calls(); n != 1 {
		t.Fatalf("the refused call reached the server: %d calls, want 1", n)
	}

	if r := <-long; r.err != nil {
		t.Fatalf("the long call: %v", r.err)
	}
	status, body, _ = postBody(t, h.url+"/mcp", "alice-token", "", call, stateless)
	if status != http.StatusOK || !strings.Contains(string(body), "again") || fwd.Calls() != 2 {
		t.Fatalf("the call sent again once the slot is free: HTTP %d, %s, %d calls upstream; want it run once", status, body, fwd.Calls())
	}
}

// TestDenialsSayWhetherToRetry: a call the policy denies is answered the
// same when sent again (retryable false); one a rate limit denies did not
// run and may be sent again when the caller's bucket holds a call, which
// the answer says, and then it runs.
func TestDenialsSayWhetherToRetry(t *testing.T) {
	up := testpeers.GoEverything(t, false)
	server := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	limited := toolPolicy("tools", "limited", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.test_simple_text"))
	// 120 a minute: a token every 500 ms, one at most.
	limited.Spec.RateLimit = &v1alpha1.RateLimit{CallsPerMinute: 120, Burst: 1}
	denying := toolPolicy("tools", "denying", []v1alpha1.Subject{sa("agents", "alice")}, rule("deny", "mcp.everything.test_image_content"))
	h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{limited, denying}, nil)
	c := h.connect(t, "alice-token", "/mcp", client.EraSession)

	_, err := c.CallTool(testkit.Context(t), "mcp.everything.test_image_content", nil)
	if d, ok := retryDataOf(err); rpcCode(err) != CodeDenied || !ok || d.Reason != reasonDenied || !d.says(false, -1, -1) {
		t.Errorf("a call the policy denies: %v; want -32010 denied, retryable false, no retryAfterMs", err)
	}

	if _, err := c.CallTool(testkit.Context(t), "mcp.everything.test_simple_text", nil); err != nil {
		t.Fatalf("the call within the limit: %v", err)
	}
	_, err = c.CallTool(testkit.Context(t), "mcp.everything.test_simple_text", nil)
	d, ok := retryDataOf(err)
	if rpcCode(err) != CodeDenied || !ok || d.Reason != reasonRateLimited || !d.says(true, 1, 500) || !strings.Contains(err.Error(), "it was not run: send it again in") {
		t.Fatalf("a call over the rate limit: %v; want -32010 rate_limited, retryable, retryAfterMs within the 500 ms refill", err)
	}
	time.Sleep(time.Duration(*d.RetryAfterMs) * time.Millisecond)
	if _, err := c.CallTool(testkit.Context(t), "mcp.everything.test_simple_text", nil); err != nil {
		t.Errorf("the call sent again after retryAfterMs: %v, want it run", err)
	}
}

// TestNeverRan: what an upstream failure shows about a call. Only the
// bridge holding it back and the server refusing it unrun say it never ran;
// a connection that broke or timed out may have carried it there.
func TestNeverRan(t *testing.T) {
	notRun := fmt.Errorf("while sending tools/call: %w (%w)", streamhttp.ErrSessionExpired, streamhttp.ErrNotRun)
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"at the cap of upstream sessions":         {&upstream.Error{Reason: upstream.ReasonBusy, Err: errors.New("busy")}, true},
		"its server left before the send":         {&notSentError{&upstream.Error{Reason: upstream.ReasonUnavailable, Err: errors.New("gone")}}, true},
		"refused unrun by the server":             {&upstream.Error{Reason: upstream.ReasonUnstable, Err: notRun}, true},
		"the connection broke mid-answer":         {&upstream.Error{Reason: upstream.ReasonUnstable, Err: io.ErrUnexpectedEOF}, false},
		"no answer within the deadline":           {&upstream.Error{Reason: upstream.ReasonTimeout, Err: context.DeadlineExceeded}, false},
		"the server's pod changed under the call": {&upstream.Error{Reason: upstream.ReasonUnavailable, Err: errors.New("server changed under the call")}, false},
	} {
		if got := neverRan(tc.err); got != tc.want {
			t.Errorf("%s: neverRan = %v, want %v", name, got, tc.want)
		}
	}
}
