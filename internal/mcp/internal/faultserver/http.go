package faultserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
)

// SessionID is the session every HTTP fault server hands out.
const SessionID = "fault-session-1"

// Handler is a Streamable HTTP fault server (session era).
type Handler struct {
	mode Mode

	mu            sync.Mutex
	notifications []string        // methods of the notifications received
	lastEventIDs  []string        // Last-Event-ID of every GET, in order
	cutRequest    json.RawMessage // id of the tools/list whose stream was cut
}

// NewHandler serves mode over Streamable HTTP.
func NewHandler(mode Mode) *Handler { return &Handler{mode: mode} }

// Notifications are the methods of the notifications received, in order.
func (h *Handler) Notifications() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.notifications...)
}

// LastEventIDs are the Last-Event-ID headers of the resumption GETs seen.
func (h *Handler) LastEventIDs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.lastEventIDs...)
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		h.post(w, r)
	case http.MethodGet:
		h.resume(w, r)
	case http.MethodDelete:
		w.WriteHeader(http.StatusOK)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func (h *Handler) post(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	m, err := jsonrpc.Decode(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if h.mode == SessionExpired && r.Header.Get("Mcp-Session-Id") != "" {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	if !m.IsRequest() {
		h.mu.Lock()
		h.notifications = append(h.notifications, m.Method)
		h.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if m.Method == "tools/list" && (h.mode == CutStream || h.mode == CutStreamNoID) {
		h.cutStream(w, m)
		return
	}
	resp, act := handle(h.mode, m)
	switch act {
	case ignore:
		<-r.Context().Done() // hold the request open until the client gives up
		return
	case die:
		cut(w, false) // as if the server process died: no status line at all
		return
	case garbage:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, garbageLine)
		return
	}
	if m.Method == "initialize" {
		w.Header().Set("Mcp-Session-Id", SessionID)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// cutStream starts an SSE answer, sends a progress notification (with an
// id, unless the mode says not to), begins the response event and breaks
// the connection off in the middle of it.
func (h *Handler) cutStream(w http.ResponseWriter, m *jsonrpc.Message) {
	h.mu.Lock()
	h.cutRequest = m.ID
	h.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	progress := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"listing"}}`
	if h.mode == CutStream {
		fmt.Fprintf(w, "id: ev1\ndata: %s\n\n", progress)
		fmt.Fprintf(w, "id: ev2\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"res", m.ID) // cut mid-event
	} else {
		fmt.Fprintf(w, "data: %s\n\n", progress)
	}
	cut(w, true)
}

// cut breaks the connection without ending the response properly; flush
// first sends what was written so far.
func cut(w http.ResponseWriter, flush bool) {
	if f, ok := w.(http.Flusher); ok && flush {
		f.Flush()
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

// resume answers a GET with Last-Event-ID: the events after ev1, which
// include the response to the cut tools/list.
func (h *Handler) resume(w http.ResponseWriter, r *http.Request) {
	last := r.Header.Get("Last-Event-ID")
	h.mu.Lock()
	h.lastEventIDs = append(h.lastEventIDs, last)
	id := h.cutRequest
	h.mu.Unlock()
	if h.mode != CutStream || last != "ev1" || id == nil || r.Header.Get("Mcp-Session-Id") != SessionID {
		http.Error(w, "nothing to resume", http.StatusBadRequest)
		return
	}
	resp, _ := handle(Healthy, &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: id, Method: "tools/list"})
	data, _ := json.Marshal(resp)
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, "id: ev2\ndata: %s\n\n", data)
}
