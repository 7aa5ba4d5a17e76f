package mcpbridge

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
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
		h.countUpdate(server, "queued")
	default:
		h.countUpdate(server, "dropped")
		if !l.dropping.Swap(true) {
			h.b.cfg.Log.Info("an agent does not take its resource updates: dropping them until it catches up", "listener", l.name, "server", server, "queue", cap(l.queue))
		}
	}
}

// countUpdate counts a resource update offered to an agent by its
// outcome: queued, or dropped because the agent does not take its updates.
func (h *hub) countUpdate(server, outcome string) {
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

// subscription is the subscriptions adapter of the pipeline: one resource
// subscription for listener l, made by resources/subscribe or one URI of
// subscriptions/listen (method). It is decided as a read of its URI, with
// no question to ask (ask denies: updates cannot be asked about one by
// one; a read can), and held by the server itself: one that is away is
// not woken for it (the available stage tells an allowed caller why).
type subscription struct {
	*exchange
	// l is the listener the updates go to: made by listener (nil: the
	// session ended), once the subscription is allowed.
	l        *listener
	listener func() *listener
	method   string
	conn     upstreamConn
	// uri is the canonical upstream URI; agentURI the one the agent sent.
	uri, agentURI string
}

func (sub *subscription) resolve(b *Bridge, x *exchange) *jsonrpc.Message {
	sub.exchange = x
	s, conn, uri, unknown := b.locateResource(x.rq, sub.agentURI)
	if unknown != nil {
		return unknown
	}
	x.server, sub.conn, sub.uri = s, conn, uri
	x.resolvedAway = conn == nil
	x.method, x.target, x.what = methodRead, BridgeURI(s.Name, uri), "subscription of "+sub.agentURI
	x.noAsk, x.subscription = true, true
	return nil
}

func (sub *subscription) decide(b *Bridge, x *exchange) (policy.Result, *jsonrpc.Message) {
	return b.engine.Load().DecideResource(x.rq.id.Subject(), policy.ResourceRead{Server: sub.server.Name, Namespace: sub.server.Namespace, URI: sub.uri}), nil
}

// describe has the server hold the subscription, allowed by x's decision,
// and answers once it does. A subscription that fails ends x's event chain
// as a failed call does.
func (sub *subscription) describe(b *Bridge, x *exchange) (*upstreamCall, *jsonrpc.Message) {
	rq, s := x.rq, x.server
	if sub.l = sub.listener(); sub.l == nil {
		return nil, rpcError(rq, jsonrpc.CodeInvalidRequest, "the session has ended", nil)
	}
	k := topicKey{s.Name, sub.uri}
	return &upstreamCall{
		method: "resources/subscribe", conn: sub.conn,
		started: audit.ResourceRequested{Server: s.Name, URI: sub.uri, Method: sub.method, ToolCallID: x.id},
		send: func(ctx context.Context) (json.RawMessage, *jsonrpc.Message, error) {
			if !b.subs.add(sub.l, k, sub.agentURI) {
				return nil, rpcResult(rq, json.RawMessage(`{}`)), nil // subscribed already
			}
			err := sub.conn.Subscribe(ctx, sub.uri)
			if err != nil {
				b.subs.remove(sub.l, k)
			}
			return nil, nil, err
		},
		plain: true,
		output: func(json.RawMessage) (json.RawMessage, output.Summary, error) {
			return json.RawMessage(`{}`), output.Summary{}, nil
		},
	}, nil
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
	return b.serve(rq, &subscription{agentURI: agentURI, method: "resources/subscribe", listener: func() *listener {
		return b.subs.session(rq.sess, rq.id.Subject())
	}})
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
		if answer := b.serve(rq, &subscription{agentURI: agentURI, method: "subscriptions/listen", listener: func() *listener { return l }}); answer.Error != nil {
			b.cfg.Log.Info("a resource subscription was refused or not made", "subject", rq.id.Username, "uri", agentURI, "why", answer.Error.Message)
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
