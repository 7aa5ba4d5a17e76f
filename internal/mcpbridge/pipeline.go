package mcpbridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstreamcred"
	"github.com/mcp-operator/mcp-operator/internal/policy"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// The pipeline: every request goes through these stages, in this order.
// The transport (transport.go, post) runs the first three for every
// request; serve runs the rest for every request that reaches a server,
// with an adapter supplying what differs between tools, resources,
// prompts, skills, completions and subscriptions. Each stage is called
// from serve alone (stages_test.go), and the spans of those that have one
// come from traced (spans.go), not from the stages.
//
//	authenticate           post: authenticate           bearer token (TokenReview)
//	decode and check       post: readBody, rawjson.Check within the connection's budgets
//	                                                    and the replica's body bytes, then a
//	                                                    shared slot is taken (limits.go)
//	establish              post: establish              era, session, requests in flight
//	resolve the target     adapter.resolve              params, the tool/resource/prompt
//	resume                 b.resume                     a retry's requestState (state.go)
//	decide                 adapter.decide               the engine; then session grants,
//	                       b.applyGrantsLimitsFloor     rate limits, injection floor
//	wait for the server    b.available                  activity; a server away is
//	                                                    refused with why, one asleep
//	                                                    woken and waited for, and the
//	                                                    request resolved again
//	                                                    (availability.go)
//	ask, record decision   b.settle                     ask.go; a denial is answered by
//	                                                    b.answerDenied
//	upstream credential    b.credential                 what goes upstream: shared, an
//	                                                    exchanged token or the caller's
//	                                                    Secret, on the caller's own
//	                                                    connection (credential.go)
//	forward, output,       b.forward                    forward.go: what adapter.describe
//	record the result                                   describes, sent, observed, run
//	                                                    through the output pipeline and
//	                                                    recorded, the same for every kind
//	answer                 post: responder.writeAnswer
//
// Lists (tools/list, resources/list, prompts/list) are decided per item:
// the caller sees what the engine lets it see (dispatch.go says which
// method is which).

// exchange is one request on its way through the pipeline.
type exchange struct {
	rq *request
	// method is tools/call, resources/read or prompts/get: the kind of
	// request the engine decides (a completion is decided as the prompt
	// or resource it completes).
	method string
	// target is the canonical name the decision is about and a sealed state
	// binds: mcp.<server>.<tool>, mcp://<server>/<uri> or
	// mcp.<server>.<prompt>.
	target string
	// args are a tool's or a prompt's arguments (none for a read): the
	// sealed state binds their digest, the question shows a preview.
	args json.RawMessage
	// digest is args' digest once argsDigest has computed it.
	digest *string
	// action names the request in the question, as the agent sees it:
	// "call mcp.fs.write (risk write)", "read the resource <uri>"; what
	// names it in a refusal: "call of mcp.fs.write".
	action, what string
	// inputResponses and requestState are the params of a 2026-07-28
	// retry.
	inputResponses map[string]json.RawMessage
	requestState   string
	// noAsk: the request cannot be asked about (a completion, a
	// subscription); where the policy says ask, it is denied.
	noAsk bool

	// Set by the stages.
	resumed        *requestState // resume: the retry's opened state
	parked         *parkedCall   // resume: the call a resumeParked retry continues
	res            policy.Result // decide
	blockInjection bool          // decide: withhold results the injection scan flags
	id             string        // settle (or resume): the toolCallId of the events
	outcome        outcome       // settle: the decision resolved (asked, where the policy asks)
	shown          outputShown   // forward: what the output pipeline did, as the output span shows it

	// tool is set by the tools adapter: the calls' metrics name it.
	tool *routes.Tool
	// server is the MCPServer the request goes to (a person asked through
	// a ToolApproval decides in its namespace); progressToken is the
	// agent's, told what a ToolApproval waits for.
	server        *routes.Server
	progressToken json.RawMessage
	// progressSent counts the progress notifications the bridge itself sent
	// for x while it waited (a wake, a person's decision): they carry 0 to
	// progressSent-1, and the server's own progress (from 0) is told
	// offset by progressSent, so the agent sees progress increase
	// throughout.
	progressSent atomic.Int64
	// credKind is the kind of credential x carries upstream, and conn the
	// caller's own connection it goes on where that is per caller (the
	// credential stage, credential.go).
	credKind upstreamcred.Kind
	conn     upstreamConn
	// resolvedAway: resolve found x.server away and kept no connection (a
	// read, prompt or completion); if the server is served again by the
	// time available runs, x is resolved again before it goes upstream.
	resolvedAway bool
	// subscription: x is a resource subscription, held by the server itself
	// on its own connection: it neither wakes a sleeping server nor waits
	// for one, and carries no caller's own credential.
	subscription bool
}

// nextProgress is the progress of the next notification the bridge itself
// sends for x: 0, 1, 2, ...
func (x *exchange) nextProgress() int64 { return x.progressSent.Add(1) - 1 }

// offsetProgress is a server's progress notification p as the agent is
// told it: progress (and total) raised by what the bridge sent before it.
func (x *exchange) offsetProgress(p []byte) []byte {
	sent := x.progressSent.Load()
	if sent == 0 {
		return p
	}
	for _, key := range []string{"progress", "total"} {
		if n, err := strconv.ParseFloat(string(rawjson.Get(p, key)), 64); err == nil {
			p = rawjson.Set(p, key, strconv.AppendFloat(nil, n+float64(sent), 'f', -1, 64))
		}
	}
	return p
}

// adapter is what differs between the kinds of request.
type adapter interface {
	// resolve decodes x's params and finds its target; an answer ends the
	// request (bad params, an unknown target). A target on a server that is
	// away resolves too (x.server is the server as status has it): the
	// available stage answers for it, or waits and calls resolve again once
	// the server is back.
	resolve(b *Bridge, x *exchange) *jsonrpc.Message
	// decide is the engine's decision about x; an answer ends the request
	// (a prompt's arguments that do not fit it).
	decide(b *Bridge, x *exchange) (policy.Result, *jsonrpc.Message)
	// describe describes the allowed request as it goes to its server, and
	// how its answer goes through the output pipeline and is recorded: the
	// forward stage sends it. An answer ends the request before anything
	// is recorded as started.
	describe(b *Bridge, x *exchange) (*upstreamCall, *jsonrpc.Message)
}

// serve takes a request that reaches a server through the pipeline. Each
// stage is called here and nowhere else; the spans of the stages that have
// one come from traced.
func (b *Bridge) serve(rq *request, a adapter) *jsonrpc.Message {
	x := &exchange{rq: rq}
	if answer := a.resolve(b, x); answer != nil {
		return answer
	}
	x.traceTarget()
	defer x.traceCallID()
	if answer := b.resume(x); answer != nil {
		return answer
	}
	if answer := b.traced(x, spanDecide, func() *jsonrpc.Message {
		res, answer := a.decide(b, x)
		if answer == nil {
			b.applyGrantsLimitsFloor(x, res)
		}
		return answer
	}); answer != nil {
		return answer
	}
	if answer := b.available(x, a); answer != nil {
		return spentIn(x, answer)
	}
	if answer := b.settle(x); answer != nil {
		return answer
	}
	if answer := b.traced(x, spanCredential, func() *jsonrpc.Message { return b.credential(x) }); answer != nil {
		return answer
	}
	b.touch(x)
	return b.forward(x, a)
}

// resume opens a retry's requestState (the only place one is opened) and
// takes up the request it continues: the same toolCallId, and for a parked
// call the call itself.
func (b *Bridge) resume(x *exchange) *jsonrpc.Message {
	if x.requestState == "" {
		return nil
	}
	st, err := b.openState(x, x.requestState)
	if err == nil && st.Kind == resumeParked {
		x.parked, err = b.unpark(st)
	}
	if err != nil {
		return err.answer(x.rq)
	}
	x.resumed, x.id = st, st.ToolCallID
	return nil
}

// applyGrantsLimitsFloor completes the engine's decision res with what the
// bridge adds to it: the session's grants, the policies' rate limits (tool
// calls only: every call that goes upstream, retries included, takes from
// them) and the injection floor.
func (b *Bridge) applyGrantsLimitsFloor(x *exchange, res policy.Result) {
	if x.rq.sess != nil {
		res = x.rq.sess.Grants.Apply(res)
	}
	if x.method == methodCall && b.cfg.Limiter != nil {
		res = b.cfg.Limiter.Apply(x.rq.id.Subject(), res)
	}
	x.res = res
	x.blockInjection = b.cfg.BlockInjection || res.BlockInjection
}

// settle asks where the decision is ask and records the decision before
// anything goes upstream. An answer ends the request: the question of a
// 2026-07-28 request, a refusal, or a record that could not be written.
func (b *Bridge) settle(x *exchange) *jsonrpc.Message {
	if st := x.resumed; st != nil && st.Kind != resumeApproval {
		// The retry of a call that went upstream allowed (and recorded):
		// it is not asked about again, but a policy that denies it now wins.
		if x.res.Decision == v1alpha1.DecisionDeny {
			return b.answerDenied(x, denial(x.res))
		}
		return nil
	}
	if x.resumed == nil {
		x.id = b.cfg.NewCallID()
		if _, err := b.audit(x.rq, x.permissionRequested(b.eventArgsDigest(x))); err != nil {
			return b.unrecorded(x, err)
		}
	}
	b.traced(x, spanAsk, func() *jsonrpc.Message {
		x.outcome = b.outcomeOf(x)
		return nil
	})
	o := x.outcome
	if o.pending != nil {
		return o.pending
	}
	if _, err := b.audit(x.rq, x.permissionResolved(o)); err != nil {
		return b.unrecorded(x, err)
	}
	if o.decision != v1alpha1.DecisionAllow {
		return b.answerDenied(x, o)
	}
	return nil
}

// answerDenied answers a denied request and ends its event chain; a parked call
// it would have continued is ended too (its server is told).
func (b *Bridge) answerDenied(x *exchange, o outcome) *jsonrpc.Message {
	ran := b.endParked(x, CodeDenied, "the call was denied meanwhile", o.reason)
	_, _ = b.audit(x.rq, x.failed(o.failReason, o.reason))
	b.countRequest(x, v1alpha1.DecisionDeny, o.failReason)
	x.traceFailure(o.failReason)
	if o.failReason == ReasonStopping {
		// Not a decision: nobody decided, and another replica may ask again.
		return rpcError(x.rq, CodeUpstream, fmt.Sprintf("%s not decided: %s", x.what, o.reason), o.retry.with(map[string]any{
			"reason": o.failReason, "toolCallId": x.id,
		}))
	}
	switch advice, hint := resumedAdvice(x, ran, o.retry); {
	case advice != "":
		o.reason += "; " + advice
		o.retry = hint
	case o.retry.retryable:
		o.reason += "; it was not run: " + o.retry.advice()
	}
	return rpcError(x.rq, CodeDenied, fmt.Sprintf("%s denied: %s", x.what, o.reason), o.retry.with(map[string]any{
		"reason": o.failReason, "sourcedFrom": o.sourcedFrom, "toolCallId": x.id,
	}))
}

// endParked ends the parked call x would have continued, if any, with
// code and why for its server, and says whether it ran (its server
// finished it with a result, before or after being told). It went
// upstream: its call ends there first, as any call does, detail saying why
// in its record.
func (b *Bridge) endParked(x *exchange, code int, why, detail string) (ran bool) {
	pc := x.parked
	if pc == nil {
		return false
	}
	end := pc.end(code, why)
	_, _ = b.audit(x.rq, audit.MCPCallFailed{Server: x.server.Name, ToolCallID: x.id, Error: why + ": " + detail, DurationMs: audit.Ms(b.now().Sub(pc.p.start))})
	return end.err == nil
}

// resumedAdvice is what a refusal of a resumed request says about sending
// it again, and the hint that goes with it ("" and hint as it is for a
// request that resumed nothing, or one that would be answered the same).
// The request's requestState is spent: only a request without it can be
// answered otherwise. A parked call reached its server and may have run
// (ran: it did).
func resumedAdvice(x *exchange, ran bool, hint retryHint) (string, retryHint) {
	switch {
	case x.parked != nil && ran:
		return "the call ran: its server finished it; " + spentAdvice, retryNever
	case x.parked != nil:
		return mayHaveRunAdvice, retryNever
	case x.resumed != nil && hint.retryable:
		return "it was not run: " + hint.advice() + " without requestState (the requestState is spent)", hint
	}
	return "", hint
}

// spentIn is answer, a refusal of request x, saying that x's requestState
// is spent where x resumed a question: sent again, x must go without it.
func spentIn(x *exchange, answer *jsonrpc.Message) *jsonrpc.Message {
	e := answer.Error
	if x.resumed == nil || e == nil {
		return answer
	}
	var data map[string]any
	if json.Unmarshal(e.Data, &data) != nil || data["retryable"] != true {
		return answer
	}
	return rpcError(x.rq, e.Code, e.Message+" (without requestState: the requestState is spent)", data)
}

// unrecorded refuses a request whose audit record could not be written:
// nothing may go upstream unrecorded.
func (b *Bridge) unrecorded(x *exchange, err error) *jsonrpc.Message {
	b.cfg.Log.Error(err, "audit event not recorded: the request is refused", "method", x.method, "target", x.target)
	b.countRequest(x, v1alpha1.DecisionDeny, reasonAudit)
	x.traceFailure(reasonAudit)
	return rpcError(x.rq, jsonrpc.CodeInternalError, "the "+x.noun()+" was not run: its audit record could not be written; "+retryAnytime.advice(), retryAnytime.with(map[string]any{"reason": reasonAudit}))
}

// countRequest counts how request x ended where x is a tool call (reads
// and prompts have no such metric).
func (b *Bridge) countRequest(x *exchange, decision v1alpha1.Decision, outcome string) {
	if x.tool != nil {
		b.countToolCall(x.tool, decision, outcome)
	}
}

// callFailed ends a request that failed upstream, whatever its kind:
// mcp.call.failed and tool.failed, and the agent's answer.
func (b *Bridge) callFailed(x *exchange, s *routes.Server, took time.Duration, err error) *jsonrpc.Message {
	reason := reasonUpstreamError
	red := b.redactor(s)
	// A failure may quote what the server sent (an HTTP error's body):
	// redacted with the server's values, callers' credentials among them,
	// before the audit stream gets it.
	failed := audit.MCPCallFailed{Server: s.Name, ToolCallID: x.id, Error: red.String(err.Error(), nil), DurationMs: audit.Ms(took)}
	var answer *jsonrpc.Message
	var rpcErr *jsonrpc.Error
	var ue *upstream.Error
	switch {
	case errors.As(err, &rpcErr):
		// The server's error is its output too: scanned and redacted with
		// its own Secret values, withheld where a result would be; the
		// agent gets it as cleaned here.
		msg, data, findings := serverError(red, rpcErr)
		if x.blockInjection && findings > 0 {
			msg, data = "the bridge withheld the server's error message: it looks like instructions to the model", nil
		}
		answer = jsonrpc.NewErrorResponse(x.rq.msg.ID, rpcErr.Code, msg)
		answer.Error.Data = data
		failed.Code = rpcErr.Code
		failed.Error = msg
	case errors.As(err, &ue):
		reason = ue.Reason
	}
	_, _ = b.audit(x.rq, failed)
	_, _ = b.audit(x.rq, x.failed(reason, failed.Error))
	b.countRequest(x, v1alpha1.DecisionAllow, reason)
	x.traceFailure(reason)
	switch {
	case answer != nil:
		return answer
	case errors.Is(err, upstream.ErrSubscribeUnsupported):
		return rpcError(x.rq, jsonrpc.CodeInvalidParams, fmt.Sprintf("server %q does not offer resource subscriptions", s.Name), nil)
	}
	return upstreamError(x.rq, err, x.id, red, x.method == methodCall)
}

// permissionRequested is x's permission.requested event; digest is
// Bridge.eventArgsDigest's.
func (x *exchange) permissionRequested(digest string) audit.PermissionRequested {
	ev := audit.PermissionRequested{Args: x.args, ArgsDigest: digest, RiskAtDecision: string(x.res.RiskAtDecision), SourcedFrom: x.source(), ToolCallID: x.id}
	ev.Tool, ev.Resource, ev.Prompt = x.names()
	return ev
}

// permissionResolved is x's permission.resolved event.
func (x *exchange) permissionResolved(o outcome) audit.PermissionResolved {
	ev := audit.PermissionResolved{Decision: string(o.decision), Actor: o.actor, SourcedFrom: o.sourcedFrom, ToolCallID: x.id, Reason: o.reason, Approver: o.approver}
	ev.Tool, ev.Resource, ev.Prompt = x.names()
	return ev
}

// failed is the tool.failed event that closes x's chain when it ends
// without a result: the same shape for a call, a read and a prompt.
func (x *exchange) failed(reason, message string) audit.ToolFailed {
	ev := audit.ToolFailed{Reason: reason, ToolCallID: x.id, Message: message}
	ev.Tool, ev.Resource, ev.Prompt = x.names()
	return ev
}

// names puts x's target in the event field of its kind.
func (x *exchange) names() (tool, resource, prompt string) {
	switch x.method {
	case methodRead:
		return "", x.target, ""
	case methodPrompt:
		return "", "", x.target
	}
	return x.target, "", ""
}

// source names the endpoint a request came in on, for permission.requested.
func (x *exchange) source() string {
	if x.rq.endpoint != "" {
		return "server:" + x.rq.endpoint
	}
	return "mcp"
}

// noun names the request in reasons: "the user denied the call".
func (x *exchange) noun() string {
	switch x.method {
	case methodRead:
		return "read"
	case methodPrompt:
		return "prompt"
	}
	return "call"
}

// Methods the engine decides.
const (
	methodCall   = "tools/call"
	methodRead   = "resources/read"
	methodPrompt = "prompts/get"
)

// retryParams are the params of a 2026-07-28 retry, whatever the method.
type retryParams struct {
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
	RequestState   string                     `json:"requestState"`
}

// readRetry fills x's retry params from its request's params.
func (x *exchange) readRetry() {
	var retry retryParams
	_ = json.Unmarshal(x.rq.msg.Params, &retry)
	x.inputResponses, x.requestState = retry.InputResponses, retry.RequestState
}
