package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
)

// The forward stage, the last of the pipeline (pipeline.go): every request
// that reaches a server goes upstream here, whatever its kind. The adapter
// describes the request (upstreamCall); forward records its start, sends
// it within the call's deadline and in its CLIENT span, observes how the
// server answered, runs the answer through the output pipeline, records
// the result and answers. What a kind of request does besides is a
// strategy it plugs in: a tool call's hooks and input_required rounds
// (send), a 2026-07-28 agent's call that may park (park), the retry that
// continues a parked call (continued).

// upstreamCall is one request an adapter sends upstream, as the forward
// stage needs it.
type upstreamCall struct {
	// method is the upstream method, which the metrics and the CLIENT span
	// name; name, when set, is the tool or prompt it is about, upstream's
	// name for it ("tools/call read_file").
	method, name string
	// conn is the connection it goes on: the caller's own where the
	// credential stage chose one. nil: the server left the bridge's scope
	// after the request was decided.
	conn   upstreamConn
	params json.RawMessage
	// started is recorded before anything goes upstream: a request whose
	// record cannot be written is refused. begun, when set, follows it (a
	// tool call's tool.started).
	started, begun audit.Payload

	// send sends the request and waits for the server's answer; nil sends
	// it once (CallFor). An answer it returns ends the request as it is (a
	// question of the server's for the agent).
	send func(ctx context.Context) (json.RawMessage, *jsonrpc.Message, error)
	// park, when set, runs the request detached from the agent's request,
	// which it may outlive (a 2026-07-28 agent's tool call waiting, parked,
	// for its agent's answer: parked.go). It gets the call's context,
	// sent (to end its span with the call's error) and stop (to release
	// its deadline), and answers through answered.
	park func(ctx context.Context, sent func(error), stop context.CancelFunc) *jsonrpc.Message
	// continued, when set, continues a call already upstream, started and
	// recorded by an earlier request (a parked call's retry).
	continued func() *jsonrpc.Message

	// check, when set, refuses the server's answer before the output
	// pipeline sees it (a skill file that does not match its digest).
	check func(raw json.RawMessage) *jsonrpc.Message
	// recordAnswer: mcp.call.completed is recorded as soon as the server
	// answers, before the output pipeline (a tool call's chain).
	recordAnswer bool
	// output runs the server's answer through the output pipeline: what
	// the agent gets, and what the pipeline did to it.
	output func(raw json.RawMessage) (json.RawMessage, output.Summary, error)
	// plain: output only cleans the answer as JSON (a completion, a
	// subscription): it has no span of its own and counts nothing.
	plain bool
	// closing is the record that ends the request's chain (nil: none),
	// given the answer, what output did and its error; failure is the
	// outcome the request ends with where it is not "ok" (a tool's
	// "tool_error").
	closing func(raw json.RawMessage, sum output.Summary, took time.Duration, err error) (rec audit.Payload, failure string)
	// what names the request's answer where output withheld it:
	// "resource <uri>".
	what string
}

// forward is the forward stage for x: a's description of the request,
// sent and answered.
func (b *Bridge) forward(x *exchange, a adapter) *jsonrpc.Message {
	up, answer := a.describe(b, x)
	if answer != nil {
		return answer
	}
	if up.continued != nil {
		return up.continued()
	}
	rq := x.rq
	if _, err := b.audit(rq, up.started); err != nil {
		return b.unrecorded(x, err)
	}
	if up.begun != nil {
		_, _ = b.audit(rq, up.begun)
	}
	if up.conn == nil {
		return b.callFailed(x, x.server, 0, &notSentError{&upstream.Error{Reason: upstream.ReasonUnavailable, Err: errors.New("the server left the bridge's scope")}})
	}
	base := rq.ctx
	if up.park != nil {
		// A call that may park outlives the agent's request that started
		// it: its deadline is its own.
		base = context.WithoutCancel(rq.ctx)
	}
	ctx, sent, stop := b.sendContext(base, x, up)
	if up.park != nil {
		return up.park(ctx, sent, stop)
	}
	defer stop()
	start := b.now()
	send := up.send
	if send == nil {
		send = func(ctx context.Context) (json.RawMessage, *jsonrpc.Message, error) {
			raw, err := up.conn.CallFor(ctx, rq.upstreamAgent(), up.method, up.params)
			return raw, nil, err
		}
	}
	raw, answer, err := send(ctx)
	sent(err)
	if answer != nil {
		if err != nil {
			// Answered by the strategy itself, but a failed call all the
			// same (a skill refused): observed as a failed call is.
			b.observe(x.server.Name, up.method, b.now().Sub(start), err)
		}
		return answer
	}
	return b.answered(x, up, raw, err, start)
}

// sendContext is the context up goes upstream in: base with the call's
// deadline and up's CLIENT span, which the context carries to the server.
// sent ends the span with the call's error, stop releases the deadline.
func (b *Bridge) sendContext(base context.Context, x *exchange, up *upstreamCall) (ctx context.Context, sent func(error), stop context.CancelFunc) {
	ctx, stop = b.contextWithCallTimeout(base)
	ctx, span := b.forwardSpan(ctx, x, up.method, up.name)
	return ctx, func(err error) { endForward(span, err) }, stop
}

// answered ends x, sent upstream as up described since start, with the
// server's answer raw or the error it failed with: it observes the call,
// runs the answer through the output pipeline and records the result, and
// answers the agent. A parked call's strategy ends here too, whenever the
// call ends.
func (b *Bridge) answered(x *exchange, up *upstreamCall, raw json.RawMessage, err error, start time.Time) *jsonrpc.Message {
	rq, s := x.rq, x.server
	took := b.now().Sub(start)
	b.observe(s.Name, up.method, took, err)
	if err != nil {
		return b.callFailed(x, s, took, err)
	}
	if up.check != nil {
		if answer := up.check(raw); answer != nil {
			return answer
		}
	}
	if up.recordAnswer {
		_, _ = b.audit(rq, audit.MCPCallCompleted{Server: s.Name, ToolCallID: x.id, DurationMs: audit.Ms(took)})
	}
	var out json.RawMessage
	var sum output.Summary
	if up.plain {
		out, sum, err = up.output(raw)
	} else {
		b.traced(x, spanOutput, func() *jsonrpc.Message {
			out, sum, err = up.output(raw)
			x.shown = shownOf(sum)
			return nil
		})
		b.countOutput(s.Name, sum)
	}
	failure := ""
	if up.closing != nil {
		var rec audit.Payload
		if rec, failure = up.closing(raw, sum, took, err); rec != nil {
			_, _ = b.audit(rq, rec)
		}
	}
	if err != nil {
		return b.withheld(x, up.what, err)
	}
	outcome := "ok"
	if failure != "" {
		outcome = failure
		x.traceFailure(failure)
	}
	b.countRequest(x, v1alpha1.DecisionAllow, outcome)
	return rpcResult(rq, out)
}

// withheld ends a request whose answer the output pipeline did not pass
// on (blocked for injection, or malformed), with the closing event every
// such end has.
func (b *Bridge) withheld(x *exchange, what string, err error) *jsonrpc.Message {
	code, reason := CodeUpstream, reasonInvalidResult
	msg := err.Error()
	switch {
	case errors.Is(err, output.ErrBlocked):
		code, reason, msg = CodeDenied, reasonInjection, what+": "+err.Error()
	case x.tool != nil:
		// A tool call ran on its server (a read or a prompt is answered the
		// same when sent again): the agent is told so, and the call ends
		// failed as every call that ends without a result does.
		msg = "the server's result could not be passed on (the call ran there): " + msg
		x.traceFailure(reason)
	}
	_, _ = b.audit(x.rq, x.failed(reason, err.Error()))
	b.countRequest(x, v1alpha1.DecisionAllow, reason)
	data := map[string]any{"reason": reason}
	if code == CodeUpstream {
		data["retryable"] = false // the server answered: sent again, it answers the same
	}
	if x.id != "" { // an artifact's read has none: it is not decided
		data["toolCallId"] = x.id
	}
	return rpcError(x.rq, code, msg, data)
}

// observe records a call upstream in the metrics: how long it took, and
// whether its server is up (a call the caller cancelled, or one the bridge
// held back as busy, says nothing of that).
func (b *Bridge) observe(server, method string, took time.Duration, err error) {
	m := b.cfg.Metrics
	if m == nil {
		return
	}
	m.CallDuration.WithLabelValues(server, method).Observe(took.Seconds())
	var ue *upstream.Error
	if errors.As(err, &ue) && ue.Reason != upstream.ReasonCancelled && ue.Reason != upstream.ReasonBusy {
		m.UpstreamUp.WithLabelValues(server).Set(0)
	} else {
		m.UpstreamUp.WithLabelValues(server).Set(1)
	}
}

// countOutput counts what the output pipeline did to a result of server
// in the metrics.
func (b *Bridge) countOutput(server string, sum output.Summary) {
	if m := b.cfg.Metrics; m != nil {
		if n := sum.Redactions.Total(); n > 0 {
			m.Redactions.WithLabelValues(server).Add(float64(n))
		}
		if n := len(sum.Findings); n > 0 {
			m.InjectionFindings.WithLabelValues(server).Add(float64(n))
		}
	}
}
