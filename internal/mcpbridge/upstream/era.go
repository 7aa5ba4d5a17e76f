package upstream

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
)

// eraState is what a Conn learned of its server's protocol era, and when
// it learns it again. The fields not atomic are guarded by Conn.mu.
type eraState struct {
	// mode is what the shared connection's dial learned of the server;
	// modeStateless too once an agent's session dial to a dual-era server
	// was answered without a session id. learned is what the last dial of
	// the shared connection said: only a change of it replaces mode.
	mode    atomic.Int32
	learned int32
	// eras counts the times the Conn learned its server again because it
	// changed behind its URL (relearn). relearnRun is the relearn under
	// way (one at a time, the others wait for its result), and none starts
	// before relearnAfter.
	eras         atomic.Int64
	relearnRun   *relearnAttempt
	relearnAfter time.Time
	// sessionsRetryAt (unix ns): after a failed session dial to a server
	// that speaks both eras, the calls go on the shared (stateless)
	// connection until then, not each paying a dial.
	sessionsRetryAt atomic.Int64
}

// sessionsRetry is how long a Conn whose session dial to a server that
// speaks both eras failed sends session-era agents' calls statelessly
// before it dials a session again.
const sessionsRetry = 30 * time.Second

// What a Conn learned of its server at its shared connection's first
// dial (Conn.mode): remembered, so that an agent session with a live
// upstream session of its own needs nothing of the shared connection.
const (
	modeUnknown     int32 = iota // the shared connection was never dialled
	modeStateless                // keeps no session: every call is shared
	modeDualEra                  // speaks both eras: agents get sessions
	modeSessionOnly              // the shared connection is a session too
)

// modeOf is what a connection dialled with server/discover first says of
// its server.
func modeOf(cli *client.Client) int32 {
	switch {
	case cli.Era() == client.EraSession:
		if sc, ok := cli.Conn().(*streamhttp.Conn); ok && sc.SessionID() != "" {
			return modeSessionOnly
		}
	case cli.SpeaksSessionsToo():
		return modeDualEra
	}
	return modeStateless
}

// modeNames name the modes in logs.
var modeNames = map[int32]string{modeUnknown: "unknown", modeStateless: "stateless", modeDualEra: "both eras", modeSessionOnly: "sessions only"}

// learn records what the shared connection cli says of the server. Only a
// change replaces the mode: modeStateless set by an agent's dial to a
// dual-era server stays while the shared connection's dials say the same.
// A server that no longer keeps sessions (it changed behind its URL) has
// the agents' lines taken out: their clients are returned, for the caller
// to close, and the agents' calls go on the shared connection. c.mu is
// held.
func (c *Conn) learn(cli *client.Client) (stale []*client.Client) {
	m := modeOf(cli)
	if m == c.learned {
		return nil
	}
	c.learned = m
	c.mode.Store(m)
	c.sessionsRetryAt.Store(0)
	if m != modeStateless {
		return nil
	}
	return c.takeAgentsLocked()
}

// takeAgentsLocked takes every agent's line out of the Conn, for a server
// that keeps no sessions (now), and returns their clients for the caller
// to close. c.mu is held.
func (c *Conn) takeAgentsLocked() (stale []*client.Client) {
	for id := range c.agents {
		if old := c.takeAgentLocked(id); old != nil {
			stale = append(stale, old)
			c.sessionClosed(ClosedEraChanged)
		}
	}
	return stale
}

// keepsSessions says whether a session-era agent session without an
// upstream session should dial one: the server keeps sessions (the shared
// connection got a session id, or the server listed a session-era version
// in server/discover and has not answered initialize without one), and no
// session dial to a dual-era server failed in the last sessionsRetry. It
// dials the shared connection only when the server is not known yet.
func (c *Conn) keepsSessions(ctx context.Context) (bool, error) {
	if c.mode.Load() == modeUnknown {
		if _, err := c.Client(ctx); err != nil {
			return false, err
		}
	}
	switch c.mode.Load() {
	case modeSessionOnly:
		return true, nil
	case modeDualEra:
		return c.clock().UnixNano() >= c.sessionsRetryAt.Load(), nil
	}
	return false, nil
}

// eraRefused says whether err is the server refusing a request, unrun,
// for the protocol era it was sent in: a JSON-RPC -32022 (unsupported
// protocol version, to a request or to a session's initialize), an HTTP
// 400 or 404 to a request without a session (how a server that keeps
// sessions refuses one) on cli (nil: the call took no client), or an
// initialize answered without a session id by a server believed to keep
// sessions. Each may mean the server was upgraded or replaced behind its
// URL.
func eraRefused(cli *client.Client, err error) bool {
	var rpcErr *jsonrpc.Error
	var httpErr *streamhttp.HTTPError
	switch {
	case errors.As(err, &rpcErr):
		return rpcErr.Code == jsonrpc.CodeUnsupportedProtocolVersion
	case errors.Is(err, errNoSession):
		return true
	case cli != nil && cli.Era() == client.EraStateless && errors.As(err, &httpErr):
		return httpErr.Status == http.StatusBadRequest || httpErr.Status == http.StatusNotFound
	}
	return false
}

// relearnAttempt is a relearn under way: done closes when it ends, and
// changed then says whether it learned the server anew; waiters counts the
// calls waiting for it besides the one that started it (under Conn.mu;
// tests wait for them).
type relearnAttempt struct {
	done    chan struct{}
	changed bool
	waiters int
}

// relearn dials the server afresh, server/discover first, after a refusal
// that says it may no longer speak the era the Conn learned (eraRefused):
// a remote server upgraded or replaced behind its URL (a load balancer's
// rollout) would otherwise fail every call until its MCPServer changed.
// true says the Conn learned the server anew (the call is sent again).
// eras is c.eras when the call began: a relearn by another call since
// counts as this one's.
//
// One relearn runs at a time: the calls refused meanwhile wait for its
// result (or their own end) rather than each dial the server. After one,
// none runs for sessionsRetry: a server that refuses every call (or a
// load balancer with both versions behind it) costs a dial per interval,
// not per call, and flips the mode (closing the agents' sessions) at most
// once per interval.
//
// The relearn runs on its own, bounded by Options.DialTimeout and the
// Conn's life, not by the call that started it: that call, like every
// other waiting, stops waiting when its own context ends, while the run
// finishes and sets the interval. Else a caller giving up (or a server
// stalling the dial for a caller's whole timeout) would hand the dial to
// the next waiter: a dial per call again.
func (c *Conn) relearn(ctx context.Context, eras int64) bool {
	c.mu.Lock()
	if c.eras.Load() != eras {
		c.mu.Unlock()
		return true
	}
	run := c.relearnRun
	if run == nil {
		if c.clock().Before(c.relearnAfter) {
			c.mu.Unlock()
			return false
		}
		run = &relearnAttempt{done: make(chan struct{})}
		c.relearnRun = run
		c.closing.add() // WaitClosed waits for the relearn's dial too
		go c.runRelearn(run)
	} else {
		run.waiters++
	}
	c.mu.Unlock()
	select {
	case <-run.done:
		return run.changed
	case <-ctx.Done():
		return false
	}
}

// runRelearn is the relearn run (relearnOnce) under DialTimeout, cut off
// when the Conn retires; it always ends run and sets relearnAfter (a
// relearnRun left set would hold every later refusal). Its context is the
// Conn's, not the starting call's: that call's hooks (its notifications,
// the agent's answers to server requests) must not see the dial after the
// call returned.
func (c *Conn) runRelearn(run *relearnAttempt) {
	defer c.closing.done()
	ctx, cancel := context.WithTimeout(c.life, c.opts.DialTimeout)
	defer cancel()
	defer func() {
		c.mu.Lock()
		c.relearnRun = nil
		c.relearnAfter = c.clock().Add(sessionsRetry)
		c.mu.Unlock()
		close(run.done)
	}()
	run.changed = c.relearnOnce(ctx)
}

// relearnOnce is relearn's dial. When the new connection says something
// else than the Conn learned and answers a ping (any JSON-RPC answer: the
// stateless era has no ping; a server that hands out no session id but
// wants one is broken, not changed), it becomes the shared connection and
// the mode is learned from it; otherwise it is closed. The shared
// connection it replaces is closed once no call uses the shared line (its
// calls in flight finish), and the subscriptions move to the new one.
func (c *Conn) relearnOnce(ctx context.Context) bool {
	cli, err := c.dial(ctx, "")
	if err != nil {
		return false
	}
	m := modeOf(cli)
	c.mu.Lock()
	was := c.learned
	c.mu.Unlock()
	if m == was {
		c.closeSessions(cli)
		return false
	}
	var rpcErr *jsonrpc.Error
	if _, err := cli.Call(ctx, "ping", nil); err != nil && !errors.As(err, &rpcErr) {
		c.closeSessions(cli)
		return false
	}
	c.mu.Lock()
	if c.learned != was || c.life.Err() != nil || c.draining || c.shared.dialing != nil {
		// Learned meanwhile by a dial of the shared connection (or one
		// under way will), or the Conn retired or is draining (its
		// clients are being taken: nothing would close a new one).
		c.mu.Unlock()
		c.closeSessions(cli)
		return false
	}
	stale := c.learn(cli)
	old := c.shared.cli
	if old != nil {
		c.shared.replaced = append(c.shared.replaced, old)
		stale = append(stale, c.replacedIdleLocked()...)
	}
	c.shared.cli = cli
	c.eras.Add(1)
	c.mu.Unlock()
	c.closeSessions(stale...)
	if old != nil && c.endStream(old) {
		c.Resubscribe() // on the new shared connection
	}
	c.opts.Log.Info("the server speaks another protocol era than when the bridge connected (upgraded or replaced behind its URL): connected again",
		"server", c.target.Namespace+"/"+c.target.Name, "was", modeNames[was], "now", modeNames[m])
	return true
}

// replacedIdleLocked takes the shared connections relearn replaced that no
// call holds any more, for the caller to close. c.mu is held.
func (c *Conn) replacedIdleLocked() (idle []*client.Client) {
	kept := c.shared.replaced[:0]
	for _, old := range c.shared.replaced {
		if c.shared.holds[old] > 0 {
			kept = append(kept, old)
		} else {
			idle = append(idle, old)
		}
	}
	c.shared.replaced = kept
	return idle
}
