package upstream

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
)

// lifecycle is how a Conn ends: retired at once (Retire) or drained
// (Drain), and the sessions it closes meanwhile. inFlight and draining are
// guarded by Conn.mu; the rest are set once by newConn or synchronise
// themselves.
type lifecycle struct {
	life   context.Context // ends when the Conn is retired
	retire context.CancelCauseFunc
	// processGone: the Conn was retired because its server's process
	// ended (Retire). Its sessions went with it, and whatever listens on
	// its address now (a new pod given the IP) is another server: no
	// session of this Conn gets a DELETE from then on, not even one a dial
	// that ended late opened.
	processGone atomic.Bool
	// subsLife bounds the resource subscriptions (subscribe.go): it ends
	// with life, or when the Conn is drained — the Conn replacing it holds
	// them then, and this one must not re-establish them.
	subsLife context.Context
	stopSubs context.CancelFunc

	// inFlight counts the calls running; once draining, the last one to
	// end closes the connections.
	inFlight int
	draining bool

	// deletes holds a slot for each session being closed (its DELETE):
	// at most closeParallel at once, whatever closes them (the Conn's end,
	// the cap, agent sessions ending, failures), so that a Conn with
	// hundreds of agent sessions never opens as many connections to the
	// server at once.
	deletes chan struct{}
	// closing counts the clean-ups running (WaitClosed waits for them).
	closing cleanups
}

// Retire ends the Conn: calls in flight fail with reason, later calls
// too, and every upstream session closes. processGone says the server's
// process ended (it crashed or restarted): its sessions went with it, and
// a DELETE each would only wait on a server that is gone. Otherwise (a
// new pod in a rollout, a remote server's new URL, a server removed) the
// old server may still be serving and holding them: each gets a DELETE.
// After processGone, no session of the Conn gets one, not even a session a
// dial under way then opens.
func (c *Conn) Retire(reason string, processGone bool) {
	if processGone {
		c.processGone.Store(true) // before life ends: a dial that sees it ended sees this
	}
	c.retire(&Error{Reason: reason, Err: fmt.Errorf("server %s/%s changed under the call (pod %q)", c.target.Namespace, c.target.Name, c.target.Pod)})
	c.mu.Lock()
	clis := c.takeAll(ClosedRetired)
	c.mu.Unlock()
	c.closeAll(clis)
}

// Close ends the Conn for good (the server left the bridge's scope).
func (c *Conn) Close() { c.Retire(ReasonUnavailable, false) }

// Drain ends the Conn gently, for a Conn replaced by one with new
// credentials: its resource subscriptions end at once (the new Conn
// establishes them), its calls in flight run to their end, then the
// connections close. A call that still reaches it (it was looked up just
// before) is served and closes the connections again when it ends.
func (c *Conn) Drain() {
	c.stopSubs()
	c.mu.Lock()
	c.draining = true
	clis := c.idleClients()
	c.mu.Unlock()
	c.closeAll(clis)
}

// idleClients takes the clients away when a draining Conn has no call in
// flight; c.mu is held.
func (c *Conn) idleClients() []*client.Client {
	if !c.draining || c.inFlight > 0 {
		return nil
	}
	return c.takeAll(ClosedDrained)
}

func (c *Conn) begin() {
	c.mu.Lock()
	c.inFlight++
	c.mu.Unlock()
}

func (c *Conn) end() {
	c.mu.Lock()
	c.inFlight--
	clis := c.idleClients()
	c.mu.Unlock()
	c.closeAll(clis)
}

// WaitClosed waits until the sessions the Conn closes (their DELETEs) are
// closed, or ctx ends: a stopping replica ends its agents' sessions within
// its shutdown grace.
func (c *Conn) WaitClosed(ctx context.Context) error {
	select {
	case <-c.closing.idle():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("while closing the upstream sessions of server %s/%s: %w", c.target.Namespace, c.target.Name, ctx.Err())
	}
}

// takeAll takes every client out of the Conn (a non-nil list, perhaps
// empty); agents' lines end (a drained Conn that still gets a call opens
// that agent a new one), their sessions counted closed for why. c.mu is
// held.
func (c *Conn) takeAll(why string) []*client.Client {
	clis := make([]*client.Client, 0, 1+len(c.shared.replaced)+len(c.agents))
	if c.shared.cli != nil {
		clis = append(clis, c.shared.cli)
		c.shared.cli = nil
	}
	clis = append(clis, c.shared.replaced...)
	c.shared.replaced = nil
	for _, l := range c.agents {
		l.end()
		if l.cli != nil {
			clis = append(clis, l.cli)
			l.cli = nil
			c.sessionClosed(why)
		}
	}
	c.countLines(-len(c.agents))
	c.agents = nil
	return clis
}

// sessionClosed tells Options.SessionClosed that an agent's upstream
// session was closed, and why.
func (c *Conn) sessionClosed(why string) {
	if c.opts.SessionClosed != nil {
		c.opts.SessionClosed(c.target.Name, why)
	}
}

// cleanups counts clean-ups running in the background. Unlike a
// sync.WaitGroup it may be waited for while clean-ups start: an agent
// session can end while a stopping replica waits for the rest.
type cleanups struct {
	mu      sync.Mutex
	running int
	none    chan struct{} // closed when running falls to 0
}

func (cl *cleanups) add() {
	cl.mu.Lock()
	if cl.running == 0 {
		cl.none = make(chan struct{})
	}
	cl.running++
	cl.mu.Unlock()
}

func (cl *cleanups) done() {
	cl.mu.Lock()
	if cl.running--; cl.running == 0 {
		close(cl.none)
	}
	cl.mu.Unlock()
}

// idle is closed once no clean-up runs (now, if none does).
func (cl *cleanups) idle() <-chan struct{} {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.running == 0 {
		none := make(chan struct{})
		close(none)
		return none
	}
	return cl.none
}

// closeParallel bounds the DELETEs a Conn sends at once (Conn.deletes).
const closeParallel = 8

// closeAll ends clis in the background, with a DELETE each for sessions
// unless the server's process is gone (processGone: a client over the
// Conn's pool holds nothing else to close), then drops the pool's idle
// connections; nil clis is nothing to close.
func (c *Conn) closeAll(clis []*client.Client) {
	if clis == nil || c.pool == nil {
		return
	}
	if len(clis) == 0 || c.processGone.Load() {
		c.pool.CloseIdle()
		return
	}
	c.closing.add()
	go func() {
		defer c.closing.done()
		var wg sync.WaitGroup
		for _, cli := range clis {
			c.deletes <- struct{}{}
			wg.Go(func() {
				defer func() { <-c.deletes }()
				c.closeSession(cli)
			})
		}
		wg.Wait()
		c.pool.CloseIdle()
	}()
}

// closeSessions ends clis in the background, each (its DELETE) within the
// Conn's bound on DELETEs at once; the pool's connections stay, for the
// other sessions.
func (c *Conn) closeSessions(clis ...*client.Client) {
	for _, cli := range clis {
		c.closing.add()
		go func() {
			defer c.closing.done()
			c.deletes <- struct{}{}
			defer func() { <-c.deletes }()
			c.closeSession(cli)
		}()
	}
}

// closeSession ends cli's session with a DELETE, unless the server's
// process ended (processGone): a client over the Conn's pool holds
// nothing else to close.
func (c *Conn) closeSession(cli *client.Client) {
	if !c.processGone.Load() {
		cli.Close()
	}
}

// AgentSessions is how many agent sessions have an upstream session (or
// one being dialled, or to dial again) on this Conn: open sessions keep a
// server from sleeping.
func (c *Conn) AgentSessions() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.agents)
}

// Idle says whether no call is in flight on the Conn and no agent session
// holds an upstream session on it: closing it now loses nobody anything.
func (c *Conn) Idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inFlight == 0 && len(c.agents) == 0
}
