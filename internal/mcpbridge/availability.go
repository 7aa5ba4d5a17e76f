package mcpbridge

import (
	"context"
	"fmt"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// CodeServerAway answers a request for a server that is not serving now
// (restarting, starting, asleep and not woken in time, failed): its data
// says the server's Ready reason and whether and when to retry.
const CodeServerAway = -32012

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
func (b *Bridge) target(name string) (*routes.Server, *upstream.Conn, bool) {
	if s, conn, ok := b.cfg.Registry.Server(name); ok {
		return s, conn, true
	}
	if a, ok := b.cfg.Registry.Away(name); ok {
		return a.Server, nil, true
	}
	return nil, nil, false
}

// available is the stage between decide and settle that every request for a
// server goes through: a served server's activity is recorded; for one
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
		b.cfg.Activity.Touch(s.Namespace, s.Name)
		return nil
	}
	away, ok := b.cfg.Registry.Away(s.Name)
	if !ok || x.res.Decision == v1alpha1.DecisionDeny {
		return nil
	}
	if !away.Asleep() || b.cfg.Activity == nil {
		return b.refuseAway(x.rq, away)
	}
	if answer := b.wake(x, away); answer != nil {
		return answer
	}
	return a.resolve(b, x)
}

// wake asks for a sleeping server and waits until it is served, fails to
// wake, or the call's deadline passes; nil when it is served.
func (b *Bridge) wake(x *exchange, away *routes.Away) *jsonrpc.Message {
	ctx, cancel := b.contextWithCallTimeout(x.rq.ctx)
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
		if down, isDown := b.cfg.Registry.Down(name); !ok && isDown && down.Server.Namespace == away.Server.Namespace {
			// The wake failed and took the catalog with it: say why.
			b.observeWake("failed", start)
			return b.refuseAway(x.rq, down)
		}
		if !ok {
			b.observeWake("gone", start)
			return upstreamError(x.rq, &upstream.Error{Reason: upstream.ReasonUnavailable, Err: fmt.Errorf("server %s left the bridge's scope while it was woken", name)}, "", nil)
		}
		away = now
		if !stillWaking(away) {
			b.observeWake("failed", start)
			return b.refuseAway(x.rq, away)
		}
		if away.Reason == routes.ReasonSleeping {
			if err := b.cfg.Activity.Wake(ctx, away.Server.Namespace, name, away.Since); err != nil && ctx.Err() == nil {
				b.cfg.Log.Info("a sleeping server could not be woken", "server", away.Server.Key(), "error", err.Error())
				b.observeWake("failed", start)
				return b.awayError(x.rq, away, "it could not be woken: "+err.Error())
			}
		}
		p.tell(away)
		select {
		case <-changed:
		case <-tick.C:
			p.tell(away)
		case <-ctx.Done():
			b.observeWake("timeout", start)
			if x.rq.ctx.Err() != nil {
				return upstreamError(x.rq, &upstream.Error{Reason: upstream.ReasonCancelled, Err: context.Cause(x.rq.ctx)}, "", nil)
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
}

func (p *wakeProgress) tell(a *routes.Away) {
	rq := p.x.rq
	if p.x.progressToken == nil || !rq.out.canStream {
		return
	}
	p.sent++
	msg := fmt.Sprintf("server %s is %s; the call goes on when it is ready", a.Server.Name, a.Reason)
	params := []byte(`{"progress":`)
	params = fmt.Appendf(params, "%d", p.sent)
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
	data := map[string]any{"reason": a.Reason, "server": name, "retryable": a.Retryable()}
	if a.Message != "" {
		data["message"] = b.redactor(a.Server).String(a.Message, nil)
	}
	if a.Retryable() {
		after := retryStuck
		switch {
		case !a.RetryAt.IsZero():
			after = max(a.RetryAt.Sub(b.now()), 0)
		case a.Expected():
			after = retryExpected
		}
		data["retryAfterMs"] = after.Milliseconds()
		msg += fmt.Sprintf("; retry in %s", after.Round(time.Millisecond))
	} else {
		msg += "; it will not come back until its spec changes or it is restarted by hand"
	}
	return rpcError(rq, CodeServerAway, msg, data)
}

// observeWake records how long a request waited for a wake and how it
// ended (woken, failed, timeout, gone).
func (b *Bridge) observeWake(outcome string, start time.Time) {
	if b.cfg.Metrics != nil {
		b.cfg.Metrics.WakeWaits.WithLabelValues(outcome).Observe(b.now().Sub(start).Seconds())
	}
}
