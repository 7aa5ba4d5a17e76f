package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
)

// A session-era server asks its client something in the middle of a call
// (elicitation/create on the call's stream) and waits for the answer. A
// 2026-07-28 agent can't take such a request: it is asked with an
// input_required result, and answers by calling again. So the bridge runs
// a 2026-07-28 agent's call detached from the agent's request; when the
// server asks, the call is parked on this replica, the agent gets
// input_required with a sealed state naming the parked call, and its retry
// hands the answer to the waiting server and waits for what comes next.
// The retry must reach this replica (the Service's session affinity sends
// one client to one replica); elsewhere it is refused and the agent calls
// again. A parked call nobody resumes ends at its deadline.

// parkedInputKey names the server's request in the agent's inputRequests.
const parkedInputKey = "server"

// parkable is a 2026-07-28 agent's call running upstream.
type parkable struct {
	ctx    context.Context         // the call's own: its deadline, not the agent's request
	cancel context.CancelCauseFunc // with why the bridge ends it
	start  time.Time
	asks   chan serverAsk   // the server's requests, from the relay hook
	done   chan parkableEnd // the server's answer to the call
	ended  chan struct{}    // closed once done holds it
}

// serverAsk is a server's request waiting for the agent's answer.
type serverAsk struct {
	method string
	params json.RawMessage // cleaned for the agent
	reply  chan *jsonrpc.Message
}

type parkableEnd struct {
	res json.RawMessage
	err error
}

// startParkable starts c upstream in call, the context the forward stage
// gave it (its own deadline, detached from the agent's request, which ends
// when the call parks); sent ends its span, stopTimer its deadline. await
// cancels it when the agent waiting for it gives up.
func (b *Bridge) startParkable(call context.Context, c *call, sent func(error), stopTimer context.CancelFunc, conn upstreamConn, params json.RawMessage, hooks upstream.CallHooks) *parkable {
	ctx, end := context.WithCancelCause(call)
	cancel := func(cause error) {
		end(cause)
		stopTimer()
	}
	p := &parkable{ctx: ctx, cancel: cancel, start: b.now(), asks: make(chan serverAsk), done: make(chan parkableEnd, 1), ended: make(chan struct{})}
	c.parkable = p
	go func() {
		res, err := conn.CallTool(ctx, params, hooks)
		sent(err)
		p.done <- parkableEnd{res, err}
		close(p.ended)
	}()
	return p
}

// await waits, for c's agent, until p ends or its server asks something.
func (b *Bridge) await(c *call, p *parkable) *jsonrpc.Message {
	rq := c.rq
	select {
	case end := <-p.done:
		p.cancel(nil) // it ended upstream: nothing is left to tell
		if end.err == nil && isInputRequired(end.res) {
			// A 2026-07-28 server's own question goes to the agent as it is
			// (inputrequired.go).
			_, answer := b.answerInputRequests(p.ctx, c, nil, end.res)
			if answer.Error == nil {
				_, _ = b.audit(rq, audit.MCPCallCompleted{Server: c.tool.Server.Name, ToolCallID: c.id, DurationMs: audit.Ms(b.now().Sub(p.start))})
			}
			return answer
		}
		return b.answered(c.exchange, c.up, end.res, end.err, p.start)
	case ask := <-p.asks:
		return b.park(c, p, ask)
	case <-rq.ctx.Done():
		p.cancel(context.Cause(rq.ctx))
		end := <-p.done
		return b.answered(c.exchange, c.up, end.res, end.err, p.start)
	}
}

// park keeps p on this replica and answers the agent with the server's
// request as input_required.
func (b *Bridge) park(c *call, p *parkable, ask serverAsk) *jsonrpc.Message {
	rq := c.rq
	id := b.cfg.NewCallID()
	deadline, _ := p.ctx.Deadline()
	st := newState(resumeParked, c.exchange, deadline)
	st.Parked = id
	answer, err := b.inputRequired(rq, st, map[string]inputRequest{parkedInputKey: {Method: ask.method, Params: ask.params}})
	if err != nil {
		ask.reply <- jsonrpc.NewErrorResponse(nil, jsonrpc.CodeInternalError, err.Error())
		return b.await(c, p)
	}
	subject := rq.id.Username
	// A parked call holds an upstream call open, though its agent's
	// request has been answered: it counts against the same bounds.
	if !b.limits.parked.Take(subject, 1) {
		ask.reply <- jsonrpc.NewErrorResponse(nil, jsonrpc.CodeInternalError, "too many calls of this caller wait for their agent's answer on this replica")
		return b.await(c, p)
	}
	b.parked.Store(id, &parkedCall{p: p, ask: ask, subject: subject})
	if b.stop.waits.Err() != nil {
		// The replica's waits ended (endWaits) before this call parked:
		// no agent's answer reaches it here any more. endWaits cancels
		// before it looks at the parked calls, and this looks after the
		// Store, so one of the two ends it.
		p.cancel(errStopping)
	}
	go b.leaveUnresumed(c, p, id)
	return answer
}

// leaveUnresumed takes parked call id off the replica if its agent has not
// resumed it by the time it ends: at its deadline, or when the call ends
// upstream first (the server gave up, its connection died), rather than
// hold its slot to the deadline and be called a timeout. At the deadline
// it ends as a timeout, whatever the server sends after it (it may answer
// the refused question in the moment before its connection closes). Its
// end goes to the audit stream only: its agent's request was answered.
func (b *Bridge) leaveUnresumed(c *call, p *parkable, id string) {
	select {
	case <-p.ended:
	case <-p.ctx.Done():
	}
	pc := b.takeParked(id)
	if pc == nil {
		return // its agent resumed it (unpark)
	}
	why := "the call ended before the agent answered"
	cause := context.Cause(p.ctx)
	stopping, timedOut := Stopping(cause), p.ctx.Err() != nil
	switch {
	case stopping:
		why = cause.Error()
	case timedOut:
		why = "the agent did not answer before the call's deadline"
	}
	end := pc.end(jsonrpc.CodeInternalError, why)
	if !stopping && !timedOut && end.err == nil {
		// The server finished the call on its own: it ran.
		deadline, _ := p.ctx.Deadline()
		b.rememberRan(id, deadline)
	}
	switch {
	case stopping:
		end = parkableEnd{err: cause}
	case timedOut:
		end = parkableEnd{err: &upstream.Error{Reason: upstream.ReasonTimeout, Err: errors.New(why)}}
	}
	b.answered(c.exchange, c.up, end.res, end.err, p.start)
}

// parkedCall is a call waiting on this replica for its agent's answer.
type parkedCall struct {
	p       *parkable
	ask     serverAsk
	subject string
}

// takeParked takes parked call id off this replica and gives back its
// slot; nil when this replica does not hold it (any more).
func (b *Bridge) takeParked(id string) *parkedCall {
	v, held := b.parked.LoadAndDelete(id)
	if !held {
		return nil
	}
	pc := v.(*parkedCall)
	b.limits.parked.Give(pc.subject, 1)
	return pc
}

// end ends a parked call that will not be continued: the server waiting
// for the agent's answer gets an error saying why, the call upstream is
// cancelled (saying why too), and how it ended there is returned.
func (pc *parkedCall) end(code int, why string) parkableEnd {
	pc.ask.reply <- jsonrpc.NewErrorResponse(nil, code, why)
	pc.p.cancel(errors.New(why))
	return <-pc.p.done
}

// unpark takes the call a resumeParked state names off this replica.
func (b *Bridge) unpark(st *requestState) (*parkedCall, *invalidStateError) {
	pc := b.takeParked(st.Parked)
	if pc == nil {
		// The state is spent now (openState): no replica continues that
		// call with it, and one that holds it ends it at its deadline.
		// The call reached its server, which may have gone on without the
		// answer (finished on its own, or carried on after being told no
		// answer comes): it is not safe to send again.
		if _, ran := b.parkedRan.Load(st.Parked); ran {
			return nil, &invalidStateError{reason: reasonParkedGone, retry: retryNever,
				msg: "invalid requestState: the call it continues ran: its server finished it before this answer came; " + spentAdvice}
		}
		return nil, &invalidStateError{reason: reasonParkedGone, retry: retryNever,
			msg: "invalid requestState: the call it continues is not held by this replica (its replica stopped, it ended, or another replica holds it, where it now ends at its deadline); " + mayHaveRunAdvice}
	}
	return pc, nil
}

// Advice for a parked call that will not be continued: its state is
// spent, and the call reached its server.
const (
	// spentAdvice: a new call runs it again.
	spentAdvice = "the requestState is spent: call again without requestState only if running it twice does no harm"
	// mayHaveRunAdvice: it reached its server and may have run there.
	mayHaveRunAdvice = "it reached its server and may have run there; " + spentAdvice
)

// rememberRan records that parked call id ended upstream with a result
// before its agent resumed it, until its deadline, when its state expires.
func (b *Bridge) rememberRan(id string, deadline time.Time) {
	b.parkedRan.Store(id, struct{}{})
	time.AfterFunc(time.Until(deadline), func() { b.parkedRan.Delete(id) })
}

// continueParked hands the agent's answer to the server waiting for it and
// waits for what the call does next, for this retry's agent request. (A
// policy that denies the call by then has ended it: answerDenied.)
func (b *Bridge) continueParked(c *call, pc *parkedCall) *jsonrpc.Message {
	p := pc.p
	c.parkable = p
	if answer, ok := c.inputResponses[parkedInputKey]; ok {
		pc.ask.reply <- jsonrpc.NewResult(nil, answer)
	} else {
		pc.ask.reply <- jsonrpc.NewErrorResponse(nil, jsonrpc.CodeInvalidParams, "the agent's retry carried no answer under inputResponses."+parkedInputKey)
	}
	return b.await(c, p)
}

// relayParked is relay's way to a 2026-07-28 agent: the server's request
// goes to the call's agent through await and comes back with its retry.
// Any failure, the bridge's or the agent's retry's, is relayTimeout with
// an internal error for the server.
func relayParked(ctx context.Context, p *parkable, method string, params json.RawMessage) (json.RawMessage, *relayFailure) {
	m, err := waitParked(ctx, p, method, params)
	if err == nil && m.Error != nil {
		err = errors.New(m.Error.Message)
	}
	if err != nil {
		return nil, &relayFailure{relayTimeout, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}}
	}
	return m.Result, nil
}

// waitParked hands the server's request to await and waits for what the
// agent's retry (or the bridge ending the call) answers.
func waitParked(ctx context.Context, p *parkable, method string, params json.RawMessage) (*jsonrpc.Message, error) {
	ask := serverAsk{method: method, params: params, reply: make(chan *jsonrpc.Message, 1)}
	select {
	case p.asks <- ask:
	case <-ctx.Done():
		return nil, fmt.Errorf("the call ended before the agent could be asked: %w", context.Cause(ctx))
	}
	select {
	case m := <-ask.reply:
		return m, nil
	case <-ctx.Done():
		// The bridge ending a parked call (parkedCall.end) gives its
		// decision before it cancels the call: when both are there, the
		// decision is what the server's request ended with, in every run
		// (select alone picks either).
		select {
		case m := <-ask.reply:
			return m, nil
		default:
		}
		return nil, fmt.Errorf("the call ended before the agent answered: %w", context.Cause(ctx))
	}
}
