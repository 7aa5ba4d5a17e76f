package mcpbridge

import (
	"net/http"
	"sync"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
)

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

// writeAnswer writes the answer and returns the HTTP status.
func (o *responder) writeAnswer(resp *jsonrpc.Message) int {
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
