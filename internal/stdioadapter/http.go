package stdioadapter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/protocol"
)

// Streamable HTTP header names and the first stateless protocol revision.
const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "Mcp-Protocol-Version"
	statelessProtocol     = protocol.StatelessVersion
)

// handler serves the MCP endpoint and /healthz.
type handler struct {
	relay       *relay
	path        string
	maxBody     int64
	bodyTimeout time.Duration
	keepAlive   time.Duration
	alive       func() bool
}

func (h *handler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch req.URL.Path {
	case "/healthz":
		h.serveHealth(w)
	case h.path:
		switch req.Method {
		case http.MethodPost:
			h.servePOST(w, req)
		case http.MethodGet:
			h.serveGET(w, req)
		case http.MethodDelete:
			h.serveDELETE(w, req)
		default:
			w.Header().Set("Allow", "GET, POST, DELETE")
			writeError(w, http.StatusMethodNotAllowed, nil, jsonrpc.CodeInvalidRequest, "method not allowed: use POST, GET or DELETE")
		}
	default:
		http.NotFound(w, req)
	}
}

// serveHealth answers 200 while the stdio server runs.
func (h *handler) serveHealth(w http.ResponseWriter) {
	if !h.alive() {
		http.Error(w, "the stdio server is not running", http.StatusServiceUnavailable)
		return
	}
	io.WriteString(w, "ok\n")
}

func (h *handler) servePOST(w http.ResponseWriter, req *http.Request) {
	if mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type")); mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, nil, jsonrpc.CodeInvalidRequest, "Content-Type must be application/json")
		return
	}
	jsonOK, sseOK := accepts(req.Header.Values("Accept"))
	if !jsonOK && !sseOK {
		writeError(w, http.StatusNotAcceptable, nil, jsonrpc.CodeInvalidRequest, "Accept must allow application/json or text/event-stream")
		return
	}
	body, status, err := h.readBody(w, req)
	if err != nil {
		writeError(w, status, nil, jsonrpc.CodeInvalidRequest, err.Error())
		return
	}
	msgs, isBatch, err := parseBatch(body)
	if err != nil {
		code := jsonrpc.CodeInvalidRequest
		if !json.Valid(body) {
			code = jsonrpc.CodeParseError
		}
		writeError(w, http.StatusBadRequest, nil, code, "while reading the JSON-RPC message: "+err.Error())
		return
	}
	var initReq *message
	requests := 0
	seen := map[string]bool{}
	for _, m := range msgs {
		if m.kind != kindRequest {
			continue
		}
		requests++
		if seen[idKey(m.id)] {
			writeError(w, http.StatusBadRequest, m.id, jsonrpc.CodeInvalidRequest, "two requests in one batch share an id")
			return
		}
		seen[idKey(m.id)] = true
		if m.method == "initialize" {
			initReq = m
		}
	}

	r := h.relay
	sid := req.Header.Get(headerSessionID)
	var s *session
	switch {
	case initReq != nil:
		if len(msgs) > 1 || sid != "" {
			writeError(w, http.StatusBadRequest, initReq.id, jsonrpc.CodeInvalidRequest, "initialize must come alone and without an Mcp-Session-Id")
			return
		}
		s = r.newSession()
	case sid != "":
		if s = r.session(sid); s == nil {
			writeError(w, http.StatusNotFound, nil, codeSessionNotFound, "session not found: initialize again")
			return
		}
	case !sessionless(req, msgs):
		writeError(w, http.StatusBadRequest, nil, codeServerGone, "Bad Request: Mcp-Session-Id header is required (send initialize first)")
		return
	}

	ctx := req.Context()
	if requests == 0 {
		for _, m := range msgs {
			r.fromClient(ctx, s, nil, m)
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	st := newStream(s, sseOK)
	if initReq != nil {
		w.Header().Set(headerSessionID, s.id)
	}
	defer r.streamClosed(st)
	for _, m := range msgs {
		r.fromClient(ctx, s, st, m)
	}
	h.writeResponses(w, req, st, requests, isBatch)
}

// sessionless: a request of the stateless protocol era, which has no
// session, or server/discover, which a client sends before it knows the era.
func sessionless(req *http.Request, msgs []*message) bool {
	if v := req.Header.Get(headerProtocolVersion); v >= statelessProtocol {
		return true
	}
	for _, m := range msgs {
		if m.kind == kindRequest && m.method != "server/discover" {
			return false
		}
	}
	return true
}

// readBody reads a bounded body within the body timeout; the deadline is
// lifted afterwards because the response may stream for long.
func (h *handler) readBody(w http.ResponseWriter, req *http.Request) ([]byte, int, error) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(h.bodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, h.maxBody))
	_ = rc.SetReadDeadline(time.Time{})
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request body exceeds %d bytes", tooBig.Limit)
		}
		return nil, http.StatusBadRequest, fmt.Errorf("while reading the request body: %w", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, http.StatusBadRequest, errors.New("empty request body")
	}
	return body, 0, nil
}

// writeResponses writes what the relay queues on st until all `want`
// requests of the POST have ended: as SSE events, or as one JSON body when
// the client accepts only JSON.
func (h *handler) writeResponses(w http.ResponseWriter, req *http.Request, st *stream, want int, isBatch bool) {
	rc := http.NewResponseController(w)
	// A stateless (2026-07-28) response may have to become a plain JSON
	// error with a status code, so its headers wait for the first message;
	// a session's stream starts at once.
	lazy := st.session == nil
	started := false
	start := func() {
		if !started && st.sse {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
			_ = rc.Flush()
		}
		started = true
	}
	if !lazy {
		start()
	}
	var bodies [][]byte
	keepAlive := time.NewTicker(h.keepAlive)
	defer keepAlive.Stop()
	for got := 0; got < want; {
		select {
		case m := <-st.out:
			if m.final {
				got++
			}
			if m.data == nil {
				continue
			}
			if !st.sse {
				if m.final {
					bodies = append(bodies, m.data)
				}
				continue
			}
			if !started && m.final && want == 1 {
				if status := statelessErrorStatus(req, m.data); status != 0 {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(status)
					w.Write(m.data)
					return
				}
			}
			start()
			if writeEvent(w, rc, m.data) != nil {
				return
			}
		case <-keepAlive.C:
			if started && st.sse && writeKeepAlive(w, rc) != nil {
				return
			}
		case <-st.cut:
			return
		case <-req.Context().Done():
			return
		}
	}
	if st.sse {
		start()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case len(bodies) == 0:
		w.WriteHeader(http.StatusAccepted) // every request was cancelled
	case len(bodies) == 1 && !isBatch:
		w.Write(bodies[0])
	default:
		w.Write(append(append([]byte{'['}, bytes.Join(bodies, []byte{','})...), ']'))
	}
}

// statelessErrorStatus: in the 2026-07-28 protocol some JSON-RPC errors
// travel with an HTTP status (method not found → 404; invalid params,
// unsupported version, missing capability → 400).
func statelessErrorStatus(req *http.Request, data []byte) int {
	if req.Header.Get(headerProtocolVersion) < statelessProtocol {
		return 0
	}
	var resp struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &resp) != nil || resp.Error == nil {
		return 0
	}
	switch resp.Error.Code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, jsonrpc.CodeMissingClientCapability, jsonrpc.CodeUnsupportedProtocolVersion:
		return http.StatusBadRequest
	}
	return 0
}

func (h *handler) serveGET(w http.ResponseWriter, req *http.Request) {
	if _, sseOK := accepts(req.Header.Values("Accept")); !sseOK {
		writeError(w, http.StatusNotAcceptable, nil, jsonrpc.CodeInvalidRequest, "Accept must allow text/event-stream")
		return
	}
	s, ok := h.sessionFor(w, req)
	if !ok {
		return
	}
	st := newStream(s, true)
	if !h.relay.attachGET(s, st) {
		writeError(w, http.StatusConflict, nil, jsonrpc.CodeInvalidRequest, "this session already has a GET stream open")
		return
	}
	defer h.relay.streamClosed(st)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
	keepAlive := time.NewTicker(h.keepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case m := <-st.out:
			if m.data != nil && writeEvent(w, rc, m.data) != nil {
				return
			}
		case <-keepAlive.C:
			if writeKeepAlive(w, rc) != nil {
				return
			}
		case <-st.cut:
			return
		case <-req.Context().Done():
			return
		}
	}
}

func (h *handler) serveDELETE(w http.ResponseWriter, req *http.Request) {
	s, ok := h.sessionFor(w, req)
	if !ok {
		return
	}
	h.relay.endSession(s, "the client ended the session")
	w.WriteHeader(http.StatusOK)
}

// sessionFor finds the session a GET or DELETE names, or answers the error.
func (h *handler) sessionFor(w http.ResponseWriter, req *http.Request) (*session, bool) {
	sid := req.Header.Get(headerSessionID)
	if sid == "" {
		writeError(w, http.StatusBadRequest, nil, codeServerGone, "Bad Request: Mcp-Session-Id header is required")
		return nil, false
	}
	s := h.relay.session(sid)
	if s == nil {
		writeError(w, http.StatusNotFound, nil, codeSessionNotFound, "session not found: initialize again")
		return nil, false
	}
	return s, true
}

// accepts reads the Accept headers. No Accept header accepts everything.
func accepts(values []string) (jsonOK, sseOK bool) {
	if len(values) == 0 {
		return true, true
	}
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := mime.ParseMediaType(strings.TrimSpace(part))
			switch mt {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				sseOK = true
			case "*/*":
				jsonOK, sseOK = true, true
			}
		}
	}
	return jsonOK, sseOK
}

// writeEvent writes and flushes one message as an SSE event. Messages are
// single lines (see oneLine), so one data field holds each.
func writeEvent(w io.Writer, rc *http.ResponseController, data []byte) error {
	if _, err := fmt.Fprintf(w, "event: message\ndata: %s\n\n", data); err != nil {
		return err
	}
	return rc.Flush()
}

// writeKeepAlive writes an SSE comment, which keeps idle proxies from
// closing a stream that waits for a long call.
func writeKeepAlive(w io.Writer, rc *http.ResponseController) error {
	if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
		return err
	}
	return rc.Flush()
}

// writeError answers with a JSON-RPC error and an HTTP status.
func writeError(w http.ResponseWriter, status int, id []byte, code int, text string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(errorResponse(id, code, text))
}
