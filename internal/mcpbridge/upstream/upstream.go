// Package upstream is the bridge's connection to one MCP server. A Conn is
// one pool of HTTP connections per server per replica, shared by every
// agent's calls (multiplexed), and over it the MCP connections the calls
// take, each dialled on first use and again after it breaks:
//
//   - a shared one, made with server/discover first: the stateless era
//     where the server speaks it, else a session. The bridge's own listings
//     and subscriptions, and 2026-07-28 agents' calls, go here;
//   - to a server that keeps sessions, one session per session-era agent
//     session (agents.go), opened on its first call and closed (DELETE)
//     when the agent session ends: what a server keeps per session (a
//     browser, a working directory) is one agent's, as behind
//     any proxy that relays sessions.
//
// Calls are never retried once the server may have run them: a failure is
// reported, with a reason, and nothing is replayed.
//
// When the controller reports a new pod for the server (or a crash), the
// bridge retires the Conn: calls in flight end at once with
// mcp_server_restarted or mcp_server_unstable, every session closes, and a
// new Conn serves what comes next. When only a remote server's credentials
// change (a rotated Secret), the old Conn is drained instead: its calls in
// flight finish, then its sessions close, and a new Conn, dialled with the
// new credentials, serves what comes next.
package upstream

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/translate"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
	"github.com/mcp-operator/mcp-operator/internal/safeurl"
	"github.com/mcp-operator/mcp-operator/internal/tracing"
)

// Reasons a call failed without an answer from the server: the reason of
// tool.failed.
const (
	ReasonRestarted   = "mcp_server_restarted"
	ReasonUnstable    = "mcp_server_unstable"
	ReasonUnavailable = "mcp_server_unavailable"
	ReasonTimeout     = "timeout"
	ReasonCancelled   = "cancelled"
	ReasonInvalid     = "invalid_result"
	// ReasonBusy: the bridge holds its cap of upstream sessions to a
	// session-only server (Options.MaxAgentSessions), none the caller may
	// close: each in use by a call, or another caller's idle one that fair
	// sharing keeps.
	ReasonBusy = "mcp_server_busy"
)

// Error is a call that got no answer from the server.
type Error struct {
	Reason string
	Err    error
}

func (e *Error) Error() string { return e.Reason + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// IdleConns is how many idle HTTP connections a Conn keeps to its server:
// every agent's calls (in every upstream session) share the Conn's pool, so
// about as many as run at once (with 8, 32 concurrent calls re-dialled the
// server for most of them).
const IdleConns = 64

// Target is where a server is and how to reach it.
type Target struct {
	// Namespace and Name of the MCPServer.
	Namespace, Name string
	// URL of its MCP endpoint and the pod behind it (status.endpoint).
	URL, Pod string
	// Header, BearerToken and TLS carry a remote server's credentials.
	Header      http.Header
	BearerToken string
	TLS         *tls.Config
	// Credentials identifies the Secret values of Header, BearerToken and
	// TLS (credentials.Credentials.Digest): a change means a rotation.
	Credentials string
	// Authorize sets a credential that changes while the Conn lives on
	// each request (streamhttp.Options.Authorize): one caller's own
	// (exchanged, refreshed) token on that caller's Conn, as the request's
	// context carries it.
	Authorize func(context.Context, http.Header) error
}

// Options tune a Conn.
type Options struct {
	// DialTimeout bounds connecting and the MCP handshake (default 10s).
	DialTimeout time.Duration
	// MaxMessageBytes bounds one answer (default 64 MiB: larger than the
	// output pipeline's cap, so big results reach the artifact store).
	MaxMessageBytes int
	// OnListChanged is called when the server says its tools, resources or
	// prompts changed.
	OnListChanged func(method string)
	// Subscribed lists the resource URIs agents are subscribed to on this
	// server now; the Conn makes the server hold them (subscribe.go).
	Subscribed func() []string
	// OnResourceUpdated gets the params of the server's
	// notifications/resources/updated.
	OnResourceUpdated func(params json.RawMessage)
	// Log gets what happens to subscriptions (discarded when zero).
	Log logr.Logger
	// ClientCapabilities are declared to the server: what the bridge will
	// relay of the server's own requests (see CallHooks.Request).
	ClientCapabilities map[string]any
	// MaxAgentSessions bounds the agents' upstream sessions the Conn holds
	// (default DefaultMaxAgentSessions); agents.go says what happens at it.
	// With Sessions set, it bounds the sessions of every Conn sharing it.
	MaxAgentSessions int
	// Sessions, when set, counts the agents' upstream sessions of every
	// Conn given it: one server's own Conn and its callers' Conns hold
	// MaxAgentSessions together. nil: the Conn's own alone.
	Sessions *SessionCount
	// SessionClosed, when set, is told of each agent's upstream session the
	// Conn closes: the server's name and why (a Closed* reason). It is
	// called with the Conn's lock held, and must not call the Conn.
	SessionClosed func(server, reason string)
}

// Why an agent's upstream session was closed (Options.SessionClosed).
const (
	// ClosedAgentEnded: its agent session ended (DELETE, idle timeout,
	// forgotten at the per-caller cap).
	ClosedAgentEnded = "agent_ended"
	// ClosedCap: an idle one of the caller's own, closed at
	// Options.MaxAgentSessions once a new session of that caller opened.
	ClosedCap = "cap"
	// ClosedCapFairShare: an idle one of the caller holding the most
	// sessions, closed at Options.MaxAgentSessions once a new session of a
	// caller holding fewer opened (agents.go: trim).
	ClosedCapFairShare = "cap_fair_share"
	// ClosedFailed: a call in it failed without an answer (the session
	// broke, or the server no longer knew it).
	ClosedFailed = "failed"
	// ClosedRetired: the Conn was retired (a new pod, a crash, the server
	// left the bridge's scope, the replica stopping).
	ClosedRetired = "retired"
	// ClosedDrained: the Conn was drained (rotated credentials).
	ClosedDrained = "drained"
	// ClosedEraChanged: the server no longer keeps sessions (it was
	// upgraded or replaced behind its URL, agents.go: relearn).
	ClosedEraChanged = "era_changed"
)

// SessionCount counts agents' upstream sessions across Conns
// (Options.Sessions).
type SessionCount struct{ n atomic.Int64 }

// Held is how many sessions (lines, dialled or not) the Conns hold.
func (s *SessionCount) Held() int { return int(s.n.Load()) }

// DefaultMaxAgentSessions is Options.MaxAgentSessions by default: the
// sessions one replica opens on one server for its agents.
const DefaultMaxAgentSessions = 256

// Conn is the connection to one server. Safe for concurrent use.
type Conn struct {
	target Target
	opts   Options

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

	// pool is the HTTP connections every line below shares (poolErr: the
	// target's URL is unusable, said at each dial).
	pool    *streamhttp.Pool
	poolErr error

	mu sync.Mutex
	// shared is the MCP connection of everything but session-era agents'
	// calls to a server that keeps sessions.
	shared line
	// agents are the upstream sessions of agent sessions, by agent session
	// id (agents.go).
	agents map[string]*line
	// inFlight counts the calls running; once draining, the last one to
	// end closes the connections.
	inFlight int
	draining bool
	// opening counts the agents' lines made at the cap whose dial has not
	// ended: each waits for an idle line to be closed once it opened
	// (agents.go, trim).
	opening int

	// mode is what the shared connection's dial learned of the server
	// (agents.go); modeStateless too once an agent's session dial to a
	// dual-era server was answered without a session id. learned is what
	// the last dial of the shared connection said (under mu): only a
	// change of it replaces mode.
	mode    atomic.Int32
	learned int32
	// eras counts the times the Conn learned its server again because it
	// changed behind its URL (relearn). relearnRun is the relearn under
	// way (under mu; one at a time, the others wait for its result), and
	// none starts before relearnAfter (under mu).
	eras         atomic.Int64
	relearnRun   *relearnAttempt
	relearnAfter time.Time
	// clock tells the time of relearnAfter and sessionsRetryAt (time.Now;
	// tests move it on).
	clock func() time.Time
	// sessionsRetryAt (unix ns): after a failed session dial to a server
	// that speaks both eras, the calls go on the shared (stateless)
	// connection until then, not each paying a dial.
	sessionsRetryAt atomic.Int64

	progress sync.Map // upstream progress token → func(params json.RawMessage)
	tokens   atomic.Int64

	subs subs

	// deletes holds a slot for each session being closed (its DELETE):
	// at most closeParallel at once, whatever closes them (the Conn's end,
	// the cap, agent sessions ending, failures), so that a Conn with
	// hundreds of agent sessions never opens as many connections to the
	// server at once.
	deletes chan struct{}
	// closing counts the clean-ups running (WaitClosed waits for them).
	closing cleanups
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

// New returns a Conn for t; nothing is dialled yet.
func New(t Target, o Options) *Conn {
	o = o.withDefaults()
	pool, err := streamhttp.NewPool(streamhttp.Options{
		URL: t.URL, Header: t.Header, BearerToken: t.BearerToken, TLS: t.TLS, Authorize: t.Authorize,
		MaxMessageBytes: o.MaxMessageBytes, MaxIdleConns: IdleConns,
	})
	return newConn(t, o, pool, err)
}

// NewOver returns a Conn to base's server whose requests carry t's
// credentials (Header, BearerToken, Authorize: one caller's) instead of
// base's: MCP connections and sessions of its own, over base's pool of
// HTTP connections, which carry no credential of their own (each request
// carries its own, as through any HTTP proxy). t is base's target but for
// its credentials.
func NewOver(base *Conn, t Target, o Options) *Conn {
	o = o.withDefaults()
	if base.pool == nil {
		return newConn(t, o, nil, base.poolErr)
	}
	return newConn(t, o, base.pool.WithCredentials(t.Header, t.BearerToken, t.Authorize), nil)
}

func (o Options) withDefaults() Options {
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 64 << 20
	}
	if o.MaxAgentSessions <= 0 {
		o.MaxAgentSessions = DefaultMaxAgentSessions
	}
	return o
}

func newConn(t Target, o Options, pool *streamhttp.Pool, err error) *Conn {
	life, retire := context.WithCancelCause(context.Background())
	subsLife, stopSubs := context.WithCancel(life)
	return &Conn{
		target: t, opts: o, life: life, retire: retire, subsLife: subsLife, stopSubs: stopSubs, pool: pool, poolErr: err,
		deletes: make(chan struct{}, closeParallel), clock: time.Now,
	}
}

// Target is what the Conn dials.
func (c *Conn) Target() Target { return c.target }

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

// Client returns the shared client, dialling when there is none.
func (c *Conn) Client(ctx context.Context) (*client.Client, error) {
	return c.client(ctx, &c.shared)
}

// errNoSession is a server that answered initialize without a session id.
var errNoSession = errors.New("initialize was answered without a session id")

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

func (c *Conn) onNotification(m *jsonrpc.Message) {
	switch m.Method {
	case "notifications/progress":
		tok := rawjson.Get(m.Params, "progressToken")
		if f, ok := c.progress.Load(string(tok)); ok {
			f.(func(json.RawMessage))(m.Params)
		}
	case "notifications/tools/list_changed", "notifications/resources/list_changed", "notifications/prompts/list_changed":
		if c.opts.OnListChanged != nil {
			c.opts.OnListChanged(m.Method)
		}
	case "notifications/resources/updated":
		if c.opts.OnResourceUpdated != nil {
			c.opts.OnResourceUpdated(m.Params)
		}
	}
}

// Call sends one request of the bridge's own (not tools/call) on the
// shared connection and returns its raw result. A JSON-RPC error from the
// server comes back as a *jsonrpc.Error; a call without an answer as an
// *Error.
func (c *Conn) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	return c.CallFor(ctx, nil, method, params)
}

// CallFor is Call made for an agent session (nil: a 2026-07-28 agent or
// the bridge itself), which takes its own upstream session where the
// server keeps sessions.
func (c *Conn) CallFor(ctx context.Context, agent *Agent, method string, params json.RawMessage) (json.RawMessage, error) {
	ctx, params = propagate(ctx, params)
	return c.doOn(ctx, agent, func(ctx context.Context, cli *client.Client) (json.RawMessage, error) {
		return cli.Call(ctx, method, params)
	})
}

// ListAll lists every item of a paginated list method.
func (c *Conn) ListAll(ctx context.Context, method, key string) ([]json.RawMessage, error) {
	items, _, err := c.ListAllFresh(ctx, method, key)
	return items, err
}

// ListAllFresh is ListAll that also says how long the server said the list
// is fresh.
func (c *Conn) ListAllFresh(ctx context.Context, method, key string) ([]json.RawMessage, client.Freshness, error) {
	var items []json.RawMessage
	var fresh client.Freshness
	_, err := c.do(ctx, func(ctx context.Context, cli *client.Client) (json.RawMessage, error) {
		var err error
		items, fresh, err = cli.ListAllFresh(ctx, method, key, client.Limits{})
		return nil, err
	})
	for i, item := range items {
		if err == nil {
			err = strict(fmt.Sprintf("%s item %d", key, i), item)
		}
	}
	return items, fresh, err
}

// strict holds what the server answers to the rules the bridge holds agents'
// requests to (rawjson.Check): a repeated key, or two keys that differ only in
// case, could be read one way by the bridge's redaction and injection scan
// (the first value) and another by the agent's parser (the last), so such an
// answer is refused as invalid_result.
func strict(what string, doc json.RawMessage) error {
	if len(doc) == 0 {
		return nil
	}
	if err := rawjson.Check(doc); err != nil {
		return &Error{Reason: ReasonInvalid, Err: fmt.Errorf("the server's %s: %w", what, err)}
	}
	return nil
}

// CallHooks receive what the server sends on a call's response stream
// before its result. Each may be nil.
type CallHooks struct {
	// Progress gets the server's progress notifications for the call. The
	// call then carries a progress token of this Conn's own: agents' tokens
	// could collide on the shared connection.
	Progress func(params json.RawMessage)
	// Log gets the log messages (notifications/message).
	Log func(params json.RawMessage)
	// Request answers the server's own requests (elicitation, sampling);
	// without it they are refused.
	Request streamhttp.RequestHandler
	// Agent is the session-era agent session the call is made for (nil
	// for a 2026-07-28 agent): it takes that agent session's own upstream
	// session where the server keeps sessions (agents.go).
	Agent *Agent
}

// CallTool forwards tools/call params (name already the upstream's), with
// what the server sends during the call handed to hooks.
func (c *Conn) CallTool(ctx context.Context, params json.RawMessage, hooks CallHooks) (json.RawMessage, error) {
	if hooks.Log != nil {
		ctx = streamhttp.WithCallNotifications(ctx, func(m *jsonrpc.Message) {
			if m.Method == "notifications/message" {
				hooks.Log(m.Params)
				return
			}
			c.onNotification(m)
		})
	}
	if hooks.Request != nil {
		ctx = streamhttp.WithCallRequests(ctx, hooks.Request)
	}
	if hooks.Progress != nil {
		tok := strconv.Quote("bridge-" + strconv.FormatInt(c.tokens.Add(1), 10))
		var err error
		if params, err = withProgressToken(params, tok); err != nil {
			return nil, err
		}
		c.progress.Store(tok, hooks.Progress)
		defer c.progress.Delete(tok)
	}
	ctx, params = propagate(ctx, params)
	return c.doOn(ctx, hooks.Agent, func(ctx context.Context, cli *client.Client) (json.RawMessage, error) {
		return cli.CallToolParams(ctx, params)
	})
}

// propagate passes the trace context of ctx's span (the bridge's call) on
// to the server both ways OpenTelemetry's conventions for MCP know: in
// params._meta, which names this one message, and in the headers of the
// HTTP request. Without a span (tracing off) params go as they are.
func propagate(ctx context.Context, params json.RawMessage) (context.Context, json.RawMessage) {
	parent, state := tracing.Context(ctx)
	if parent == "" {
		return ctx, params
	}
	h := http.Header{}
	h.Set(tracing.KeyTraceparent, parent)
	if state != "" {
		h.Set(tracing.KeyTracestate, state)
	}
	return streamhttp.WithCallHeader(ctx, h), translate.TraceContext(params, parent, state)
}

// withProgressToken sets params._meta.progressToken to tok (a JSON value).
func withProgressToken(params json.RawMessage, tok string) (json.RawMessage, error) {
	ms, err := rawjson.Members(params)
	if err != nil {
		return nil, fmt.Errorf("while forwarding tools/call: params: %w", err)
	}
	var meta []rawjson.Member
	out := ms[:0:0]
	for _, m := range ms {
		if m.Key == "_meta" {
			if meta, err = rawjson.Members(m.Value); err != nil {
				return nil, fmt.Errorf("while forwarding tools/call: params._meta: %w", err)
			}
			continue
		}
		out = append(out, m)
	}
	kept := meta[:0:0]
	for _, m := range meta {
		if m.Key != "progressToken" {
			kept = append(kept, m)
		}
	}
	kept = append(kept, rawjson.Member{Key: "progressToken", Value: []byte(tok)})
	out = append(out, rawjson.Member{Key: "_meta", Value: rawjson.AppendObject(nil, kept)})
	return rawjson.AppendObject(nil, out), nil
}

// do runs f with the shared client, bounded by the Conn's life, and turns
// failures into reasons. A transport failure drops the client so that the
// next call dials again; the failed call itself is not retried.
func (c *Conn) do(ctx context.Context, f func(context.Context, *client.Client) (json.RawMessage, error)) (json.RawMessage, error) {
	return c.doOn(ctx, nil, f)
}

// doOn is do with the client clientFor picks for agent. A call the server
// refused unrun is sent once more: when the session a session-era agent's
// call took had ended (the server expired or forgot it), in a new session;
// when the refusal says the server no longer speaks the era the Conn
// learned (it was upgraded or replaced behind its URL), once the Conn
// learned it again.
func (c *Conn) doOn(ctx context.Context, agent *Agent, f func(context.Context, *client.Client) (json.RawMessage, error)) (json.RawMessage, error) {
	c.begin()
	defer c.end()
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(c.life, func() { cancel(context.Cause(c.life)) })
	defer stop()
	// resent: the call was sent and refused once (it is not sent a third
	// time); relearned: a failure to take a client (nothing sent) had the
	// server learned again, once.
	resent, relearned := false, false
	for {
		// A refusal for its era on the client taken now sends the call
		// again only if the server was learned again since the take (by
		// another call): eras counts the relearns before it. A relearn
		// clientFor ran for this call (its agent's session opened without
		// an id) is not another's, so eras is read again after it. A
		// failure to take a client counts from before the take, that
		// relearn included: it found the server changed (keeping only
		// sessions now), and the call starts again.
		before := c.eras.Load()
		cli, l, ownRelearn, err := c.clientFor(cctx, agent)
		if err != nil {
			if !relearned && eraRefused(nil, err) && c.relearn(cctx, before) {
				relearned = true
				continue
			}
			return nil, c.classify(ctx, cctx, err)
		}
		eras := before
		if ownRelearn {
			eras = c.eras.Load()
		}
		res, err := f(cctx, cli)
		if !resent && err != nil && ctx.Err() == nil {
			switch {
			case errors.Is(err, streamhttp.ErrNotRun) && agent != nil:
				c.drop(l, cli)
				c.release(l, cli)
				resent = true
				continue
			case eraRefused(cli, err) && c.relearn(cctx, eras):
				c.release(l, cli)
				resent = true
				continue
			}
		}
		res, err = c.answer(ctx, cctx, l, cli, res, err)
		c.release(l, cli)
		return res, err
	}
}

// answer is what a call on cli, taken from l, returns to its caller.
func (c *Conn) answer(ctx, cctx context.Context, l *line, cli *client.Client, res json.RawMessage, err error) (json.RawMessage, error) {
	if err == nil {
		return res, strict("result", res)
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		if err := strict("error data", rpcErr.Data); err != nil {
			return nil, err
		}
		return nil, rpcErr
	}
	// Only a broken connection is dropped: the caller giving up (cancel,
	// deadline) says nothing about it, and dropping the shared connection
	// ends its session under every other call in flight.
	var limit *client.LimitError
	if !errors.As(err, &limit) && ctx.Err() == nil {
		c.drop(l, cli)
	}
	return nil, c.classify(ctx, cctx, err)
}

func (c *Conn) classify(ctx, cctx context.Context, err error) error {
	var e *Error
	switch cause := context.Cause(cctx); {
	case errors.As(cause, &e):
		return e
	case errors.As(err, &e):
		return e
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &Error{Reason: ReasonTimeout, Err: err}
	case ctx.Err() != nil:
		return &Error{Reason: ReasonCancelled, Err: err}
	}
	var httpErr *streamhttp.HTTPError
	if errors.As(err, &httpErr) && httpErr.Status/100 == 2 || isMalformed(err) {
		return &Error{Reason: ReasonInvalid, Err: err}
	}
	return &Error{Reason: ReasonUnstable, Err: err}
}

func isMalformed(err error) bool {
	var se *json.SyntaxError
	return errors.As(err, &se) || containsAny(err.Error(), "malformed JSON-RPC message", "bound maxMessageBytes", "answered with something else")
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
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

// Close ends the Conn for good (the server left the bridge's scope).
func (c *Conn) Close() { c.Retire(ReasonUnavailable, false) }
