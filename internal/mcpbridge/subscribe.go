package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/policy"
	"github.com/mcp-operator/mcp-operator/internal/policy/resourceuri"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// Resource subscriptions: an agent asks for them, so updates are pushed
// only to those who asked, never unasked, and each subscription is decided
// like a read of its URI.
//
//   - 2025-11-25 and older: resources/subscribe and resources/unsubscribe in
//     a session; updates go out on the session's standalone GET stream.
//   - 2026-07-28: no session, no GET stream and no resources/subscribe: a
//     subscriptions/listen request names the URIs in
//     notifications.resourceSubscriptions, and its own response stream
//     carries the acknowledgement and the updates until the client closes it.
//
// The hub counts subscribers per (server, upstream URI) on this replica;
// the server's connection holds one upstream subscription for all of them
// (upstream/subscribe.go) and drops it when the last one leaves.

// DefaultUpdateQueue is how many updates wait for one agent's stream; past
// it, updates to that agent are dropped (counted and logged).
const DefaultUpdateQueue = 64

// keepAliveEvery sends an SSE comment on an idle GET stream, so that
// proxies between agent and bridge do not close it.
const keepAliveEvery = 25 * time.Second

type topicKey struct{ server, uri string }

// listener is where one agent's updates go: a session (its GET stream) or
// one subscriptions/listen request.
type listener struct {
	name    string // for logs: the session id, or "listen " + request id
	subject policy.Subject
	queue   chan *jsonrpc.Message
	// meta, when set, is the _meta every update carries (the listen
	// request's subscription id).
	meta json.RawMessage

	mu         sync.Mutex
	streamStop context.CancelFunc
	streamDone chan struct{}
	dropping   atomic.Bool
}

// hub is the replica's resource subscriptions.
type hub struct {
	b *Bridge

	mu       sync.Mutex
	topics   map[topicKey]map[*listener]string // → the URI in that agent's view
	held     map[*listener]map[topicKey]bool
	sessions map[string]*listener
	servers  map[string]map[string]int // server → upstream URI → subscribers
}

func newHub(b *Bridge) *hub {
	return &hub{b: b, topics: map[topicKey]map[*listener]string{}, held: map[*listener]map[topicKey]bool{},
		sessions: map[string]*listener{}, servers: map[string]map[string]int{}}
}

// URIs are the upstream URIs of server someone here is subscribed to
// (routes.Subscriptions).
func (h *hub) URIs(server string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.servers[server]))
	for u := range h.servers[server] {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// Updated passes a server's notifications/resources/updated to the
// listeners subscribed to its URI, in each one's view, if their policies
// still allow reading it (routes.Subscriptions).
func (h *hub) Updated(server string, params json.RawMessage) {
	// Subscriptions are stored under the canonical URI, which is also the
	// one decided below; a server may spell it otherwise.
	raw, _ := rawjson.String(rawjson.Get(params, "uri"))
	uri, err := resourceuri.Canonical(raw)
	if err != nil {
		return
	}
	h.mu.Lock()
	targets := make(map[*listener]string, len(h.topics[topicKey{server, uri}]))
	for l, view := range h.topics[topicKey{server, uri}] {
		targets[l] = view
	}
	h.mu.Unlock()
	if len(targets) == 0 {
		return
	}
	s, _, ok := h.b.cfg.Registry.Server(server)
	if !ok {
		return
	}
	eng := h.b.engine.Load()
	for l, view := range targets {
		// A policy changed since the subscription: updates stop with it.
		if eng.DecideResource(l.subject, policy.ResourceRead{Server: s.Name, Namespace: s.Namespace, URI: uri}).Decision != v1alpha1.DecisionAllow {
			continue
		}
		p := rawjson.AppendString([]byte(`{"uri":`), view)
		if l.meta != nil {
			p = append(append(p, `,"_meta":`...), l.meta...)
		}
		h.offer(l, server, jsonrpc.NewNotification("notifications/resources/updated", append(p, '}')))
	}
}

// offer queues m for l without waiting: a slow agent must not hold up the
// others, so past the queue's bound its updates are dropped.
func (h *hub) offer(l *listener, server string, m *jsonrpc.Message) {
	select {
	case l.queue <- m:
		l.dropping.Store(false)
		h.count(server, "queued")
	default:
		h.count(server, "dropped")
		if !l.dropping.Swap(true) {
			h.b.cfg.Log.Info("an agent does not take its resource updates: dropping them until it catches up", "listener", l.name, "server", server, "queue", cap(l.queue))
		}
	}
}

func (h *hub) count(server, outcome string) {
	if m := h.b.cfg.Metrics; m != nil && m.ResourceUpdates != nil {
		m.ResourceUpdates.WithLabelValues(server, outcome).Inc()
	}
}

// add records l's subscription; true when it is new.
func (h *hub) add(l *listener, k topicKey, view string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held[l][k] {
		return false
	}
	if h.topics[k] == nil {
		h.topics[k] = map[*listener]string{}
	}
	h.topics[k][l] = view
	if h.held[l] == nil {
		h.held[l] = map[topicKey]bool{}
	}
	h.held[l][k] = true
	if h.servers[k.server] == nil {
		h.servers[k.server] = map[string]int{}
	}
	h.servers[k.server][k.uri]++
	return true
}

// remove drops l's subscriptions to keys (all of them when keys is nil)
// and tells the servers' connections, which unsubscribe upstream when
// nobody is left.
func (h *hub) remove(l *listener, keys ...topicKey) {
	h.mu.Lock()
	if keys == nil {
		for k := range h.held[l] {
			keys = append(keys, k)
		}
	}
	changed := map[string]bool{}
	for _, k := range keys {
		if !h.held[l][k] {
			continue
		}
		delete(h.held[l], k)
		delete(h.topics[k], l)
		if len(h.topics[k]) == 0 {
			delete(h.topics, k)
		}
		if h.servers[k.server][k.uri]--; h.servers[k.server][k.uri] <= 0 {
			delete(h.servers[k.server], k.uri)
			if len(h.servers[k.server]) == 0 {
				delete(h.servers, k.server)
			}
			changed[k.server] = true
		}
	}
	if len(h.held[l]) == 0 {
		delete(h.held, l)
	}
	h.mu.Unlock()
	for server := range changed {
		if _, conn, ok := h.b.cfg.Registry.Server(server); ok {
			conn.Resubscribe()
		}
	}
}

// session is the listener of a session, made on first use; nil when the
// session has ended.
func (h *hub) session(s *session.Session, subject policy.Subject) *listener {
	h.mu.Lock()
	l := h.sessions[s.ID]
	made := l == nil
	if made {
		l = &listener{name: "session " + s.ID, subject: subject, queue: make(chan *jsonrpc.Message, h.b.cfg.UpdateQueue)}
		h.sessions[s.ID] = l
	}
	h.mu.Unlock()
	if !made {
		return l
	}
	if _, ok := s.AtEnd(func() { h.endSession(s.ID) }); !ok {
		h.endSession(s.ID)
		return nil
	}
	return l
}

// endSession drops a session's subscriptions and ends its GET stream
// (DELETE, idle expiry).
func (h *hub) endSession(id string) {
	h.mu.Lock()
	l := h.sessions[id]
	delete(h.sessions, id)
	h.mu.Unlock()
	if l == nil {
		return
	}
	h.remove(l)
	l.mu.Lock()
	if l.streamStop != nil {
		l.streamStop()
	}
	l.mu.Unlock()
}

// resolveResource finds the server and upstream URI of a URI in the agent's
// view and decides it as a read is decided, recording the decision (ask
// denies: updates cannot be asked about one by one; a read can). It
// returns the exchange the decision's events are about, or the refusal.
func (b *Bridge) resolveResource(rq *request, agentURI, what string) (*routes.Server, upstreamConn, string, *exchange, *jsonrpc.Message) {
	s, conn, uri, unknown := b.locateResource(rq, agentURI)
	if unknown != nil {
		return nil, nil, "", nil, unknown
	}
	// Decided and recorded as the pipeline does (pipeline.go), with no
	// question to ask.
	x := &exchange{rq: rq, method: methodRead, target: BridgeURI(s.Name, uri), what: what + " of " + agentURI, noAsk: true}
	b.decide(x, b.engine.Load().DecideResource(rq.id.Subject(), policy.ResourceRead{Server: s.Name, Namespace: s.Namespace, URI: uri}))
	if conn == nil && x.res.Decision == v1alpha1.DecisionAllow {
		// A subscription is held by the server itself: one that is away
		// cannot take it now (and an open subscription does not wake it).
		// Only a caller the policy allows learns why: any other is
		// refused by settle, as if the server were serving.
		if a, ok := b.cfg.Registry.Away(s.Name); ok {
			return nil, nil, "", nil, b.refuseAway(rq, a)
		}
		return nil, nil, "", nil, upstreamError(rq, &upstream.Error{Reason: upstream.ReasonUnavailable, Err: fmt.Errorf("server %s is not serving now", s.Name)}, "", nil, false)
	}
	if refused := b.settle(x); refused != nil {
		return nil, nil, "", nil, refused
	}
	return s, conn, uri, x, nil
}

// subscribeURI reads {uri}.
func subscribeURI(rq *request) (string, *jsonrpc.Message) {
	uri, _ := rawjson.String(rawjson.Get(rq.msg.Params, "uri"))
	if uri == "" {
		return "", rpcError(rq, jsonrpc.CodeInvalidParams, rq.msg.Method+" needs params with a uri", nil)
	}
	return uri, nil
}

// subscribe answers resources/subscribe (session era).
func (b *Bridge) subscribe(rq *request) *jsonrpc.Message {
	if rq.sess == nil {
		return rpcError(rq, jsonrpc.CodeMethodNotFound, "resources/subscribe exists in sessions (2025-11-25 and older); protocol version "+rq.version+" subscribes with subscriptions/listen", nil)
	}
	agentURI, bad := subscribeURI(rq)
	if bad != nil {
		return bad
	}
	s, conn, uri, x, refused := b.resolveResource(rq, agentURI, "subscription")
	if refused != nil {
		return refused
	}
	l := b.subs.session(rq.sess, rq.id.Subject())
	if l == nil {
		return rpcError(rq, jsonrpc.CodeInvalidRequest, "the session has ended", nil)
	}
	if err := b.hold(x, l, s, conn, uri, agentURI, "resources/subscribe"); err != nil {
		return err
	}
	return rpcResult(rq, json.RawMessage(`{}`))
}

// hold records l's subscription, allowed by x's decision, and waits until
// the server holds it; the message is the refusal. A subscription that
// fails ends x's event chain as a failed call does.
func (b *Bridge) hold(x *exchange, l *listener, s *routes.Server, conn upstreamConn, uri, agentURI, method string) *jsonrpc.Message {
	rq := x.rq
	if _, err := b.audit(rq, audit.ResourceRequested{Server: s.Name, URI: uri, Method: method, ToolCallID: x.id}); err != nil {
		return b.unrecorded(x, err)
	}
	k := topicKey{s.Name, uri}
	if !b.subs.add(l, k, agentURI) {
		return nil // subscribed already
	}
	ctx, cancel := b.contextWithCallTimeout(rq.ctx)
	defer cancel()
	start := b.now()
	err := conn.Subscribe(ctx, uri)
	took := b.now().Sub(start)
	b.observe(s.Name, "resources/subscribe", took, err)
	if err == nil {
		return nil
	}
	b.subs.remove(l, k)
	failed := b.callFailed(x, s, took, err)
	if errors.Is(err, upstream.ErrSubscribeUnsupported) {
		return rpcError(rq, jsonrpc.CodeInvalidParams, fmt.Sprintf("server %q does not offer resource subscriptions", s.Name), nil)
	}
	return failed
}

// unsubscribe answers resources/unsubscribe: ending a subscription needs no
// permission, and one that does not exist is ended already.
func (b *Bridge) unsubscribe(rq *request) *jsonrpc.Message {
	if rq.sess == nil {
		return rpcError(rq, jsonrpc.CodeMethodNotFound, "resources/unsubscribe exists in sessions (2025-11-25 and older); protocol version "+rq.version+" ends a subscriptions/listen stream by closing it", nil)
	}
	agentURI, bad := subscribeURI(rq)
	if bad != nil {
		return bad
	}
	server, uri := rq.endpoint, agentURI
	if server == "" {
		var ok bool
		if server, uri, ok = ParseBridgeURI(agentURI); !ok {
			return rpcResult(rq, json.RawMessage(`{}`))
		}
	}
	b.subs.mu.Lock()
	l := b.subs.sessions[rq.sess.ID]
	b.subs.mu.Unlock()
	if l != nil {
		b.subs.remove(l, topicKey{server, uri})
	}
	return rpcResult(rq, json.RawMessage(`{}`))
}

// listen answers subscriptions/listen (2026-07-28): the resource
// subscriptions it names, each decided like a read, are acknowledged (the
// ones allowed and held upstream; other notification types are not offered)
// and their updates follow on this response stream until the client closes
// it.
func (b *Bridge) listen(rq *request) *jsonrpc.Message {
	var p struct {
		Notifications *struct {
			ResourceSubscriptions []string `json:"resourceSubscriptions"`
		} `json:"notifications"`
	}
	if err := json.Unmarshal(rq.msg.Params, &p); err != nil || p.Notifications == nil {
		return rpcError(rq, jsonrpc.CodeInvalidParams, "subscriptions/listen needs params.notifications", nil)
	}
	if !rq.out.canStream {
		return rpcError(rq, jsonrpc.CodeInvalidRequest, "subscriptions/listen answers with an event stream: send Accept: text/event-stream", nil)
	}
	// The server's read timeout is for requests, not for a stream that
	// stays open as long as the client wants.
	_ = http.NewResponseController(rq.out.w).SetReadDeadline(time.Time{})
	meta := []byte(`{"io.modelcontextprotocol/subscriptionId":`)
	meta = append(append(meta, rq.msg.ID...), '}')
	l := &listener{name: "listen " + string(rq.msg.ID), subject: rq.id.Subject(), queue: make(chan *jsonrpc.Message, b.cfg.UpdateQueue), meta: meta}
	defer b.subs.remove(l)
	accepted := []string{}
	for _, agentURI := range p.Notifications.ResourceSubscriptions {
		s, conn, uri, x, refused := b.resolveResource(rq, agentURI, "subscription")
		if refused != nil {
			b.cfg.Log.Info("a resource subscription was refused", "subject", rq.id.Username, "uri", agentURI, "why", refused.Error.Message)
			continue
		}
		if failed := b.hold(x, l, s, conn, uri, agentURI, "subscriptions/listen"); failed != nil {
			b.cfg.Log.Info("a resource subscription was not made", "subject", rq.id.Username, "uri", agentURI, "why", failed.Error.Message)
			continue
		}
		accepted = append(accepted, agentURI)
	}
	ack, _ := json.Marshal(map[string]any{"notifications": map[string]any{"resourceSubscriptions": accepted}})
	ack = append(append(ack[:len(ack)-1], `,"_meta":`...), meta...)
	if !rq.out.send(jsonrpc.NewNotification("notifications/subscriptions/acknowledged", append(ack, '}'))) {
		return rpcError(rq, jsonrpc.CodeInternalError, "the stream broke", nil)
	}
	end := rpcResult(rq, json.RawMessage(append(append([]byte(`{"_meta":`), meta...), '}')))
	if len(accepted) == 0 {
		// Nothing will come on this stream: it ends at once, giving back
		// the slots it holds.
		return end
	}
	// From here the request only waits for updates: the bridge may be
	// idle meanwhile (its free heap given back).
	defer b.cfg.Idle.Streaming()()
	// A stopping replica ends the stream as the client closing it would:
	// the client listens again, on another replica.
	ctx, cancel := b.untilWaitsEnd(rq.ctx)
	defer cancel()
	for {
		select {
		case <-ctx.Done():
			return end
		case m := <-l.queue:
			if !rq.out.send(m) {
				return rpcError(rq, jsonrpc.CodeInternalError, "the stream broke", nil)
			}
		}
	}
}

var getStreams atomic.Uint64

// serveGET opens a session's standalone GET stream, where its resource
// updates go. A session has one: a new GET replaces the one open (the
// client reconnected; the old connection may not have noticed it is dead
// yet), and updates queued while none was open are sent on it.
func (b *Bridge) serveGET(w http.ResponseWriter, r *http.Request, endpoint string) {
	id, ok := b.authenticate(w, r)
	if !ok {
		return
	}
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		// The stateless era has no GET stream, and there is none outside
		// a session.
		w.Header().Set("Allow", "POST, DELETE")
		http.Error(w, "Method Not Allowed: GET opens a session's stream and needs Mcp-Session-Id (2026-07-28 clients use subscriptions/listen)", http.StatusMethodNotAllowed)
		return
	}
	sess, err := b.cfg.Sessions.Resume(sid, id.Username, endpoint)
	if err != nil {
		writeError(w, http.StatusNotFound, nil, jsonrpc.CodeInvalidRequest, "session not found")
		return
	}
	if !acceptsEventStream(r) {
		writeError(w, http.StatusNotAcceptable, nil, jsonrpc.CodeInvalidRequest, "the GET stream is an event stream: send Accept: text/event-stream")
		return
	}
	l := b.subs.session(sess, id.Subject())
	if l == nil {
		writeError(w, http.StatusNotFound, nil, jsonrpc.CodeInvalidRequest, "session not found")
		return
	}
	// A stopping replica ends the stream: the client opens it again on
	// another replica.
	ctx, cancel := b.untilWaitsEnd(r.Context())
	defer cancel()
	// Tracked like a call: ending the session ends the stream, and a
	// session with a stream open is not idle.
	defer sess.Track("GET stream "+strconv.FormatUint(getStreams.Add(1), 10), func(error) { cancel() })()
	done := l.attach(cancel)
	defer close(done)
	// The server's read timeout is for requests, not for a stream that
	// lasts as long as the session.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
	if m := b.cfg.Metrics; m != nil {
		m.Requests.WithLabelValues("GET", "200").Inc()
	}
	tick := time.NewTicker(keepAliveEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-l.queue:
			if writeEvent(w, m) != nil {
				// The update is lost with the stream (no event ids here,
				// so no replay): an update is a hint to read again.
				return
			}
		case <-tick.C:
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil || rc.Flush() != nil {
				return
			}
		}
	}
}

// attach makes the caller l's one stream, ending the one before it (and
// waiting until it no longer reads the queue); close the channel returned
// when the stream ends.
func (l *listener) attach(stop context.CancelFunc) chan struct{} {
	done := make(chan struct{})
	l.mu.Lock()
	prevStop, prevDone := l.streamStop, l.streamDone
	l.streamStop, l.streamDone = stop, done
	l.mu.Unlock()
	if prevStop != nil {
		prevStop()
		<-prevDone
	}
	return done
}
