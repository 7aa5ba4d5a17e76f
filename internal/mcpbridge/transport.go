package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-operator/mcp-operator/internal/identity"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/protocol"
	"github.com/mcp-operator/mcp-operator/internal/mcp/toolname"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn/oauth"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// Bridge-specific JSON-RPC error codes (docs/bridge.md).
const (
	// CodeDenied: the permission engine (or the user) refused the request.
	CodeDenied = -32010
	// CodeUpstream: the server gave no answer (restarted, unstable,
	// unavailable, timeout, malformed answer).
	CodeUpstream = -32011
)

// Meta keys of the stateless revision's per-request _meta.
const (
	metaProtocolVersion    = protocol.MetaProtocolVersion
	metaClientCapabilities = protocol.MetaClientCapabilities
	metaServerInfo         = protocol.MetaServerInfo
	metaLogLevel           = protocol.MetaLogLevel
)

// request is one agent request being served.
type request struct {
	ctx context.Context
	id  identity.Identity
	// token is the caller's bearer token as sent, for the stage that gets
	// the upstream credential on the caller's behalf (token exchange)
	// alone: never logged, audited, forwarded or part of the identity.
	token    string
	endpoint string // "" for /mcp, else the server name
	// search: the request came in on SearchPath (search.go).
	search bool
	sess   *session.Session
	// stateless is the 2026-07-28 era (no session).
	stateless bool
	version   string
	// elicitation: the client can answer elicitation/create (form).
	elicitation bool
	// elicitationURL and sampling: it can answer elicitation/create in URL
	// mode and sampling/createMessage (a server's requests are relayed only
	// to a client that can answer them).
	elicitationURL, sampling bool
	msg                      *jsonrpc.Message
	out                      *responder
	// span is the request's trace span (spans.go), nil when tracing is
	// off; failed says a stage recorded why the request failed on it.
	span   trace.Span
	failed bool
}

// sessionID is what audit events name the session by.
func (rq *request) sessionID() string {
	if rq.sess != nil {
		return rq.sess.ID
	}
	return ""
}

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

// readBody reads a request's body within MaxBodyBytes, the connection's
// RequestReadTimeout and the replica's MaxBodyBytesInFlight; false when it
// wrote the refusal. The body's bytes stay taken from the budget until
// the func (also given with a refusal) is called, when the request ends.
func (b *Bridge) readBody(w http.ResponseWriter, r *http.Request, caller string) ([]byte, func(), bool) {
	// The deadline is the connection's (wall clock, not the bridge's
	// clock); it replaces the server's longer ReadTimeout for this request.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(b.cfg.RequestReadTimeout))
	br := &budgetReader{r: http.MaxBytesReader(w, r.Body, b.cfg.MaxBodyBytes), l: b.limits.bodyBytes, caller: caller}
	give := func() { b.limits.bodyBytes.Give(caller, br.taken) }
	body, err := io.ReadAll(br)
	if err == nil {
		return body, give, true
	}
	var tooBig *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.Is(err, errBodyBudget):
		w.Header().Set("Connection", "close")
		overLimit(w, http.StatusServiceUnavailable, nil, fmt.Sprintf("the bridge is reading its limit of request bytes (%d in all, a quarter of it per caller)", b.cfg.MaxBodyBytesInFlight))
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("the request body is larger than %d bytes", b.cfg.MaxBodyBytes))
	case errors.As(err, &netErr) && netErr.Timeout():
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusRequestTimeout, nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("the request body did not arrive within %s", b.cfg.RequestReadTimeout))
	default:
		writeError(w, http.StatusBadRequest, nil, jsonrpc.CodeParseError, "while reading the request body: "+err.Error())
	}
	return nil, give, false
}

// authenticate checks the bearer token within RequestReadTimeout (an API
// server or issuer that does not answer must not hold the request
// forever). It is the one place callers are authenticated: ServiceAccount
// tokens and, when OAuth is configured, issuers' access tokens alike
// (cfg.Auth routes them).
func (b *Bridge) authenticate(w http.ResponseWriter, r *http.Request) (identity.Identity, bool) {
	if tokenInQuery(r) {
		// RFC 6750 allows a query parameter, OAuth 2.1 and the MCP
		// authorization spec do not: URLs end up in logs and Referer
		// headers. Refused even when the header carries a token too.
		b.challenge(w, r, http.StatusBadRequest, "invalid_request", "a bearer token is accepted in the Authorization header only, never in the URL")
		return identity.Identity{}, false
	}
	token := authn.BearerToken(r.Header.Get("Authorization"))
	if c, ok := b.cfg.Auth.(authn.Cached); ok {
		// Most requests: a token checked a moment ago, no wait to bound.
		if id, ok := c.Cached(token); ok {
			return id, true
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), b.cfg.RequestReadTimeout)
	defer cancel()
	id, err := b.cfg.Auth.Authenticate(ctx, token)
	if err == nil {
		return id, true
	}
	switch {
	case errors.Is(err, authn.ErrInsufficientScope):
		b.cfg.Log.V(1).Info("a bearer token was refused", "why", err.Error(), "remote", r.RemoteAddr)
		b.challenge(w, r, http.StatusForbidden, "insufficient_scope", "the token lacks a scope the bridge requires")
		return id, false
	case errors.Is(err, authn.ErrUnauthenticated):
		// Why, for whoever debugs a client's sign-in (the reason never
		// holds the token; a refusal by TokenReview says no more).
		b.cfg.Log.V(1).Info("a bearer token was refused", "why", err.Error(), "remote", r.RemoteAddr)
		code := "invalid_token"
		if token == "" {
			code = "" // RFC 6750: no error code when no credentials were sent
		}
		b.challenge(w, r, http.StatusUnauthorized, code, "")
		return id, false
	case errors.Is(err, authn.ErrBusy):
		overLimit(w, http.StatusServiceUnavailable, nil, "the bridge is checking its limit of new tokens at once")
		return id, false
	case errors.Is(err, authn.ErrTryLater):
		// Not the token's fault, nor an outage: the issuer's keys are
		// read again in a moment (debug level: a flood of made-up key
		// ids would fill the log).
		b.cfg.Log.V(1).Info("a bearer token could not be checked yet", "why", err.Error(), "remote", r.RemoteAddr)
		var later *authn.TryLater
		wait := time.Second
		if errors.As(err, &later) {
			wait = max(wait, later.After)
		}
		tryLater(w, http.StatusServiceUnavailable, nil, reasonAuthUnavailable, wait, "the bridge cannot check the token yet: it names a signing key the issuer had not published when the bridge last read its keys")
		return id, false
	}
	if r.Context().Err() != nil {
		return id, false // the caller left while its token was being checked
	}
	b.cfg.Log.Error(err, "authentication failed")
	tryLater(w, http.StatusServiceUnavailable, nil, reasonAuthUnavailable, overLimitRetry, "the bridge could not check the token: the API server or the token's issuer did not answer")
	return id, false
}

// tokenInQuery says whether the request carries an access_token query
// parameter, however its name is escaped (access%5Ftoken is the same).
func tokenInQuery(r *http.Request) bool {
	return r.URL.RawQuery != "" && r.URL.Query().Has("access_token")
}

// challenge refuses a request for its credentials: status with a JSON-RPC
// error and, when the bridge is an OAuth resource, the WWW-Authenticate
// header that says where its metadata is and what scopes to ask for
// (RFC 6750, RFC 9728); errCode is RFC 6750's error ("" for none).
func (b *Bridge) challenge(w http.ResponseWriter, r *http.Request, status int, errCode, message string) {
	if res := b.cfg.OAuth; res != nil {
		w.Header().Set("WWW-Authenticate", res.Challenge(oauth.ResourcePath(r.URL.Path), errCode, message))
	} else {
		w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-operator"`)
	}
	if message == "" {
		message = "a valid bearer token with audience " + authn.Audience + " is required"
		if b.cfg.OAuth != nil {
			message = "a valid bearer token is required: a ServiceAccount token with audience " + authn.Audience +
				", or an access token for " + b.cfg.OAuth.URL + " (see " + b.cfg.OAuth.MetadataURL(oauth.ResourcePath(r.URL.Path)) + ")"
		}
	}
	writeError(w, status, nil, jsonrpc.CodeInvalidRequest, message)
}

// delete ends the session a DELETE names. Both paths end it with
// Sessions.EndToken, which does not adopt a session live on another
// replica: it writes this replica's tombstone only, so a DELETE never
// counts against the caller's session cap here or forgets another of its
// sessions (the other replica keeps its copy until it idles out or
// MaxAge, as docs/bridge.md "Sessions and replicas" says of any DELETE).
func (b *Bridge) delete(w http.ResponseWriter, r *http.Request, endpoint string) {
	sid := r.Header.Get("Mcp-Session-Id")
	// An empty Authorization header is taken as none.
	if r.Header.Get("Authorization") == "" {
		if subject, err := b.cfg.Sessions.Subject(sid); err == nil {
			b.deleteByID(w, r, sid, subject, endpoint)
			return
		}
		// Not a sealed id of ours: 401 below, as for any request without
		// credentials.
	}
	id, ok := b.authenticate(w, r)
	if !ok {
		return
	}
	if _, err := b.cfg.Sessions.EndToken(sid, id.Username, endpoint, session.ErrEnded); err != nil {
		writeError(w, http.StatusNotFound, nil, jsonrpc.CodeInvalidRequest, "session not found")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// deleteByID serves a DELETE without credentials of a sealed session id:
// it ends that session, for the identity sealed in it. The id is the
// bridge's sealed secret, known to the client it was issued to. mcp-go's
// Streamable HTTP client (v1.2) sends its DELETE without the headers it
// sends on every other request (WithHTTPHeaders, WithHTTPHeaderFunc,
// OAuth): refused, its sessions would stay until they idle out, each
// counted against MaxPerSubject, and then the caller could open no more.
// What ends is told so (session.ErrEndedByID) and logged with where the
// DELETE came from: a stolen id can end a session too.
func (b *Bridge) deleteByID(w http.ResponseWriter, r *http.Request, sid, subject, endpoint string) {
	ended, err := b.cfg.Sessions.EndToken(sid, subject, endpoint, session.ErrEndedByID)
	if err != nil {
		writeError(w, http.StatusNotFound, nil, jsonrpc.CodeInvalidRequest, "session not found")
		return
	}
	b.cfg.Log.Info("a DELETE without credentials ended a session by its id", "session", ended, "subject", subject, "endpoint", endpoint, "remote", r.RemoteAddr)
	w.WriteHeader(http.StatusNoContent)
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
	status := rq.out.finish(resp)
	if m := b.cfg.Metrics; m != nil {
		m.Requests.WithLabelValues(metricMethod(msg.Method), strconv.Itoa(status)).Inc()
	}
}

// errAgentGone is why an agent's request ended before its answer when its
// HTTP request ended, as what it ended (upstream calls, the handlers of
// their servers' requests) is told (context.Cause) and records it. The
// session gives the other reasons (session.ErrCancelled, ErrEnded).
var errAgentGone = errors.New("the agent's request ended (its connection closed)")

// requestContext is the context an agent's request runs in: ended by
// cancel, or with cause errAgentGone when the agent's HTTP request ends
// first (net/http ends it with a bare context.Canceled).
//
// WithoutCancel also drops agent's deadline: net/http sets none on a
// request's context today; one added later must be carried over here.
func requestContext(agent context.Context) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(agent))
	stop := context.AfterFunc(agent, func() { cancel(errAgentGone) })
	// AfterFunc runs its func in a goroutine, even when agent is done
	// already: end ctx now, so no work starts for an agent gone.
	if agent.Err() != nil {
		cancel(errAgentGone)
	}
	return ctx, func(cause error) {
		stop()
		cancel(cause)
	}
}

// establish finds the request's era and session. It writes the error and
// returns false when the request cannot go on.
func (b *Bridge) establish(w http.ResponseWriter, r *http.Request, rq *request) bool {
	msg := rq.msg
	headerVersion := r.Header.Get("MCP-Protocol-Version")
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
		sess, err := b.cfg.Sessions.Resume(sid, rq.id.Username, rq.endpoint)
		if err != nil {
			writeError(w, http.StatusNotFound, msg.ID, jsonrpc.CodeInvalidRequest, "session not found: start a new one with initialize")
			return false
		}
		// Clients send the negotiated version; some send an older one they
		// also speak (as the conformance suite does), which is harmless.
		if headerVersion != "" && !slices.Contains(client.LegacyVersions, headerVersion) {
			writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeInvalidRequest, fmt.Sprintf("MCP-Protocol-Version %q is not a version of this session's era (the session speaks %q)", headerVersion, sess.Version))
			return false
		}
		rq.sess, rq.version, rq.elicitation = sess, sess.Version, sess.Elicitation
		rq.elicitationURL, rq.sampling = sess.ElicitationURL, sess.Sampling
		return true
	}
	if msg.Method == "initialize" {
		return true
	}
	metaVersion, caps := requestMeta(msg.Params)
	if headerVersion < client.StatelessVersion && metaVersion == "" && msg.Method != "server/discover" {
		writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeInvalidRequest, "no Mcp-Session-Id: send initialize first, or speak protocol version "+client.StatelessVersion)
		return false
	}
	if headerVersion != "" && headerVersion != client.StatelessVersion && headerVersion >= client.StatelessVersion {
		data, _ := json.Marshal(map[string]any{"supported": []string{client.StatelessVersion}, "requested": headerVersion})
		writeErrorData(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeUnsupportedProtocolVersion, "unsupported protocol version "+strconv.Quote(headerVersion), data)
		return false
	}
	if msg.IsRequest() && msg.Method != "server/discover" {
		switch {
		case headerVersion == "":
			writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeHeaderMismatch, "MCP-Protocol-Version header is required for requests carrying "+metaProtocolVersion)
			return false
		case metaVersion == "":
			writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeInvalidParams, "missing or invalid _meta field "+metaProtocolVersion)
			return false
		case metaVersion != headerVersion:
			writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeHeaderMismatch, fmt.Sprintf("MCP-Protocol-Version header %q does not match %s %q", headerVersion, metaProtocolVersion, metaVersion))
			return false
		}
	}
	if h := r.Header.Get(protocol.HeaderMethod); h != "" && h != msg.Method {
		writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeHeaderMismatch, fmt.Sprintf("Mcp-Method header %q does not match the method %q", h, msg.Method))
		return false
	}
	if h := r.Header.Get(protocol.HeaderName); h != "" && h != protocol.RequestName(msg.Method, msg.Params) {
		writeError(w, http.StatusBadRequest, msg.ID, jsonrpc.CodeHeaderMismatch, fmt.Sprintf("Mcp-Name header %q does not match the request", h))
		return false
	}
	rq.stateless, rq.version = true, client.StatelessVersion
	rq.elicitation = hasFormElicitation(rawjson.Get(caps, "elicitation"))
	rq.elicitationURL = hasURLElicitation(rawjson.Get(caps, "elicitation"))
	rq.sampling = declared(rawjson.Get(caps, "sampling"))
	return true
}

// requestMeta reads the stateless revision's _meta: the protocol version
// and the client capabilities.
func requestMeta(params json.RawMessage) (version string, caps json.RawMessage) {
	if len(params) == 0 {
		return "", nil
	}
	meta := rawjson.Get(params, "_meta")
	if meta == nil {
		return "", nil
	}
	if v := rawjson.Get(meta, metaProtocolVersion); v != nil {
		version, _ = rawjson.String(v)
	}
	return version, rawjson.Get(meta, metaClientCapabilities)
}

// hasURLElicitation reads capabilities.elicitation: URL mode must be listed.
func hasURLElicitation(raw json.RawMessage) bool {
	return declared(rawjson.Get(raw, "url"))
}

// declared: a capability is declared by an object, even an empty one.
func declared(raw json.RawMessage) bool {
	return len(raw) > 0 && raw[0] == '{'
}

// hasFormElicitation reads capabilities.elicitation: an empty object means
// form mode (as before modes existed); otherwise "form" must be listed.
func hasFormElicitation(raw json.RawMessage) bool {
	if len(raw) == 0 || string(raw) == "null" {
		return false
	}
	ms, err := rawjson.Members(raw)
	if err != nil {
		return false
	}
	if len(ms) == 0 {
		return true
	}
	for _, m := range ms {
		if m.Key == "form" {
			return true
		}
	}
	return false
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

// responder writes the answer to one request: a JSON body, or an SSE
// stream when something must go to the client before the answer (progress,
// an elicitation request). The choice is made at the first such message.
type responder struct {
	w         http.ResponseWriter
	canStream bool

	mu        sync.Mutex
	streaming bool
	broken    bool
	// finished: the answer is written and the handler returns; a call
	// that outlives its request (parked.go) must not write to it.
	finished bool
}

// send writes a message before the answer; false when the client cannot
// take one (no SSE) or the stream broke.
func (o *responder) send(m *jsonrpc.Message) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.canStream || o.broken || o.finished {
		return false
	}
	if !o.streaming {
		h := o.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		o.w.WriteHeader(http.StatusOK)
		o.streaming = true
	}
	if err := writeEvent(o.w, m); err != nil {
		o.broken = true
		return false
	}
	return true
}

func writeEvent(w http.ResponseWriter, m *jsonrpc.Message) error {
	// Encode compacts the message: no line break ends the data line early.
	data, err := jsonrpc.Encode(m)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, len(data)+24)
	buf = append(buf, "event: message\ndata: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	if _, err := w.Write(buf); err != nil {
		return err
	}
	return http.NewResponseController(w).Flush()
}

// finish writes the answer and returns the HTTP status.
func (o *responder) finish(resp *jsonrpc.Message) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.finished = true
	if o.streaming {
		if !o.broken {
			_ = writeEvent(o.w, resp)
		}
		return http.StatusOK
	}
	data, err := jsonrpc.Encode(resp)
	if err != nil {
		data, _ = jsonrpc.Encode(jsonrpc.NewErrorResponse(resp.ID, jsonrpc.CodeInternalError, "the bridge could not encode its answer"))
	}
	o.w.Header().Set("Content-Type", "application/json")
	o.w.WriteHeader(http.StatusOK)
	_, _ = o.w.Write(data)
	return http.StatusOK
}

func writeError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	writeErrorData(w, status, id, code, msg, nil)
}

func writeErrorData(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string, data json.RawMessage) {
	resp := &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: id, Error: &jsonrpc.Error{Code: code, Message: msg, Data: data}}
	if id == nil {
		resp.ID = json.RawMessage("null")
	}
	body, _ := json.Marshal(resp)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// rpcError is an error answer to rq.
func rpcError(rq *request, code int, msg string, data any) *jsonrpc.Message {
	resp := jsonrpc.NewErrorResponse(rq.msg.ID, code, msg)
	if data != nil {
		resp.Error.Data, _ = json.Marshal(data)
	}
	return resp
}

// rpcResult is a result answer to rq.
func rpcResult(rq *request, v any) *jsonrpc.Message {
	if raw, ok := v.(json.RawMessage); ok {
		return jsonrpc.NewResult(rq.msg.ID, raw)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return rpcError(rq, jsonrpc.CodeInternalError, "the bridge could not encode its answer", nil)
	}
	return jsonrpc.NewResult(rq.msg.ID, data)
}
