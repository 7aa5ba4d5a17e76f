package stdioadapter

import (
	"context"
	"crypto/rand"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// relay is the state shared by all HTTP clients of the one child: the
// sessions, the requests in flight in both directions, and the cached
// initialize result. It decides where each message goes.
//
// Ids: a client's request reaches the child under a fresh id of the adapter's
// own (1, 2, 3, …) and its response goes back under the client's id, so
// clients that pick the same ids never collide. A progress token in the
// request's _meta is replaced by that same number for the same reason.
// Requests the child starts keep the child's ids (there is only one child);
// only the session they were sent to may answer them.
type relay struct {
	log             *slog.Logger
	toChild         func(ctx context.Context, b []byte) error
	discoverTimeout time.Duration

	mu        sync.Mutex
	nextID    int64
	calls     map[int64]*call          // client requests in flight at the child, by child-side id
	childReqs map[string]*childRequest // child requests in flight at a client, by idKey
	sessions  map[string]*session
	init      initState
	gone      string // why the child can no longer answer; "" while it can
}

// call is one client request in flight at the child.
type call struct {
	childID    int64
	clientID   []byte // the id as the client wrote it
	clientKey  string
	token      []byte // the client's progress token, nil when it sent none
	method     string
	session    *session // nil for a sessionless request
	stream     *stream
	initialize bool // the one initialize whose result is cached for everyone
}

// childRequest is a request the child started, waiting for a client's answer.
type childRequest struct {
	id      []byte // as the child wrote it
	session *session
	stream  *stream
}

// session is a client's Mcp-Session-Id session (protocol 2025-11-25 and
// older).
type session struct {
	id            string
	calls         map[string]*call // by idKey of the client's id
	get           *stream          // the standalone GET stream, nil when none is open
	lastUsed      time.Time
	subscriptions map[string]bool // resource URIs this session subscribed to
}

// initState: the child is initialized once, by the first client's
// initialize; everyone else gets the cached result.
type initState struct {
	result   []byte        // the child's InitializeResult, once it succeeded
	waiting  chan struct{} // non-nil while an initialize is at the child
	notified bool          // notifications/initialized reached the child (or must not)
	discover []byte        // the child's DiscoverResult, once it answered one
}

func newRelay(log *slog.Logger, toChild func(context.Context, []byte) error, discoverTimeout time.Duration) *relay {
	return &relay{
		log:             log,
		toChild:         toChild,
		discoverTimeout: discoverTimeout,
		calls:           map[int64]*call{},
		childReqs:       map[string]*childRequest{},
		sessions:        map[string]*session{},
	}
}

// ---- sessions ----

func (r *relay) newSession() *session {
	s := &session{
		id:            rand.Text(),
		calls:         map[string]*call{},
		lastUsed:      time.Now(),
		subscriptions: map[string]bool{},
	}
	r.mu.Lock()
	r.sessions[s.id] = s
	r.mu.Unlock()
	return s
}

// session finds a live session and marks it used.
func (r *relay) session(id string) *session {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sessions[id]
	if s != nil {
		s.lastUsed = time.Now()
	}
	return s
}

// attachGET makes st the session's standalone stream; a session has at most
// one.
func (r *relay) attachGET(s *session, st *stream) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sessions[s.id] != s || s.get != nil {
		return false
	}
	s.get = st
	return true
}

// endSession forgets a session: its requests in flight are cancelled at the
// child, and the child's requests waiting for it get an error.
func (r *relay) endSession(s *session, reason string) {
	var toChild [][]byte
	r.mu.Lock()
	if r.sessions[s.id] != s {
		r.mu.Unlock()
		return
	}
	delete(r.sessions, s.id)
	for _, c := range s.calls {
		if c.initialize {
			continue // its result is still wanted for the cache
		}
		if r.dropCallLocked(c) {
			toChild = append(toChild, cancelledNotification(c.childID, reason))
		}
		c.stream.end()
	}
	for key, cr := range r.childReqs {
		if cr.session == s {
			delete(r.childReqs, key)
			toChild = append(toChild, errorResponse(cr.id, jsonrpc.CodeInternalError, reason))
		}
	}
	if s.get != nil {
		s.get.end()
	}
	r.mu.Unlock()
	r.sendAsync(toChild...)
}

// endIdleSessions ends the sessions nobody used for longer than ttl and that
// have nothing open; clients that vanish without a DELETE would leak them.
func (r *relay) endIdleSessions(ttl time.Duration) {
	var idle []*session
	r.mu.Lock()
	for _, s := range r.sessions {
		if len(s.calls) == 0 && s.get == nil && time.Since(s.lastUsed) > ttl {
			idle = append(idle, s)
		}
	}
	r.mu.Unlock()
	for _, s := range idle {
		r.endSession(s, "session ended: idle")
		// Logged once it ended: a client (or a test) that reads the line
		// finds the session gone.
		r.log.Info("ended an idle session", "idleFor", ttl.String())
	}
}

// ---- messages from clients ----

// fromClient handles one message a client POSTed. Responses to its requests
// are sent on st (nil when the POST held no request).
func (r *relay) fromClient(ctx context.Context, s *session, st *stream, m *message) {
	if s != nil {
		r.mu.Lock()
		s.lastUsed = time.Now()
		r.mu.Unlock()
	}
	switch m.kind {
	case kindRequest:
		if m.method == "initialize" {
			r.initialize(ctx, s, st, m)
			return
		}
		r.forward(ctx, s, st, m, false)
	case kindNotification:
		r.clientNotification(ctx, s, m)
	case kindResponse:
		r.clientResponse(ctx, s, m)
	}
}

// initialize sends the first initialize to the child and answers every later
// one with the cached result, so the child is initialized exactly once. An
// initialize that fails is not cached: the next one is tried at the child.
func (r *relay) initialize(ctx context.Context, s *session, st *stream, m *message) {
	for {
		r.mu.Lock()
		switch {
		case r.init.result != nil:
			res := r.init.result
			r.mu.Unlock()
			st.send(resultResponse(m.id, res), true)
			return
		case r.init.waiting != nil:
			wait := r.init.waiting
			r.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				st.send(nil, true)
				r.endSession(s, "the client went away during initialize")
				return
			}
		case r.init.discover != nil:
			// See discover.go: the child's session has begun already.
			res, err := initializeFromDiscover(r.init.discover, requestedVersion(m))
			if err != nil {
				r.mu.Unlock()
				st.send(errorResponse(m.id, jsonrpc.CodeInternalError, "while answering initialize from the server's server/discover result: "+err.Error()), true)
				r.endSession(s, "initialize failed")
				return
			}
			r.init.result, r.init.notified = res, true
			r.mu.Unlock()
			st.send(resultResponse(m.id, res), true)
			return
		default:
			r.init.waiting = make(chan struct{})
			r.mu.Unlock()
			r.forward(ctx, s, st, m, true)
			return
		}
	}
}

// forward sends a client's request to the child under a fresh id.
func (r *relay) forward(ctx context.Context, s *session, st *stream, m *message, initialize bool) {
	key := idKey(m.id)
	r.mu.Lock()
	if r.gone != "" {
		gone := r.gone
		r.releaseInitLocked(initialize)
		r.mu.Unlock()
		st.send(errorResponse(m.id, codeServerGone, gone), true)
		return
	}
	if s != nil && s.calls[key] != nil {
		r.releaseInitLocked(initialize)
		r.mu.Unlock()
		st.send(errorResponse(m.id, jsonrpc.CodeInvalidRequest, "a request with this id is already in flight in this session"), true)
		return
	}
	r.nextID++
	c := &call{
		childID: r.nextID, clientID: m.id, clientKey: key, method: m.method,
		session: s, stream: st, initialize: initialize,
	}
	childID := []byte(strconv.FormatInt(c.childID, 10))
	edits := []edit{{m.fields["id"], childID}}
	if tok, ok := m.nestedField("_meta", "progressToken"); ok {
		c.token = m.raw[tok.start:tok.end]
		edits = append(edits, edit{tok, childID})
	}
	r.calls[c.childID] = c
	st.calls[c.childID] = c
	if s != nil {
		s.calls[key] = c
		if uri, ok := m.stringParam("uri"); ok {
			switch m.method {
			case "resources/subscribe":
				s.subscriptions[uri] = true
			case "resources/unsubscribe":
				delete(s.subscriptions, uri)
			}
		}
	}
	r.mu.Unlock()

	if err := r.toChild(ctx, spliceAll(m.raw, edits...)); err != nil {
		r.finish(c, errorResponse(m.id, codeServerGone, "while sending the request to the stdio server: "+err.Error()))
		return
	}
	if m.method == "server/discover" && r.discoverTimeout > 0 {
		// A server that predates server/discover may ignore it instead of
		// answering "method not found"; the client must not hang on it.
		time.AfterFunc(r.discoverTimeout, func() {
			if r.finish(c, errorResponse(m.id, jsonrpc.CodeMethodNotFound, "the stdio server did not answer server/discover")) {
				r.sendAsync(cancelledNotification(c.childID, "no answer in time"))
			}
		})
	}
}

func (r *relay) clientNotification(ctx context.Context, s *session, m *message) {
	switch m.method {
	case "notifications/initialized":
		// The child hears it once, after the initialize it answered; the
		// clients answered from the cache repeat it for themselves only.
		r.mu.Lock()
		send := r.init.result != nil && !r.init.notified
		r.init.notified = r.init.notified || send
		r.mu.Unlock()
		if !send {
			return
		}
	case "notifications/cancelled":
		r.clientCancelled(ctx, s, m)
		return
	}
	r.send(ctx, m.raw)
}

// clientCancelled passes a client's cancellation on under the child-side id,
// and stops waiting for the response (the child need not send one).
func (r *relay) clientCancelled(ctx context.Context, s *session, m *message) {
	sp, ok := m.nestedField("requestId")
	if !ok || s == nil {
		return // a sessionless request is cancelled by closing its stream
	}
	r.mu.Lock()
	c := s.calls[idKey(m.raw[sp.start:sp.end])]
	r.mu.Unlock()
	if c == nil || c.initialize {
		return // already answered, or not ours to cancel
	}
	if r.finish(c, nil) {
		r.send(ctx, splice(m.raw, sp, []byte(strconv.FormatInt(c.childID, 10))))
	}
}

// clientResponse passes a client's answer to a request the child started,
// if this session is the one that was asked.
func (r *relay) clientResponse(ctx context.Context, s *session, m *message) {
	key := idKey(m.id)
	r.mu.Lock()
	cr := r.childReqs[key]
	if cr == nil || cr.session != s {
		r.mu.Unlock()
		r.log.Warn("dropping a response to a request the stdio server did not send to this client", "id", string(m.id))
		return
	}
	delete(r.childReqs, key)
	r.mu.Unlock()
	r.send(ctx, m.withID(cr.id))
}

// ---- messages from the child ----

// fromChild routes one message the child wrote.
func (r *relay) fromChild(m *message) {
	switch m.kind {
	case kindResponse:
		r.childResponse(m)
	case kindRequest:
		r.childRequest(m)
	case kindNotification:
		r.childNotification(m)
	}
}

func (r *relay) childResponse(m *message) {
	n, ok := childSideID(m.id)
	r.mu.Lock()
	c := r.calls[n]
	r.mu.Unlock()
	if !ok || c == nil {
		return // cancelled or abandoned: nobody waits for it any more
	}
	if result, ok := m.field("result"); ok && (c.initialize || c.method == "server/discover") {
		r.mu.Lock()
		switch {
		case c.initialize:
			r.init.result = result
		case r.init.result == nil && r.init.waiting == nil && r.init.discover == nil:
			r.init.discover = result
		}
		r.mu.Unlock()
	}
	r.finish(c, m.withID(c.clientID))
	if c.initialize && m.isError() && c.session != nil {
		r.endSession(c.session, "initialize failed")
	}
}

// childRequest sends a request the child started to the client it most
// likely belongs to (see route). ping is the adapter's to answer: it is the
// child's client.
func (r *relay) childRequest(m *message) {
	if m.method == "ping" {
		r.sendAsync(resultResponse(m.id, []byte("{}")))
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, st := range r.routeLocked() {
		if st.send(m.raw, false) {
			r.childReqs[idKey(m.id)] = &childRequest{id: m.id, session: st.session, stream: st}
			return
		}
	}
	r.log.Warn("no client can take a request from the stdio server; answering it with an error", "method", m.method)
	r.sendAsync(errorResponse(m.id, jsonrpc.CodeInternalError, "no client is connected to the adapter to answer "+m.method))
}

func (r *relay) childNotification(m *message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case m.method == "notifications/progress":
		if sp, ok := m.nestedField("progressToken"); ok {
			n, _ := childSideID(m.raw[sp.start:sp.end])
			if c := r.calls[n]; c != nil && c.token != nil {
				r.sendFirstLocked(splice(m.raw, sp, c.token), r.callStreamsLocked(c))
				return
			}
		}
	case m.method == "notifications/cancelled":
		// The child gave up on a request it sent to a client.
		if sp, ok := m.nestedField("requestId"); ok {
			key := idKey(m.raw[sp.start:sp.end])
			if cr := r.childReqs[key]; cr != nil {
				delete(r.childReqs, key)
				streams := []*stream{cr.stream}
				if cr.session != nil && cr.session.get != nil {
					streams = append(streams, cr.session.get)
				}
				r.sendFirstLocked(m.raw, streams)
			}
			return
		}
	case strings.HasSuffix(m.method, "/list_changed"):
		r.broadcastLocked(m.raw, func(*session) bool { return true })
		return
	case m.method == "notifications/resources/updated":
		uri, _ := m.stringParam("uri")
		r.broadcastLocked(m.raw, func(s *session) bool { return s.subscriptions[uri] })
		return
	}
	// Not tied to anything the adapter can see (logging, for one): it goes
	// with the request in flight, like a server request would, and to every
	// session's GET stream when nothing is in flight.
	if len(r.calls) > 0 && r.sendFirstLocked(m.raw, r.routeLocked()) {
		return
	}
	r.broadcastLocked(m.raw, func(*session) bool { return true })
}

// routeLocked lists, best first, the streams that should carry a message
// from the child that names no request of a client. stdio carries no link
// between such a message and the client request that caused it, so the
// adapter guesses by time: the most recently forwarded request still in
// flight (its own stream, then its session's GET stream); with nothing in
// flight, the GET stream of the session used last.
func (r *relay) routeLocked() []*stream {
	var latest *call
	for _, c := range r.calls {
		if latest == nil || c.childID > latest.childID {
			latest = c
		}
	}
	var out []*stream
	if latest != nil {
		out = r.callStreamsLocked(latest)
	}
	sessions := make([]*session, 0, len(r.sessions))
	for _, s := range r.sessions {
		if s.get != nil {
			sessions = append(sessions, s)
		}
	}
	sort.Slice(sessions, func(i, j int) bool { return sessions[i].lastUsed.After(sessions[j].lastUsed) })
	for _, s := range sessions {
		out = append(out, s.get)
	}
	return out
}

// callStreamsLocked: where messages about c can go. A JSON (non-SSE)
// response carries only the response itself.
func (r *relay) callStreamsLocked(c *call) []*stream {
	var out []*stream
	if c.stream.sse {
		out = append(out, c.stream)
	}
	if c.session != nil && c.session.get != nil {
		out = append(out, c.session.get)
	}
	return out
}

// sendFirstLocked sends on the first stream that takes the message.
func (r *relay) sendFirstLocked(b []byte, streams []*stream) bool {
	for _, st := range streams {
		if st.send(b, false) {
			return true
		}
	}
	return false
}

func (r *relay) broadcastLocked(b []byte, to func(*session) bool) {
	for _, s := range r.sessions {
		if s.get != nil && to(s) {
			s.get.send(b, false)
		}
	}
}

// ---- ending calls and streams ----

// finish ends a call: data (nil: no response) goes to the client as the
// call's final message. It reports false when the call had already ended.
func (r *relay) finish(c *call, data []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.dropCallLocked(c) {
		return false
	}
	c.stream.send(data, true)
	return true
}

// dropCallLocked forgets a call; false when it was already forgotten.
func (r *relay) dropCallLocked(c *call) bool {
	if r.calls[c.childID] != c {
		return false
	}
	delete(r.calls, c.childID)
	delete(c.stream.calls, c.childID)
	if c.session != nil && c.session.calls[c.clientKey] == c {
		delete(c.session.calls, c.clientKey)
	}
	r.releaseInitLocked(c.initialize)
	return true
}

// releaseInitLocked lets the initializes waiting for the one at the child
// go on: they use its cached result, or try again when it failed.
func (r *relay) releaseInitLocked(initialize bool) {
	if initialize && r.init.waiting != nil {
		close(r.init.waiting)
		r.init.waiting = nil
	}
}

// streamClosed is called when the handler of st returns: requests whose
// response can no longer be delivered are cancelled at the child (closing a
// response stream means cancel), except the shared initialize.
func (r *relay) streamClosed(st *stream) {
	st.end()
	var cancels [][]byte
	r.mu.Lock()
	for _, c := range st.calls {
		if c.initialize {
			continue // its result is still wanted for the cache
		}
		if r.dropCallLocked(c) {
			cancels = append(cancels, cancelledNotification(c.childID, "the client's HTTP stream closed"))
		}
	}
	if s := st.session; s != nil && s.get == st {
		s.get = nil
		s.lastUsed = time.Now()
	}
	r.mu.Unlock()
	r.sendAsync(cancels...)
}

// childGone fails everything in flight: the child exited or stopped talking.
func (r *relay) childGone(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gone != "" {
		return
	}
	r.gone = reason
	for _, c := range r.calls {
		id := c.clientID
		r.dropCallLocked(c)
		c.stream.send(errorResponse(id, codeServerGone, reason), true)
	}
	clear(r.childReqs)
	for _, s := range r.sessions {
		if s.get != nil {
			s.get.end()
		}
	}
	r.releaseInitLocked(true)
}

// ---- writing to the child ----

// childWriteTimeout bounds how long a message the adapter itself writes
// (a ping answer, a cancellation) may wait for the child to read its stdin.
const childWriteTimeout = 10 * time.Second

func (r *relay) send(ctx context.Context, b []byte) {
	if err := r.toChild(ctx, b); err != nil {
		r.log.Warn("could not pass a message to the stdio server", "error", err)
	}
}

// sendAsync writes messages the adapter makes itself without blocking the
// caller, which may be the goroutine reading the child's stdout: blocking it
// on the child's stdin could deadlock against a child blocked on stdout.
func (r *relay) sendAsync(msgs ...[]byte) {
	if len(msgs) == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), childWriteTimeout)
		defer cancel()
		for _, b := range msgs {
			r.send(ctx, b)
		}
	}()
}

// edit replaces one value's bytes.
type edit struct {
	at   span
	with []byte
}

// spliceAll applies non-overlapping edits to b.
func spliceAll(b []byte, edits ...edit) []byte {
	sort.Slice(edits, func(i, j int) bool { return edits[i].at.start > edits[j].at.start })
	for _, e := range edits {
		b = splice(b, e.at, e.with)
	}
	return b
}
