package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/safeurl"
)

// lines are the MCP connections a Conn's calls take, over its pool.
// Guarded by Conn.mu.
type lines struct {
	// shared is the MCP connection of everything but session-era agents'
	// calls to a server that keeps sessions.
	shared line
	// agents are the upstream sessions of agent sessions, by agent session
	// id (agents.go).
	agents map[string]*line
	// opening counts the agents' lines made at the cap whose dial has not
	// ended: each waits for an idle line to be closed once it opened
	// (agents.go, trim).
	opening int
}

// line is one MCP connection to the server over the Conn's pool, dialled
// on first use and again after it was dropped. Its fields are guarded by
// Conn.mu.
type line struct {
	// era is what a dial asks for: "" tries the stateless era first (the
	// shared line), client.EraSession a session (an agent's line).
	era client.Era
	cli *client.Client
	// caller is who the agent's line is for (Agent.Caller; "" on the
	// shared line).
	caller  string
	dialing *dialAttempt
	// ended: the line was taken out of the Conn (its agent session ended,
	// or the Conn was retired or drained); it is never dialled again, and a
	// dial that finishes after this closes what it made.
	ended bool
	// busy counts the calls that took an agent's line and have not ended
	// (the shared line counts its calls by client: holds); lastUsed is
	// when the last one ended. An agent's line that is not busy is idle:
	// the cap may close it (agents.go).
	busy     int
	lastUsed time.Time
	// forgetAtEnd forgets the agent session's clean-up that would close
	// the line (nil: none registered yet).
	forgetAtEnd func()
	// replaced are the shared line's clients relearn replaced, each closed
	// once no call holds it (calls in flight may still use them); holds
	// counts the calls that took each of the shared line's clients.
	replaced []*client.Client
	holds    map[*client.Client]int
}

// end marks l taken out of the Conn and forgets its agent session's
// clean-up, now needless. Conn.mu is held (forgetting takes only the
// agent session's lock, which is never held while taking Conn.mu).
func (l *line) end() {
	l.ended = true
	if l.forgetAtEnd != nil {
		l.forgetAtEnd()
		l.forgetAtEnd = nil
	}
}

// dialAttempt is a line's dial under way: done closes when it ends, and
// err is then its failure, for the calls that waited on it (waiters
// counts them, under Conn.mu; tests wait for them).
type dialAttempt struct {
	done    chan struct{}
	err     error
	waiters int
}

// Client returns the shared client, dialling when there is none.
func (c *Conn) Client(ctx context.Context) (*client.Client, error) {
	return c.client(ctx, &c.shared)
}

// client returns l's client, dialling when it has none (one dial at a time:
// the others wait for it, and share its failure rather than each dial the
// server again; not a failure of the dialling call's own giving up).
func (c *Conn) client(ctx context.Context, l *line) (*client.Client, error) {
	for {
		c.mu.Lock()
		if err := context.Cause(c.life); err != nil {
			c.mu.Unlock()
			return nil, err
		}
		if l.ended {
			c.mu.Unlock()
			return nil, errAgentEnded
		}
		if l.cli != nil {
			cli := l.cli
			c.mu.Unlock()
			return cli, nil
		}
		if wait := l.dialing; wait != nil {
			wait.waiters++
			c.mu.Unlock()
			select {
			case <-wait.done:
				if wait.err != nil {
					return nil, wait.err
				}
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		attempt := &dialAttempt{done: make(chan struct{})}
		l.dialing = attempt
		c.mu.Unlock()
		cli, err := c.dial(ctx, l.era)
		c.mu.Lock()
		l.dialing = nil
		if err != nil && ctx.Err() == nil {
			attempt.err = err
		}
		var stale []*client.Client
		switch {
		case err != nil:
		case c.life.Err() != nil:
			stale = append(stale, cli) // closed within the Conn's DELETE bound
			err = context.Cause(c.life)
		case l.ended:
			stale = append(stale, cli)
			err = errAgentEnded
		default:
			l.cli = cli
			if l == &c.shared {
				stale = c.learn(cli)
			}
		}
		c.mu.Unlock()
		c.closeSessions(stale...)
		close(attempt.done)
		if err != nil {
			return nil, err
		}
		return cli, nil
	}
}

func (c *Conn) dial(ctx context.Context, era client.Era) (*client.Client, error) {
	if c.poolErr != nil {
		return nil, &Error{Reason: ReasonUnavailable, Err: c.poolErr}
	}
	conn := c.pool.Conn()
	dctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	stop := context.AfterFunc(c.life, cancel)
	defer stop()
	cli, err := client.Connect(dctx, conn, client.Options{ClientName: "mcp-operator-bridge", Capabilities: c.opts.ClientCapabilities, Era: era})
	if err != nil {
		// The session id is kept from initialize's answer on: a dial cut
		// by Retire(processGone) before notifications/initialized ends
		// must not DELETE it at whatever listens on the address now.
		if !c.processGone.Load() {
			conn.Close()
		}
		if cause := context.Cause(c.life); cause != nil {
			return nil, cause
		}
		return nil, &Error{Reason: ReasonUnavailable, Err: fmt.Errorf("while connecting to server %s/%s%s: %w", c.target.Namespace, c.target.Name, c.atURLUnlessNamed(err), err)}
	}
	if era == client.EraSession && conn.SessionID() == "" {
		cli.Close()
		return nil, errNoSession
	}
	cli.SetNotificationHandler(c.onNotification)
	if cli.Capabilities().Logging && cli.Era() == client.EraSession {
		// The bridge passes on to each agent what it asked for: the
		// session takes every message.
		_, _ = cli.Call(dctx, "logging/setLevel", json.RawMessage(`{"level":"debug"}`))
	}
	return cli, nil
}

// atURLUnlessNamed is " at " and the server's URL (safeurl's), for a dial
// error that does not name it already: net/http's (*url.Error) does, and
// once is enough to read.
func (c *Conn) atURLUnlessNamed(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ""
	}
	return " at " + safeurl.String(c.target.URL)
}

// sharedClient is Client with the shared line, taken, for clientFor. The
// line is taken with the client it holds: one a relearn replaced
// meanwhile would be closed under the call once the line looked idle.
func (c *Conn) sharedClient(ctx context.Context) (*client.Client, *line, error) {
	for {
		cli, err := c.Client(ctx)
		if err != nil {
			return nil, nil, err
		}
		c.mu.Lock()
		if c.shared.cli == cli {
			if c.shared.holds == nil {
				c.shared.holds = map[*client.Client]int{}
			}
			c.shared.holds[cli]++
			c.mu.Unlock()
			return cli, &c.shared, nil
		}
		c.mu.Unlock()
	}
}

// drop takes cli out of l, the line it was taken from, so that the next
// call dials again, and closes it; nothing when l holds another client by
// now (a call that failed with it dropped it first).
func (c *Conn) drop(l *line, cli *client.Client) {
	c.mu.Lock()
	mine := l.cli == cli
	if mine {
		l.cli = nil
		if l != &c.shared {
			c.sessionClosed(ClosedFailed)
		}
	}
	c.mu.Unlock()
	if mine {
		c.closeSessions(cli)
	}
}
