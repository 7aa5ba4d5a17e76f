package mcpbridge

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/identity"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/signed"
	"github.com/mcp-operator/mcp-operator/internal/policy"
)

// The pipeline's stages, each on its own and in process: no HTTP, no
// upstream (the stages before forward never reach one). The real engine,
// sealer and audit writer; the clock is the test's.

type stageBridge struct {
	b     *Bridge
	sink  *bridgetest.Sink
	audit *audit.Writer
	now   time.Time
}

func newStageBridge(t *testing.T, policies []v1alpha1.ToolPolicy, mod func(*Config)) *stageBridge {
	t.Helper()
	sealer, err := signed.New(testKey)
	if err != nil {
		t.Fatal(err)
	}
	sb := &stageBridge{sink: &bridgetest.Sink{}, now: time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC)}
	sb.audit = audit.New(audit.Options{Sink: sb.sink})
	t.Cleanup(func() { _ = sb.audit.Close(context.Background()) })
	n := 0
	cfg := Config{Sealer: sealer, Audit: sb.audit, Log: testr.New(t), Limiter: policy.NewRateLimiter(func() time.Time { return sb.now }),
		Clock: func() time.Time { return sb.now }, NewCallID: func() string { n++; return "call-" + string(rune('0'+n)) }}
	if mod != nil {
		mod(&cfg)
	}
	sb.b = New(cfg)
	e, errs := policy.Compile(policies)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	sb.b.SetEngine(e)
	return sb
}

// exchange is a stateless-era request from alice about target.
func (sb *stageBridge) exchange(method, target, args string) *exchange {
	id := identity.FromUserInfo("system:serviceaccount:agents:alice", nil)
	rq := &request{ctx: context.Background(), id: id, stateless: true, elicitation: true, msg: &jsonrpc.Message{ID: json.RawMessage(`1`), Method: method}}
	x := &exchange{rq: rq, method: method, target: target, what: method + " of " + target}
	if args != "" {
		x.args = json.RawMessage(args)
	}
	return x
}

func (sb *stageBridge) types(t *testing.T) []string {
	t.Helper()
	if err := sb.audit.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(sb.sink.String()), "\n") {
		var ev map[string]any
		if json.Unmarshal([]byte(line), &ev) == nil {
			out = append(out, ev["type"].(string))
		}
	}
	return out
}

// TestResumeStage: a requestState is opened once, for the request it was
// sealed for, before its deadline.
func TestResumeStage(t *testing.T) {
	sb := newStageBridge(t, nil, nil)
	issue := func(kind string, x *exchange, ttl time.Duration) string {
		x.id = "call-q"
		state, err := sb.b.sealState(newState(kind, x, sb.now.Add(ttl)))
		if err != nil {
			t.Fatal(err)
		}
		return state
	}
	resume := func(x *exchange, state string) *jsonrpc.Message {
		x.requestState = state
		return sb.b.resume(x)
	}
	asked := sb.exchange(methodCall, "mcp.fs.write", `{"path":"/a"}`)
	state := issue(resumeApproval, asked, time.Minute)

	for _, tc := range []struct {
		name string
		x    *exchange
		want string
	}{
		{"forged", sb.exchange(methodCall, "mcp.fs.write", `{"path":"/a"}`), "not issued"},
		{"another target", sb.exchange(methodCall, "mcp.fs.delete", `{"path":"/a"}`), "another caller or request"},
		{"another method", sb.exchange(methodPrompt, "mcp.fs.write", `{"path":"/a"}`), "another caller or request"},
		{"other arguments", sb.exchange(methodCall, "mcp.fs.write", `{"path":"/b"}`), "arguments changed"},
	} {
		s := state
		if tc.name == "forged" {
			s = state[:len(state)-2] + "xx"
		}
		if answer := resume(tc.x, s); answer == nil || !strings.Contains(answer.Error.Message, tc.want) {
			t.Errorf("%s: got %+v, want a refusal naming %q", tc.name, answer, tc.want)
		}
	}
	x := sb.exchange(methodCall, "mcp.fs.write", `{"path":"/a"}`)
	if answer := resume(x, state); answer != nil || x.resumed == nil || x.resumed.Kind != resumeApproval || x.id != "call-q" {
		t.Fatalf("the right retry: %+v, state %+v, id %q", answer, x.resumed, x.id)
	}
	if answer := resume(sb.exchange(methodCall, "mcp.fs.write", `{"path":"/a"}`), state); answer == nil || !strings.Contains(answer.Error.Message, "used already") ||
		!strings.Contains(answer.Error.Message, "its use was recorded without the bridge hearing it") {
		t.Fatalf("a second use: %+v", answer)
	}
	late := issue(resumeUpstream, sb.exchange(methodCall, "mcp.fs.write", `{}`), time.Minute)
	sb.now = sb.now.Add(61 * time.Second)
	if answer := resume(sb.exchange(methodCall, "mcp.fs.write", `{}`), late); answer == nil || !strings.Contains(answer.Error.Message, "expired") {
		t.Fatalf("past its deadline: %+v", answer)
	}
	// A question expired, or asked of other arguments, did not run the
	// request: sent again without requestState, it is asked afresh.
	for name, x := range map[string]*exchange{
		"question expired":  sb.exchange(methodCall, "mcp.fs.write", `{}`),
		"arguments changed": sb.exchange(methodCall, "mcp.fs.write", `{"path":"/b"}`),
	} {
		st := late
		if name == "arguments changed" {
			st = issue(resumeApproval, sb.exchange(methodCall, "mcp.fs.write", `{"path":"/a"}`), time.Minute)
		}
		answer := resume(x, st)
		if answer == nil || answer.Error == nil {
			t.Fatalf("%s: %+v, want a refusal", name, answer)
		}
		if d, ok := retryDataOf(answer.Error); !ok || d.Reason != reasonInvalidState || !d.says(true, -1, -1) ||
			!strings.Contains(answer.Error.Message, "the request was not run: send it again without requestState") {
			t.Errorf("%s: %v; want invalid_request_state, retryable, no retryAfterMs, to be sent again without requestState", name, answer.Error)
		}
	}
	// A state is answered in the era and the session it was asked in
	// (a stateless question's state must not be accepted in a
	// session, nor a parked call be continued by a session's request).
	inSession := func(id string) *exchange {
		x := sb.exchange(methodCall, "mcp.fs.write", `{}`)
		x.rq.stateless, x.rq.sess = false, &session.Session{Claims: session.Claims{ID: id}}
		return x
	}
	stateless := issue(resumeParked, sb.exchange(methodCall, "mcp.fs.write", `{}`), time.Hour)
	if answer := resume(inSession("s-1"), stateless); answer == nil || answer.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(answer.Error.Message, "issued to a request without a session (2026-07-28) and is used in a request in a session") {
		t.Fatalf("a stateless state in a session: %+v", answer)
	}
	sessions := issue(resumeApproval, inSession("s-1"), time.Hour)
	if answer := resume(sb.exchange(methodCall, "mcp.fs.write", `{}`), sessions); answer == nil || answer.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(answer.Error.Message, "issued to a request in a session") {
		t.Fatalf("a session's state without a session: %+v", answer)
	}
	if answer := resume(inSession("s-2"), sessions); answer == nil || answer.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(answer.Error.Message, "another session") {
		t.Fatalf("a session's state in another session: %+v", answer)
	}
	if answer := resume(inSession("s-1"), sessions); answer != nil {
		t.Fatalf("a session's state in its own session, after the refusals: %+v", answer)
	}
	parked := issue(resumeParked, sb.exchange(methodCall, "mcp.fs.write", `{}`), time.Hour)
	if answer := resume(sb.exchange(methodCall, "mcp.fs.write", `{}`), parked); answer == nil || !strings.Contains(answer.Error.Message, "not held by this replica") {
		t.Fatalf("a parked call this replica does not hold: %+v", answer)
	}
}

// TestDecideStage: rate limits apply to tool calls only; the injection
// floor is the bridge's flag or a rule's.
func TestDecideStage(t *testing.T) {
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.fs.*"))
	pol.Spec.RateLimit = &v1alpha1.RateLimit{CallsPerMinute: 1}
	sb := newStageBridge(t, []v1alpha1.ToolPolicy{pol}, nil)
	eng := sb.b.engine.Load()
	call := func() *exchange {
		x := sb.exchange(methodCall, "mcp.fs.read", "")
		sb.b.applyGrantsLimitsFloor(x, eng.DecideTool(x.rq.id.Subject(), policy.ToolCall{Name: "mcp.fs.read", Server: "fs", Namespace: "tools", Risk: v1alpha1.RiskRead}))
		return x
	}
	if x := call(); x.res.Decision != v1alpha1.DecisionAllow || x.blockInjection {
		t.Fatalf("the first call: %+v", x.res)
	}
	if x := call(); x.res.Decision != v1alpha1.DecisionDeny || denial(x.res).failReason != reasonRateLimited {
		t.Fatalf("the second call within the minute must be rate limited: %+v", x.res)
	}
	read := sb.exchange(methodRead, "mcp://fs/file:///a", "")
	sb.b.applyGrantsLimitsFloor(read, policy.Result{Decision: v1alpha1.DecisionAllow})
	if read.res.Decision != v1alpha1.DecisionAllow {
		t.Fatalf("a read does not take from the rate limit: %+v", read.res)
	}
	floor := newStageBridge(t, nil, func(c *Config) { c.BlockInjection = true })
	x := floor.exchange(methodRead, "mcp://fs/file:///a", "")
	floor.b.applyGrantsLimitsFloor(x, policy.Result{Decision: v1alpha1.DecisionAllow})
	if !x.blockInjection {
		t.Fatal("--block-injection must set the floor for every request")
	}
	x = sb.exchange(methodPrompt, "mcp.fs.p", "")
	sb.b.applyGrantsLimitsFloor(x, policy.Result{Decision: v1alpha1.DecisionAllow, BlockInjection: true})
	if !x.blockInjection {
		t.Fatal("a rule's injection: Block must set the floor")
	}
}

// TestSettleStage: the decision is recorded before anything goes upstream;
// a denial closes the chain the same way for every kind; a record that
// cannot be written refuses the request; a question waits, unresolved.
func TestSettleStage(t *testing.T) {
	sb := newStageBridge(t, nil, nil)
	x := sb.exchange(methodRead, "mcp://fs/file:///a", "")
	sb.b.applyGrantsLimitsFloor(x, policy.Result{Decision: v1alpha1.DecisionDeny, Reason: "no rule"})
	answer := sb.b.settle(x)
	if answer == nil || answer.Error.Code != CodeDenied || !strings.Contains(answer.Error.Message, "resources/read of mcp://fs/file:///a denied: no rule") {
		t.Fatalf("a denied read: %+v", answer)
	}
	if got := strings.Join(sb.types(t), " "); got != "permission.requested permission.resolved tool.failed" {
		t.Fatalf("a denied read's chain: %s", got)
	}

	x = sb.exchange(methodCall, "mcp.fs.write", `{}`)
	sb.b.applyGrantsLimitsFloor(x, policy.Result{Decision: v1alpha1.DecisionAsk, Approval: &policy.Approval{Timeout: time.Minute, Modes: []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowOnce}, Channels: []v1alpha1.ApprovalChannel{v1alpha1.ChannelElicitation}}})
	answer = sb.b.settle(x)
	if answer == nil || answer.Result == nil || !strings.Contains(string(answer.Result), `"resultType":"input_required"`) {
		t.Fatalf("an ask of a 2026-07-28 client must be answered input_required: %+v", answer)
	}
	if got := sb.types(t); got[len(got)-1] != "permission.requested" {
		t.Fatalf("a pending question resolves nothing yet: %v", got)
	}

	x = sb.exchange(methodPrompt, "mcp.fs.p", "")
	sb.b.applyGrantsLimitsFloor(x, policy.Result{Decision: v1alpha1.DecisionAsk})
	x.noAsk = true
	if answer := sb.b.settle(x); answer == nil || !strings.Contains(answer.Error.Message, reasonApprovalUnavailable) {
		t.Fatalf("a request that cannot be asked about is denied: %+v", answer)
	}

	_ = sb.audit.Close(context.Background())
	x = sb.exchange(methodCall, "mcp.fs.read", "")
	sb.b.applyGrantsLimitsFloor(x, policy.Result{Decision: v1alpha1.DecisionAllow})
	answer = sb.b.settle(x)
	if answer == nil || answer.Error.Code != jsonrpc.CodeInternalError || !strings.Contains(answer.Error.Message, "audit record") {
		t.Fatalf("an unrecorded call must be refused: %+v", answer)
	}
	// It did not run, and may be sent again: the audit may take it then.
	if d, ok := retryDataOf(answer.Error); !ok || d.Reason != reasonAudit || !d.says(true, -1, -1) || !strings.Contains(answer.Error.Message, "was not run") {
		t.Errorf("an unrecorded call: %v; want audit_unavailable, retryable, no retryAfterMs, saying it was not run", answer.Error)
	}
}

// A request's arguments are hashed for its events only where the audit
// Writer shows the digest (preview), and then once: the sealed state and
// the ToolApproval reuse it. In full and none modes nothing is hashed.
func TestArgsDigestOnlyWhereTheAuditShowsIt(t *testing.T) {
	args := json.RawMessage(`{"b":1,"a":2}`)
	for _, tc := range []struct {
		mode audit.ArgsMode
		args json.RawMessage
		hash bool
	}{
		{audit.ArgsPreview, args, true},
		{audit.ArgsPreview, nil, false}, // a resources/read
		{audit.ArgsFull, args, false},
		{audit.ArgsNone, args, false},
	} {
		w := audit.New(audit.Options{Sink: &bridgetest.Sink{}, ArgsMode: tc.mode})
		b := &Bridge{cfg: Config{Audit: w}}
		x := &exchange{args: tc.args}
		d := b.eventArgsDigest(x)
		if hashed := x.digest != nil; hashed != tc.hash || (d != "") != tc.hash {
			t.Errorf("mode %d, arguments %s: hashed %v, event digest %q; want hashed %v", tc.mode, tc.args, hashed, d, tc.hash)
		}
		if tc.hash && d != x.argsDigest() {
			t.Errorf("the events' digest %s is not the request's %s", d, x.argsDigest())
		}
		_ = w.Close(context.Background())
	}
}
