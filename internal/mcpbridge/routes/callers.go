package routes

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
)

// Callers' own connections. A server whose credential is each caller's own
// (an exchanged token, the caller's Secret) is reached on a connection of
// each caller's alone: its MCP connections — the stateless one and its
// agents' sessions — carry that caller's credential on every request and
// serve that caller's calls only, so no caller ever rides another's
// upstream session or token. The HTTP (TCP, TLS) connections underneath
// are the server's pool, shared as through any HTTP proxy: they carry no
// credential, each request carries its own. The server's own connection
// (Server) stays the operator's: its catalog listings and resource
// subscriptions.
//
// A caller's connection is made on its first call, kept while the server's
// connection is (retired and drained with it), and closed once it has been
// idle for Registry.CallerIdle: a timer of the server's sweeps them while
// it has any, whether or not anyone calls the server again.

// DefaultCallerIdle is how long a caller's connection is kept without a
// call and without an upstream session of the caller's, by default.
const DefaultCallerIdle = 10 * time.Minute

// callerIdle is r.CallerIdle, or its default.
func (r *Registry) callerIdle() time.Duration {
	if r.CallerIdle > 0 {
		return r.CallerIdle
	}
	return DefaultCallerIdle
}

// CallerConn is one caller's connection to a server.
type CallerConn struct {
	*upstream.Conn
	// latest is the credential of the caller's latest call: what the
	// requests made for no call of the caller's carry (the end of an
	// upstream session, its stream). A call's own requests carry the
	// credential its context holds (WithCredential): two calls of one
	// caller presenting different tokens each carry their own.
	latest   atomic.Pointer[http.Header]
	lastUsed atomic.Int64 // unix ns
}

// errNoCredential: a request on a caller's connection before any
// credential was set (never on the bridge's paths).
var errNoCredential = errors.New("the caller's credential for the server is not set")

// credentialKey is the context key of a call's credential headers.
type credentialKey struct{}

// WithCredential is ctx for a call on cc whose requests carry h: h becomes
// the connection's latest credential too.
func (cc *CallerConn) WithCredential(ctx context.Context, h http.Header) context.Context {
	cc.latest.Store(&h)
	cc.lastUsed.Store(time.Now().UnixNano())
	return context.WithValue(ctx, credentialKey{}, h)
}

// authorize sets the caller's credential on one request: its call's, else
// the latest call's.
func (cc *CallerConn) authorize(ctx context.Context, h http.Header) error {
	cred, ok := ctx.Value(credentialKey{}).(http.Header)
	if !ok {
		p := cc.latest.Load()
		if p == nil {
			return errNoCredential
		}
		cred = *p
	}
	for k, v := range cred {
		h[k] = v
	}
	return nil
}

// CallerConn returns caller's own connection to the served server name,
// made on first use from the server's target without the operator's own
// bearer token: the caller's credential takes its place.
func (r *Registry) CallerConn(name, caller string) (*CallerConn, bool) {
	r.mu.RLock()
	e := r.entries[name]
	r.mu.RUnlock()
	if e == nil {
		return nil, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	if cc := e.callers[caller]; cc != nil {
		cc.lastUsed.Store(now.UnixNano()) // not swept from under the call
		return cc, true
	}
	cc := &CallerConn{}
	t := e.conn.Target()
	t.BearerToken, t.Authorize = "", cc.authorize
	o := r.optionsFor(e)
	// Subscriptions are held by the server's own connection.
	o.Subscribed, o.OnResourceUpdated = nil, nil
	cc.Conn = upstream.NewOver(e.conn, t, o)
	cc.lastUsed.Store(now.UnixNano())
	if e.callers == nil {
		e.callers = map[string]*CallerConn{}
	}
	e.callers[caller] = cc
	if e.callerSweep == nil {
		idle := r.callerIdle()
		e.callerSweep = time.AfterFunc(idle/2, func() { e.sweepCallers(idle) })
	}
	return cc, true
}

// sweepCallers closes the callers' connections idle for idle, and looks
// again in idle/2 while any is left: a connection is closed between idle
// and 1.5 idle after its last use.
func (e *entry) sweepCallers(idle time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	for caller, cc := range e.callers {
		if now.Sub(time.Unix(0, cc.lastUsed.Load())) > idle && cc.Idle() {
			delete(e.callers, caller)
			go cc.Close()
		}
	}
	if len(e.callers) == 0 {
		e.callerSweep = nil
		return
	}
	e.callerSweep = time.AfterFunc(idle/2, func() { e.sweepCallers(idle) })
}

// retire retires e's connection and its callers' (Conn.Retire).
func (e *entry) retire(reason string, processGone bool) {
	for _, c := range e.takeCallers() {
		c.Retire(reason, processGone)
	}
	e.mu.Lock()
	conn := e.conn
	e.mu.Unlock()
	conn.Retire(reason, processGone)
}

// drain drains e's connection and its callers' (Conn.Drain).
func (e *entry) drain() {
	for _, c := range e.takeCallers() {
		c.Drain()
	}
	e.mu.Lock()
	conn := e.conn
	e.mu.Unlock()
	conn.Drain()
}

// takeCallers takes every caller's connection out of e, for the caller to
// retire, drain or close with the server's.
func (e *entry) takeCallers() []*upstream.Conn {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.takeCallersLocked()
}

// takeCallersLocked is takeCallers with e.mu held.
func (e *entry) takeCallersLocked() []*upstream.Conn {
	out := make([]*upstream.Conn, 0, len(e.callers))
	for _, cc := range e.callers {
		out = append(out, cc.Conn)
	}
	e.callers = nil
	if e.callerSweep != nil {
		e.callerSweep.Stop()
		e.callerSweep = nil
	}
	return out
}

// callerSessions counts the upstream sessions of e's callers' connections.
func (e *entry) callerSessions() int {
	e.mu.Lock()
	conns := make([]*upstream.Conn, 0, len(e.callers))
	for _, cc := range e.callers {
		conns = append(conns, cc.Conn)
	}
	e.mu.Unlock()
	n := 0
	for _, c := range conns {
		n += c.AgentSessions()
	}
	return n
}
