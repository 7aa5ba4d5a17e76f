package upstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
)

// Agents' own upstream sessions. A session-era agent session's calls to a
// server that keeps sessions (a session-only server, or one that speaks
// both eras) go over an upstream session of that agent session alone: what
// the server keeps per session (a browser, a working directory) is never
// another agent's, and the server does about as much work per agent as
// behind a proxy that relays each session (plus a logging/setLevel to
// debug at dial: the bridge filters each agent's messages itself). At most
// Options.MaxAgentSessions are open (agentLine, trim). The session is
// opened on the agent session's first call to the server, reused for its
// later calls, and closed (DELETE) when the agent session ends on this
// replica (DELETE, idle timeout, forgotten at the per-caller cap) or when
// the Conn is retired or drained. It holds no standalone GET stream (the
// shared connection holds subscriptions), so an idle one is a client and
// its session id; the HTTP connections are the Conn's pool.
//
// A replica that adopts an agent session opens it a new upstream session:
// the server's per-session state does not survive the loss of the replica
// that held it, as with any proxy.

// Agent is the agent session a call is made for.
type Agent struct {
	// ID names the agent session on this replica.
	ID string
	// Caller is who the agent session is (its username): at the cap, a
	// caller's new session closes its own idle sessions first (trim).
	Caller string
	// AtEnd registers f to run when the agent session ends on this
	// replica and returns what forgets f (the Conn forgets it when it
	// closes the line first, so that a session outliving the Conn does not
	// keep it reachable); false, keeping nothing, when it has ended.
	AtEnd func(f func()) (forget func(), ok bool)
}

// clientFor returns the client a call for agent takes: the agent session's
// own upstream session where the server keeps sessions, else the shared
// connection; and the line it is on, taken (busy) until the call releases
// it, and for drop; and whether it had the server learned again for the
// call (doOn must not take that relearn for another call's). An agent
// session with a live upstream session takes it without looking at the
// shared connection or at a paused dial: what happens to them is not its
// session's business.
func (c *Conn) clientFor(ctx context.Context, agent *Agent) (*client.Client, *line, bool, error) {
	if agent == nil {
		return c.sharedFor(ctx, false)
	}
	if l, cli := c.liveAgentLine(agent.ID); cli != nil {
		return cli, l, false, nil
	}
	keeps, err := c.keepsSessions(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	if !keeps {
		return c.sharedFor(ctx, false)
	}
	l, overCap, err := c.agentLine(agent)
	dualEra := c.mode.Load() == modeDualEra
	switch {
	case errors.Is(err, errAtCap) && dualEra:
		// Its stateless era serves the call, without the session's state.
		return c.sharedFor(ctx, false)
	case errors.Is(err, errAtCap):
		return nil, nil, false, &Error{Reason: ReasonBusy, Err: fmt.Errorf("the bridge holds its limit of %d upstream sessions to server %s/%s, and none it may close for this caller: each is in use by a call, or an idle session of another caller holding no more than this one; retry when a call ends or a session ends or idles out", c.opts.MaxAgentSessions, c.target.Namespace, c.target.Name)}
	case err != nil:
		return nil, nil, false, err
	}
	own, err := c.client(ctx, l)
	if overCap {
		c.mu.Lock()
		c.opening--
		c.mu.Unlock()
	}
	if err == nil {
		c.trim(agent.Caller)
		return own, l, false, nil
	}
	c.release(l, nil)
	if c.life.Err() != nil || ctx.Err() != nil || errors.Is(err, errAgentEnded) {
		return nil, nil, false, err
	}
	switch {
	case errors.Is(err, errNoSession) && dualEra:
		// Keeps no session after all (for good, or since it changed behind
		// its URL), or this once. Only a relearn that finds the server
		// changed takes every agent's session (learn); this agent's line
		// ends, and session-era calls go on the shared (stateless)
		// connection for sessionsRetry, then try a session again. Both
		// before the relearn's dial: else another call of this agent
		// session would take the line meanwhile, dial a session on it, and
		// fail as if the agent session had ended when it ended the line.
		c.sessionsRetryAt.Store(c.clock().Add(sessionsRetry).UnixNano())
		c.dropFailedLine(agent.ID, l)
		c.relearn(ctx, c.eras.Load())
		if c.mode.Load() == modeSessionOnly {
			// Replaced by a server that keeps only sessions: the call
			// starts again (doOn) on a line of its own.
			return nil, nil, true, &Error{Reason: ReasonUnavailable, Err: fmt.Errorf("server %s/%s now keeps only sessions: %w", c.target.Namespace, c.target.Name, errNoSession)}
		}
		return c.sharedFor(ctx, true)
	case errors.Is(err, errNoSession):
		// A session-only server (the shared connection has a session id)
		// that opened this one without: a failed dial, not a reason to
		// put every agent in the shared session; the call learns the
		// server again (doOn) in case it was replaced.
		return nil, nil, false, &Error{Reason: ReasonUnavailable, Err: fmt.Errorf("server %s/%s answered an agent session's initialize without a session id, though it kept sessions: %w", c.target.Namespace, c.target.Name, errNoSession)}
	case dualEra:
		// Its stateless era serves the call (a session is cheaper and asks
		// on the call's stream, but is not needed); dial again later.
		c.sessionsRetryAt.Store(c.clock().Add(sessionsRetry).UnixNano())
		return c.sharedFor(ctx, false)
	}
	// A session-only server: the shared connection is a session too, and
	// the call must not run in another agent's state.
	return nil, nil, false, err
}

// sharedFor is sharedClient as clientFor returns it, with whether it had
// the server learned again.
func (c *Conn) sharedFor(ctx context.Context, relearned bool) (*client.Client, *line, bool, error) {
	cli, l, err := c.sharedClient(ctx)
	return cli, l, relearned, err
}

// release ends a call's hold on l (nil: none) and on cli, the client it
// took from l; a Conn over its cap of agent sessions closes what it can now
// (trim), and the shared line a connection relearn replaced once its own
// last call ended (calls on the new one do not keep it open).
func (c *Conn) release(l *line, cli *client.Client) {
	if l == nil {
		return
	}
	c.mu.Lock()
	if l != &c.shared { // the shared line counts its calls by client (holds)
		l.busy--
	}
	l.lastUsed = c.clock()
	over := c.overCapLocked()
	var replaced []*client.Client
	if l == &c.shared {
		if c.shared.holds[cli]--; c.shared.holds[cli] <= 0 {
			delete(c.shared.holds, cli)
		}
		replaced = c.replacedIdleLocked()
	}
	c.mu.Unlock()
	c.closeSessions(replaced...)
	if over {
		// The caller whose new session put the Conn over its cap is not
		// known here: the caller holding the most gives one back.
		c.trim("")
	}
}

// liveAgentLine is the line of agent session id's upstream session and its
// client, the line taken; nil when it has none (not dialled, being
// dialled, or dropped).
func (c *Conn) liveAgentLine(id string) (*line, *client.Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.agents[id]; l != nil && l.cli != nil {
		l.busy++
		return l, l.cli
	}
	return nil, nil
}

// agentLine returns the line of agent's upstream session, taken (busy),
// making it (not dialled yet) on the agent session's first call to this
// server. The line is closed when the agent session ends: the Conn
// registers that with agent.AtEnd once per line.
//
// At Options.MaxAgentSessions a new line is made only while an idle line
// could make room for it (overCap: the caller tells c.opening when its
// dial ended), and the least recently used idle line is closed only once
// the new line's session opened (trim): a dial that fails closes nobody's
// session. The agent session whose line was closed gets a new upstream
// session if it calls again, without what the server kept in the old one.
// With every line busy (or already promised to new lines being dialled) it
// returns errAtCap.
func (c *Conn) agentLine(agent *Agent) (l *line, overCap bool, err error) {
	c.mu.Lock()
	if err := context.Cause(c.life); err != nil {
		c.mu.Unlock()
		return nil, false, err
	}
	if l := c.agents[agent.ID]; l != nil {
		l.busy++
		c.mu.Unlock()
		return l, false, nil
	}
	if c.heldLocked() >= c.opts.MaxAgentSessions {
		if v, _ := c.trimVictimLocked(agent.Caller, 1); v == "" || c.idleLinesLocked() <= c.opening {
			c.mu.Unlock()
			return nil, false, errAtCap
		}
		overCap = true
		c.opening++
	}
	l = &line{era: client.EraSession, busy: 1, caller: agent.Caller}
	if c.agents == nil {
		c.agents = map[string]*line{}
	}
	c.agents[agent.ID] = l
	c.countLines(1)
	c.mu.Unlock()
	id := agent.ID
	forget, ok := agent.AtEnd(func() { c.endAgent(id) })
	if !ok {
		c.endAgent(id)
		if overCap {
			c.mu.Lock()
			c.opening--
			c.mu.Unlock()
		}
		return nil, false, errAgentEnded
	}
	c.mu.Lock()
	if l.ended { // closed meanwhile (retired, drained, the cap)
		forget()
	} else {
		l.forgetAtEnd = forget
	}
	c.mu.Unlock()
	return l, overCap, nil
}

// idleLinesLocked is how many agents' lines no call holds or dials. c.mu
// is held.
func (c *Conn) idleLinesLocked() int {
	n := 0
	for _, l := range c.agents {
		if l.busy == 0 && l.dialing == nil {
			n++
		}
	}
	return n
}

// trim closes idle agents' lines while the Conn holds more than
// Options.MaxAgentSessions besides the lines being dialled over it, to make
// room for a new session of caller's: first lines without a session (a
// failed dial: nothing to lose), then caller's own least recently used,
// then the least recently used of the caller holding the most, if that is
// more than caller holds. So one caller opening sessions never closes
// another's idle session (a stateful server would lose that caller's
// state) unless that caller holds more than its share. Each session closed
// at the cap is logged and counted (ClosedCap: caller's own,
// ClosedCapFairShare: another's): the agent calling again starts with an
// empty one, a sign that the cap is too low for the agents this replica
// serves.
func (c *Conn) trim(caller string) {
	type closing struct {
		owner string
		idle  time.Duration
	}
	c.mu.Lock()
	var closed []*client.Client
	var why []closing
	for c.overCapLocked() {
		id, idle := c.trimVictimLocked(caller, 0)
		if id == "" {
			break // no idle line it may close: trimmed when a call releases one
		}
		owner := c.agents[id].caller
		cli := c.takeAgentLocked(id)
		if cli == nil {
			continue
		}
		closed = append(closed, cli)
		why = append(why, closing{owner, idle})
		if owner == caller {
			c.sessionClosed(ClosedCap)
		} else {
			c.sessionClosed(ClosedCapFairShare)
		}
	}
	c.mu.Unlock()
	c.closeSessions(closed...)
	for _, w := range why { // logged without the Conn's lock
		c.opts.Log.Info("closed an idle upstream session of an agent session at --max-upstream-sessions: the caller's own first, else one of the caller holding the most; that agent session starts a new, empty one if it calls again",
			"server", c.target.Namespace+"/"+c.target.Name, "max", c.opts.MaxAgentSessions, "for", caller, "owner", w.owner, "idle", w.idle.Round(time.Millisecond).String())
	}
}

// overCapLocked says whether the Conn holds more agents' lines than
// Options.MaxAgentSessions, besides those being dialled over it. c.mu is
// held.
func (c *Conn) overCapLocked() bool {
	return c.heldLocked()-c.opening > c.opts.MaxAgentSessions
}

// heldLocked is how many agents' lines count against
// Options.MaxAgentSessions: those of every Conn sharing Options.Sessions,
// else the Conn's own. c.mu is held.
func (c *Conn) heldLocked() int {
	if c.opts.Sessions != nil {
		return c.opts.Sessions.Held()
	}
	return len(c.agents)
}

// countLines adds n to the shared count of lines (Options.Sessions), if
// any. c.mu is held.
func (c *Conn) countLines(n int) {
	if c.opts.Sessions != nil && n != 0 {
		c.opts.Sessions.n.Add(int64(n))
	}
}

// trimVictimLocked is the agent session id of the idle line trim closes
// first to make room for a session of caller (who holds extra lines more
// than the Conn has yet: 1 when asking before its line is made), and how
// long it has been idle; "" if there is none it may close. c.mu is held.
func (c *Conn) trimVictimLocked(caller string, extra int) (string, time.Duration) {
	held := map[string]int{}
	for _, l := range c.agents {
		held[l.caller]++
	}
	// rank orders the idle lines trim may close, lowest first: no session
	// yet, then caller's own, then those of the callers holding more than
	// caller, the most first; -1 for a line it may not close.
	rank := func(l *line) int {
		switch {
		case l.busy > 0 || l.dialing != nil:
			return -1
		case l.cli == nil:
			return 0
		case l.caller == caller:
			return 1
		case caller != "" && held[l.caller] <= held[caller]+extra:
			return -1
		}
		return 2 + len(c.agents) - held[l.caller]
	}
	var id string
	var victim *line
	victimRank := -1
	for aid, l := range c.agents {
		r := rank(l)
		if r < 0 {
			continue
		}
		if victim == nil || r < victimRank || r == victimRank && l.lastUsed.Before(victim.lastUsed) {
			id, victim, victimRank = aid, l, r
		}
	}
	if victim == nil {
		return "", 0
	}
	return id, c.clock().Sub(victim.lastUsed)
}

// takeAgentLocked takes agent session id's line out of the Conn, ended,
// and returns its client for the caller to close (nil: none). c.mu is
// held.
func (c *Conn) takeAgentLocked(id string) *client.Client {
	l := c.agents[id]
	if l == nil {
		return nil
	}
	delete(c.agents, id)
	c.countLines(-1)
	l.end()
	cli := l.cli
	l.cli = nil
	return cli
}

// endAgent closes the upstream session of agent session id (a DELETE to
// the server), if it has one here: the agent session ended.
func (c *Conn) endAgent(id string) {
	c.mu.Lock()
	cli := c.takeAgentLocked(id)
	if cli != nil {
		c.sessionClosed(ClosedAgentEnded)
	}
	c.mu.Unlock()
	if cli != nil {
		c.closeSessions(cli)
	}
}

// dropFailedLine takes agent session id's line l, whose session dial
// failed, out of the Conn, unless another call dials on it again (its dial
// decides), a dial of one opened a session on it meanwhile, or the line was
// replaced.
func (c *Conn) dropFailedLine(id string, l *line) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Only while no other call of the agent holds it: that call dials
	// (or has dialled) a session of its own on it, and decides.
	if c.agents[id] == l && l.dialing == nil && l.cli == nil && l.busy == 0 {
		c.takeAgentLocked(id)
	}
}
