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
//
// The parts, a file each: conn.go (Target, Options, Conn and its state),
// lifecycle.go (retire, drain, close sessions), dial.go (a line: one MCP
// connection dialled on first use), era.go (what the server speaks, learnt
// again when it changes behind its URL), agents.go (agents' own sessions
// and their cap), calls.go (the call API), resend.go (every call's path,
// which sends a call the server refused unrun once more), params.go (what the Conn adds to a call's params),
// errors.go (the failure classes) and subscribe.go (resource
// subscriptions).
package upstream

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
)

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
	// upgraded or replaced behind its URL, era.go: relearn).
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
//
// Its state is in parts, each declared beside the code that keeps it:
// lifecycle (lifecycle.go: retiring, draining, closing sessions), lines
// (dial.go and agents.go: the MCP connections the calls take), eraState
// (era.go: what the Conn learned of the server's protocol era),
// callState (calls.go) and subs (subscribe.go). One mutex, mu, guards the
// first three together: they change together (a retirement takes every
// line, learning that a server keeps no sessions takes the agents' lines,
// the cap on agents' lines reads whether each is busy or dialling), and
// one lock taken in one order cannot deadlock.
type Conn struct {
	target Target
	opts   Options

	// pool is the HTTP connections every line shares (poolErr: the
	// target's URL is unusable, said at each dial).
	pool    *streamhttp.Pool
	poolErr error

	// clock tells the time of the era's intervals and the agents' lines'
	// idleness (time.Now; tests move it on).
	clock func() time.Time

	mu sync.Mutex
	lifecycle
	lines
	eraState
	callState
	subs subs
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
		target: t, opts: o, pool: pool, poolErr: err, clock: time.Now,
		lifecycle: lifecycle{
			life: life, retire: retire, subsLife: subsLife, stopSubs: stopSubs,
			deletes: make(chan struct{}, closeParallel),
		},
	}
}

// Target is what the Conn dials.
func (c *Conn) Target() Target { return c.target }
