package mcpbridge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/toolname"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

func (b *Bridge) serveMCP(w http.ResponseWriter, r *http.Request, endpoint string) {
	if endpoint != "" && toolname.ValidateServer(endpoint) != nil {
		http.NotFound(w, r)
		return
	}
	if !b.hostAllowed(r.Host) {
		writeError(w, http.StatusForbidden, nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Host %q is not allowed (DNS rebinding protection)", r.Host))
		return
	}
	if !b.originAllowed(r.Header.Get("Origin")) {
		writeError(w, http.StatusForbidden, nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Origin %q is not allowed", r.Header.Get("Origin")))
		return
	}
	b.stop.handlers.enter()
	defer b.stop.handlers.leave()
	switch r.Method {
	case http.MethodPost:
		b.post(w, r, endpoint)
	case http.MethodDelete:
		b.delete(w, r, endpoint)
	case http.MethodGet:
		b.serveGET(w, r, endpoint)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "Method Not Allowed: this endpoint takes POST, GET (a session's stream) and DELETE (to end a session)", http.StatusMethodNotAllowed)
	}
}

func (b *Bridge) post(w http.ResponseWriter, r *http.Request, endpoint string) {
	// Who is calling and what they send are settled first, each within a
	// budget of this connection's own, and only then does the request take
	// one of the replica's shared slots: slow or unauthenticated clients
	// hold their own connections, never what authenticated callers need.
	var began, authenticated time.Time
	if b.cfg.Tracer != nil {
		began = time.Now()
	}
	id, ok := b.authenticate(w, r)
	if !ok {
		return
	}
	if b.cfg.Tracer != nil {
		authenticated = time.Now()
	}
	body, giveBody, ok := b.readBody(w, r, id.Username)
	defer giveBody()
	if !ok {
		return
	}
	giveRequest, ok := b.takeRequest(w)
	if !ok {
		return
	}
	defer giveRequest()
	if m := b.cfg.Metrics; m != nil {
		m.InFlight.Inc()
		defer m.InFlight.Dec()
	}
	if err := rawjson.Check(body); err != nil {
		code := jsonrpc.CodeInvalidRequest
		if errors.Is(err, rawjson.ErrSyntax) {
			code = jsonrpc.CodeParseError
		}
		writeError(w, http.StatusBadRequest, nil, code, "malformed request: "+err.Error())
		return
	}
	if trimmed := strings.TrimLeft(string(body[:min(len(body), 64)]), " \t\r\n"); strings.HasPrefix(trimmed, "[") {
		writeError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "JSON-RPC batches are not supported")
		return
	}
	msg, err := jsonrpc.Decode(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, err.Error())
		return
	}
	rq := &request{id: id, token: authn.BearerToken(r.Header.Get("Authorization")), endpoint: endpoint, search: isSearchPath(r), msg: msg}
	if !b.establish(w, r, rq) {
		return
	}
	// Answers to the bridge's requests and notifications (a cancel) take
	// no slot of the caller's: they free calls that hold those slots.
	switch {
	case msg.IsResponse():
		if rq.sess != nil {
			rq.sess.Deliver(msg)
		}
		w.WriteHeader(http.StatusAccepted)
		return
	case msg.IsNotification():
		b.notification(rq)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	giveCaller, ok := b.takeCaller(w, rq)
	if !ok {
		return
	}
	defer giveCaller()
	ctx, cancel := requestContext(b.startRequest(r.Context(), r, rq, began, authenticated))
	defer cancel(nil)
	// A stopping replica ends what is left at the end of its drain.
	stopOnStop := context.AfterFunc(b.stop.calls, func() { cancel(errStopping) })
	defer stopOnStop()
	var resp *jsonrpc.Message
	defer func() { endRequest(rq, resp) }()
	if rq.sess != nil {
		// The session tells why: the agent cancelled the request
		// (session.ErrCancelled) or ended the session (session.ErrEnded).
		defer rq.sess.Track(string(msg.ID), cancel)()
	}
	rq.ctx = ctx
	rq.out = &responder{w: w, canStream: acceptsEventStream(r)}
	resp = b.dispatch(rq)
	if rq.msg.Method == "initialize" && rq.sess != nil {
		w.Header().Set("Mcp-Session-Id", rq.sess.Token)
	}
	status := rq.out.writeAnswer(resp)
	if m := b.cfg.Metrics; m != nil {
		m.Requests.WithLabelValues(metricMethod(msg.Method), strconv.Itoa(status)).Inc()
	}
}

func acceptsEventStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		if strings.Contains(v, "text/event-stream") {
			return true
		}
	}
	return false
}

// notification handles a notification from the agent.
func (b *Bridge) notification(rq *request) {
	if rq.msg.Method == "notifications/cancelled" && rq.sess != nil {
		if id := rawjson.Get(rq.msg.Params, "requestId"); id != nil {
			rq.sess.Cancel(string(id))
		}
	}
}

// metricMethod keeps the method label's values bounded.
func metricMethod(m string) string {
	switch m {
	case "initialize", "server/discover", "ping", "tools/list", "tools/call", "resources/list",
		"resources/templates/list", "resources/read", "prompts/list", "prompts/get", "completion/complete",
		"resources/subscribe", "resources/unsubscribe", "subscriptions/listen":
		return m
	}
	return "other"
}
