package mcpbridge

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// Retry hints of CodeServerAway where status gives no time: a server
// expected back on its own is usually back within a second or two; one that
// cannot start (an image that cannot be pulled, a bad config) needs longer
// or someone's change.
const (
	retryExpected = time.Second
	retryStuck    = 10 * time.Second
	// wakeProgressEvery is how often an agent waiting for a wake is told.
	wakeProgressEvery = time.Second
)

// target is the server named name as a request reaches it: served, with its
// connection, or away (conn nil: the available stage answers or waits).
func (b *Bridge) target(name string) (*routes.Server, upstreamConn, bool) {
	if s, conn, ok := b.cfg.Registry.Server(name); ok {
		if conn == nil {
			// A nil *upstream.Conn in the interface would not compare
			// equal to nil: the stages test conn == nil for "away".
			return s, nil, true
		}
		return s, conn, true
	}
	if a, ok := b.cfg.Registry.Away(name); ok {
		return a.Server, nil, true
	}
	return nil, nil, false
}

// touch records activity on the server x goes to, once settle allowed it: a
// caller the policy refuses keeps no server awake.
func (b *Bridge) touch(x *exchange) {
	if s := x.server; s != nil {
		b.touchServed(s.Name)
	}
}

// touchServed records activity on the server named name if it is served
// (a request for one away goes through the available stage instead).
func (b *Bridge) touchServed(name string) {
	if s, _, served := b.cfg.Registry.Server(name); served {
		b.cfg.Activity.Touch(s.Namespace, s.Name)
	}
}

// available is the stage between decide and settle that every request for a
// server goes through: for one
// that is away the agent is told why (never "unknown tool"), and for one
// asleep the request wakes it, waits (with progress notifications) and is
// resolved again against the server that came back, its live catalog and
// new connection. A denied request neither waits nor wakes: settle refuses
// it.
func (b *Bridge) available(x *exchange, a adapter) *jsonrpc.Message {
	s := x.server
	if s == nil {
		return nil
	}
	if _, _, served := b.cfg.Registry.Server(s.Name); served {
		if x.resolvedAway {
			// Resolved while away, served now: take its connection.
			return b.resolveAgain(x, a)
		}
		return nil
	}
	away, ok := b.cfg.Registry.Away(s.Name)
	if x.subscription {
		return b.unavailableToHold(x, away, ok)
	}
	if !ok || x.res.Decision == v1alpha1.DecisionDeny {
		return nil
	}
	if x.parked != nil {
		// The parked call is held on the connection to the server as it
		// was: it cannot go on once that server is away, nor once woken.
		return b.refuseAwayParked(x, away)
	}
	if !away.Asleep() || b.cfg.Activity == nil {
		return b.refuseAway(x.rq, away)
	}
	decided := x.tool
	if answer := b.wake(x, away); answer != nil {
		return answer
	}
	if answer := b.resolveAgain(x, a); answer != nil {
		return answer
	}
	return b.sameToolAsDecided(x, decided)
}

// unavailableToHold answers a subscription of x, whose server is not
// served: a subscription is held by the server itself, so one away cannot
// take it now (and an open subscription does not wake it). Only a caller
// the policy allows learns why: any other is refused by settle, as if the
// server were serving.
func (b *Bridge) unavailableToHold(x *exchange, away *routes.Away, isAway bool) *jsonrpc.Message {
	switch {
	case x.res.Decision != v1alpha1.DecisionAllow:
		return nil
	case isAway:
		return b.refuseAway(x.rq, away)
	}
	return upstreamError(x.rq, &upstream.Error{Reason: upstream.ReasonUnavailable, Err: fmt.Errorf("server %s is not serving now", x.server.Name)}, "", nil, false)
}

// reasonToolChanged: the tool a call was decided on changed while its
// server woke.
const reasonToolChanged = "tool_changed"

// sameToolAsDecided refuses a call whose tool the woken server publishes
// with another risk or other annotations than the catalog the call was
// decided on: the policy may decide it otherwise. Deciding again here
// would charge the caller's rate limits a second time; the call is refused
// before anything is recorded, retryable, and decided afresh when sent
// again.
func (b *Bridge) sameToolAsDecided(x *exchange, decided *routes.Tool) *jsonrpc.Message {
	t := x.tool
	if decided == nil || t == nil || t.Risk == decided.Risk && reflect.DeepEqual(t.Annotations, decided.Annotations) {
		return nil
	}
	msg := fmt.Sprintf("tool %s changed while server %s woke (risk %s, now %s; or its annotations): it was not called; send the call again to have it decided on the new catalog",
		t.Name, t.Server.Name, decided.Risk, t.Risk)
	return rpcError(x.rq, CodeUpstream, msg, retryAnytime.with(map[string]any{"reason": reasonToolChanged}))
}

// resolveAgain resolves x against its server now served (its live catalog
// and connection). A server away again by then is answered as away: x
// never goes on without a connection.
func (b *Bridge) resolveAgain(x *exchange, a adapter) *jsonrpc.Message {
	if answer := a.resolve(b, x); answer != nil || !x.resolvedAway {
		return answer
	}
	if away, ok := b.cfg.Registry.Away(x.server.Name); ok {
		return b.refuseAway(x.rq, away)
	}
	return upstreamError(x.rq, &upstream.Error{Reason: upstream.ReasonUnavailable, Err: fmt.Errorf("server %s is not serving now", x.server.Name)}, "", nil, false)
}

// wake asks for a sleeping server and waits until it is served, fails to
// wake, or the call's deadline passes; nil when it is served.
func (b *Bridge) wake(x *exchange, away *routes.Away) *jsonrpc.Message {
	// A stopping replica ends the wait at the start of its drain (the
	// request is answered bridge_stopping, to be sent again), rather than
	// holding it until the drain's end cuts it off as cancelled.
	waits, endWait := b.untilWaitsEnd(x.rq.ctx)
	defer endWait()
	ctx, cancel := b.contextWithCallTimeout(waits)
	defer cancel()
	name, start := away.Server.Name, b.now()
	tick := time.NewTicker(wakeProgressEvery)
	defer tick.Stop()
	p := &wakeProgress{b: b, x: x}
	for {
		changed := b.cfg.Registry.Changed()
		if _, _, ok := b.cfg.Registry.Server(name); ok {
			b.observeWake("woken", start)
			return nil
		}
		now, ok := b.cfg.Registry.Away(name)
		if !ok {
			if down, ok := b.cfg.Registry.Down(name); ok {
				// The wake failed in a way that withdrew the catalog
				// (PermanentlyFailed, CatalogNotApproved): say so.
				b.observeWake("failed", start)
				return b.refuseAway(x.rq, down)
			}
			b.observeWake("gone", start)
			return upstreamError(x.rq, &upstream.Error{Reason: upstream.ReasonUnavailable, Err: fmt.Errorf("server %s left the bridge's scope while it was woken", name)}, "", nil, false)
		}
		away = now
		if !stillWaking(away) {
			b.observeWake("failed", start)
			return b.refuseAway(x.rq, away)
		}
		if away.Reason == v1alpha1.ReasonSleeping {
			if err := b.cfg.Activity.Wake(ctx, away.Server.Namespace, name, away.Since); err != nil && ctx.Err() == nil {
				// The API's error names objects of the cluster: it is
				// logged here, and the agent told only what failed.
				b.cfg.Log.Info("a sleeping server could not be woken", "server", away.Server.Key(), "error", err.Error())
				b.observeWake("failed", start)
				return b.awayError(x.rq, away, "the bridge could not ask for the server to wake")
			}
		}
		p.tell(away)
		// Told at the top of the loop: at each change and each tick.
		select {
		case <-changed:
		case <-tick.C:
		case <-ctx.Done():
			if cause := context.Cause(waits); Stopping(cause) {
				b.observeWake("stopping", start)
				return upstreamError(x.rq, cause, "", nil, false)
			}
			b.observeWake("timeout", start)
			if x.rq.ctx.Err() != nil {
				return upstreamError(x.rq, &upstream.Error{Reason: upstream.ReasonCancelled, Err: context.Cause(x.rq.ctx)}, "", nil, false)
			}
			return b.awayError(x.rq, away, fmt.Sprintf("it did not wake within the call's deadline (%s)", b.cfg.CallTimeout))
		}
	}
}

// stillWaking: the reasons a server goes through between asleep and
// serving; any other means the wake failed.
func stillWaking(a *routes.Away) bool {
	return a.Asleep() || a.Reason == v1alpha1.ReasonStarting
}

// wakeProgress tells an agent that gave a progressToken how its server's
// wake goes: at once, at each change of reason, and every second.
type wakeProgress struct {
	b    *Bridge
	x    *exchange
	sent int
	// last is the reason last told and when: a table change for another
	// server tells nothing new.
	last   string
	lastAt time.Time
}

func (p *wakeProgress) tell(a *routes.Away) {
	rq := p.x.rq
	if p.x.progressToken == nil || !rq.out.canStream {
		return
	}
	now := p.b.now()
	if p.sent > 0 && a.Reason == p.last && now.Sub(p.lastAt) < wakeProgressEvery/2 {
		return
	}
	p.sent, p.last, p.lastAt = p.sent+1, a.Reason, now
	msg := fmt.Sprintf("server %s is %s; the call goes on when it is ready", a.Server.Name, a.Reason)
	params := []byte(`{"progress":`)
	params = fmt.Appendf(params, "%d", p.x.nextProgress())
	params = append(params, `,"message":`...)
	params = rawjson.AppendString(params, msg)
	params = append(params, '}')
	rq.out.send(jsonrpc.NewNotification("notifications/progress", rawjson.Set(params, "progressToken", p.x.progressToken)))
}

// refuseAway answers a request for a server that is away now.
func (b *Bridge) refuseAway(rq *request, a *routes.Away) *jsonrpc.Message {
	return b.awayError(rq, a, "")
}

// awayError is the CodeServerAway answer: the server's Ready reason and
// message, whether to retry and when (status.restarts.nextRestartTime where
// a restart is scheduled). why, when set, says what the bridge tried.
func (b *Bridge) awayError(rq *request, a *routes.Away, why string) *jsonrpc.Message {
	msg, hint, data := b.awayRefusal(a, why)
	if hint.retryable {
		msg += fmt.Sprintf("; retry in %s", hint.after.Round(time.Millisecond))
	} else {
		msg += "; it will not come back until its spec changes or it is restarted by hand"
	}
	return rpcError(rq, CodeServerAway, msg, hint.with(data))
}

// refuseAwayParked refuses the resume of a parked call whose server is
// away, and ends the call, as answerDenied does a parked call denied
// meanwhile: its state is spent, and the call reached its server and may
// have run.
func (b *Bridge) refuseAwayParked(x *exchange, a *routes.Away) *jsonrpc.Message {
	msg, hint, data := b.awayRefusal(a, "")
	ran := b.endParked(x, CodeServerAway, "the call's server is not serving now", msg)
	// The audit's reason is one of its own codes; the message has the
	// server's Ready reason.
	_, _ = b.audit(x.rq, x.failed(upstream.ReasonUnavailable, msg))
	advice, hint := resumedAdvice(x, ran, hint)
	return rpcError(x.rq, CodeServerAway, msg+"; "+advice, hint.with(data))
}

// awayRefusal is what the CodeServerAway answer says of server a away,
// before what it says about sending the request again: its message, hint
// and data.
func (b *Bridge) awayRefusal(a *routes.Away, why string) (string, retryHint, map[string]any) {
	name := a.Server.Name
	if b.cfg.Metrics != nil {
		b.cfg.Metrics.AwayRefusals.WithLabelValues(name, a.Reason).Inc()
	}
	msg := fmt.Sprintf("server %s is not serving now (%s)", name, a.Reason)
	if a.Message != "" {
		msg += ": " + b.redactor(a.Server).String(a.Message, nil)
	}
	if why != "" {
		msg += "; " + why
	}
	data := map[string]any{"reason": a.Reason, "server": name}
	if a.Message != "" {
		data["message"] = b.redactor(a.Server).String(a.Message, nil)
	}
	hint := retryNever
	if a.Retryable() {
		after := retryStuck
		switch {
		case !a.RetryAt.IsZero():
			after = max(a.RetryAt.Sub(b.now()), 0)
		case a.Expected():
			after = retryExpected
		}
		hint = retryIn(after)
	}
	return msg, hint, data
}

// observeWake records how long a request waited for a wake and how it
// ended (woken, failed, timeout, gone, stopping).
func (b *Bridge) observeWake(outcome string, start time.Time) {
	if b.cfg.Metrics != nil {
		b.cfg.Metrics.WakeWaits.WithLabelValues(outcome).Observe(b.now().Sub(start).Seconds())
	}
}
