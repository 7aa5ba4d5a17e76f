package routes

import (
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
)

// Callers' own connections. A server whose credential is each caller's own
// (an exchanged token, the caller's Secret) is reached on a connection of
// each caller's alone: its HTTP connections, its shared MCP connection and
// its agents' sessions carry that caller's credential and serve that
// caller's calls only, so no caller ever rides another's upstream session
// or token. The server's own connection (Server) stays the operator's: its
// catalog listings and resource subscriptions.
//
// A caller's connection is made on its first call, kept while the server's
// connection is (retired and drained with it), and closed once it has been
// idle for CallerIdle.

// CallerIdle is how long a caller's connection is kept without a call
// and without an upstream session of the caller's.
const CallerIdle = 10 * time.Minute

// CallerConn is one caller's connection to a server.
type CallerConn struct {
	*upstream.Conn
	// header is the caller's credential as its next request carries it:
	// set before each call (SetCredential), so a refreshed token is used
	// by the connection and sessions the caller already has.
	header   atomic.Pointer[http.Header]
	lastUsed atomic.Int64 // unix ns
}

// errNoCredential: a request on a caller's connection before its
// credential was set (never on the bridge's paths).
var errNoCredential = errors.New("the caller's credential for the server is not set")

// SetCredential makes h the credential headers of the caller's requests
// from now on.
func (cc *CallerConn) SetCredential(h http.Header) {
	cc.header.Store(&h)
	cc.lastUsed.Store(time.Now().UnixNano())
}

// authorize sets the caller's credential on one request.
func (cc *CallerConn) authorize(h http.Header) error {
	p := cc.header.Load()
	if p == nil {
		return errNoCredential
	}
	for k, v := range *p {
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
	if now.Sub(e.callersSwept) > time.Minute {
		e.callersSwept = now
		e.sweepCallersLocked(now)
	}
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
	cc.Conn = upstream.New(t, o)
	cc.lastUsed.Store(now.UnixNano())
	if e.callers == nil {
		e.callers = map[string]*CallerConn{}
	}
	e.callers[caller] = cc
	return cc, true
}

// sweepCallersLocked closes the callers' connections idle for CallerIdle.
// e.mu is held.
func (e *entry) sweepCallersLocked(now time.Time) {
	for caller, cc := range e.callers {
		if now.Sub(time.Unix(0, cc.lastUsed.Load())) > CallerIdle && cc.Idle() {
			delete(e.callers, caller)
			go cc.Close()
		}
	}
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
