package mcpbridge

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// TestAllowOnceIsUsedOnce: one allow_once answer with its
// requestState runs the call once. Replayed, in either era, it is refused
// and nothing more goes upstream (before: three replays ran a destructive
// tool three times under one call id). Raw HTTP, to replay the bytes.
func TestAllowOnceIsUsedOnce(t *testing.T) {
	h := allowOnceHarness(t)

	params := `"name":"mcp.everything.test_simple_text"`
	first := statelessPost(t, h.url, "alice-token", "tools/call", params)
	state := resultString(first, "requestState")
	if state == "" {
		t.Fatalf("the first call must be answered input_required: %s", first)
	}
	retry := params + `,"requestState":` + string(mustJSON(state)) + `,"inputResponses":{"approval":{"action":"accept","content":{"decision":"allow_once"}}}`
	if got := statelessPost(t, h.url, "alice-token", "tools/call", retry); !strings.Contains(string(got), "simple text response") {
		t.Fatalf("the retry with allow_once must run the call: %s", got)
	}
	refused := func(era string, got []byte) {
		t.Helper()
		var m jsonrpc.Message
		_ = json.Unmarshal(got, &m)
		if m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(m.Error.Message, "used already") {
			t.Fatalf("a replayed allow_once (%s) must be refused as used: %s", era, got)
		}
	}
	for range 2 {
		refused("2026-07-28", statelessPost(t, h.url, "alice-token", "tools/call", retry))
	}
	sid := openSession(t, h.url+"/mcp", "alice-token")
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{` + retry + `}}`
	status, code, _ := post(t, h.url+"/mcp", "alice-token", sid, body, map[string]string{"Accept": "application/json"})
	if status != 200 || code != jsonrpc.CodeInvalidParams {
		t.Fatalf("a replayed allow_once (2025-11-25 session) got status %d code %d, want 200 with -32602", status, code)
	}
	events := h.events(t)
	id := lastCallID(events, "mcp.everything.test_simple_text")
	if n := strings.Count(strings.Join(typesOf(events, id), " "), "mcp.call.started"); n != 1 {
		t.Fatalf("the call went upstream %d times, want once: %v", n, typesOf(events, id))
	}
}

// TestStateIsBoundToItsEra: a 2026-07-28 question's requestState with an
// allow_once answer, sent inside a session before its own retry, is refused
// with -32602 and runs nothing; the stateless retry it was issued for still
// runs once. Raw HTTP, to carry the bytes across eras.
func TestStateIsBoundToItsEra(t *testing.T) {
	h := allowOnceHarness(t)

	params := `"name":"mcp.everything.test_simple_text"`
	state := askedState(t, h, params)
	retry := params + `,"requestState":` + string(mustJSON(state)) + `,"inputResponses":{"approval":{"action":"accept","content":{"decision":"allow_once"}}}`
	sid := openSession(t, h.url+"/mcp", "alice-token")
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{` + retry + `}}`
	_, got, _ := postBody(t, h.url+"/mcp", "alice-token", sid, body, map[string]string{"Accept": "application/json"})
	var m jsonrpc.Message
	_ = json.Unmarshal(got, &m)
	if m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(m.Error.Message, "used in a request in a session") {
		t.Fatalf("a stateless question's state inside a session: %s, want -32602 naming the eras", got)
	}
	if got := statelessPost(t, h.url, "alice-token", "tools/call", retry); !strings.Contains(string(got), "simple text response") {
		t.Fatalf("the stateless retry the state was issued for must still run: %s", got)
	}
	events := h.events(t)
	id := lastCallID(events, "mcp.everything.test_simple_text")
	if n := strings.Count(strings.Join(typesOf(events, id), " "), "mcp.call.started"); n != 1 {
		t.Fatalf("the call went upstream %d times, want once: %v", n, typesOf(events, id))
	}
}

// allowOnceHarness is a bridge in front of the everything server whose policy
// asks alice about every call, offering allow_once.
func allowOnceHarness(t *testing.T) *harness {
	up := testpeers.GoEverything(t, false)
	server := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice")}, rule("ask", "mcp.everything.*"))
	pol.Spec.Approval.Timeout = metav1.Duration{Duration: time.Minute}
	pol.Spec.Approval.Modes = []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowOnce}
	h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, nil)
	return h
}

// TestRateLimitedApprovalResumeSaysStateSpent: the allow_once retry a rate
// limit denies did not run, and may be sent again when the caller's bucket
// holds a call, but without its requestState, which the retry spent: the
// answer says so.
func TestRateLimitedApprovalResumeSaysStateSpent(t *testing.T) {
	up := testpeers.GoEverything(t, false)
	server := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice")}, rule("ask", "mcp.everything.*"))
	pol.Spec.Approval.Timeout = metav1.Duration{Duration: time.Minute}
	pol.Spec.Approval.Modes = []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowOnce}
	pol.Spec.RateLimit = &v1alpha1.RateLimit{CallsPerMinute: 1, Burst: 1}
	h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, nil)

	params := `"name":"mcp.everything.test_simple_text"`
	state := askedState(t, h, params)
	retry := params + `,"requestState":` + string(mustJSON(state)) + `,"inputResponses":{"approval":{"action":"accept","content":{"decision":"allow_once"}}}`
	got := statelessPost(t, h.url, "alice-token", "tools/call", retry)
	err := answerError(got)
	if d, ok := retryDataOf(err); rpcCode(err) != CodeDenied || !ok || d.Reason != reasonRateLimited || !d.says(true, 1, 60000) ||
		!strings.Contains(err.Error(), "without requestState (the requestState is spent)") {
		t.Fatalf("the rate-limited allow_once retry: %s; want -32010 rate_limited, retryable, to be sent again without requestState", got)
	}
}

// TestApprovalResumeOfAServerAwaySaysStateSpent: the allow_once retry
// whose server went away by the available stage did not run, and may be
// sent again when the server is back, but without its requestState, which
// the retry spent: the answer says so.
func TestApprovalResumeOfAServerAwaySaysStateSpent(t *testing.T) {
	h := allowOnceHarness(t)
	params := `"name":"mcp.everything.test_simple_text"`
	state := askedState(t, h, params)
	server, _, _ := h.reg.Server("everything")
	restarting := bridgetest.Published(t, server.Namespace, "everything", server.URL, v1alpha1.ToolsSpec{})
	restarting.Status.Endpoint = nil
	setReady(&restarting.Status, metav1.ConditionFalse, v1alpha1.ReasonRestarting, "restarting after crash 1")
	a := &awayOnDecide{adapter: &call{}, away: func() { h.reg.Update(routes.Build([]v1alpha1.MCPServer{restarting}), target) }}
	answer := h.b.serve(aliceAsks("", "tools/call", `{`+params+`,"requestState":`+string(mustJSON(state))+`,"inputResponses":{"approval":{"action":"accept","content":{"decision":"allow_once"}}}}`), a)
	if answer == nil || answer.Error == nil {
		t.Fatalf("the allow_once retry of a server away: %+v, want a refusal", answer)
	}
	if d, ok := retryDataOf(answer.Error); answer.Error.Code != CodeServerAway || !ok || d.Reason != v1alpha1.ReasonRestarting || d.Retryable == nil || !*d.Retryable ||
		!strings.Contains(answer.Error.Message, "without requestState: the requestState is spent") {
		t.Errorf("the allow_once retry of a server away: %v; want -32012 Restarting, retryable, to be sent again without requestState", answer.Error)
	}
}

// askedState is the requestState of alice's 2026-07-28 call with params,
// which the policy asks about.
func askedState(t *testing.T, h *harness, params string) string {
	t.Helper()
	state := resultString(statelessPost(t, h.url, "alice-token", "tools/call", params), "requestState")
	if state == "" {
		t.Fatal("the first call must be answered input_required")
	}
	return state
}
