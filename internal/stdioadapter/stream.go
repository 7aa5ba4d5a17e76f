package stdioadapter

import (
	"sync"
)

// streamBuffer is how many messages may wait for one slow HTTP client. The
// child's output is read by one goroutine for all clients, so a client that
// stops reading must not stall it: a stream whose buffer fills up is cut off
// (its requests are cancelled at the child) instead.
const streamBuffer = 1024

// outMsg is one message on its way to an HTTP client.
type outMsg struct {
	// data is the message; nil means that one of the stream's requests ended
	// without a response (the client cancelled it).
	data []byte
	// final marks the end of one of the stream's requests.
	final bool
}

// stream is one HTTP response that carries messages to a client: the response
// to a POST that held requests, or a session's standalone GET stream. The
// relay queues messages; the HTTP handler that owns the response writes them.
type stream struct {
	session *session // nil for a sessionless (2026-07-28 era) request
	sse     bool     // text/event-stream; false: one application/json body
	out     chan outMsg

	mu     sync.Mutex
	closed bool
	cut    chan struct{} // closed when the stream must end at once

	// calls are the requests of this stream still in flight at the child,
	// by child-side id. Guarded by relay.mu.
	calls map[int64]*call
}

func newStream(s *session, sse bool) *stream {
	return &stream{
		session: s,
		sse:     sse,
		out:     make(chan outMsg, streamBuffer),
		cut:     make(chan struct{}),
		calls:   map[int64]*call{},
	}
}

// send queues a message without blocking. It reports false when the stream
// is gone or had to be cut off because its client is not reading.
func (st *stream) send(data []byte, final bool) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return false
	}
	select {
	case st.out <- outMsg{data: data, final: final}:
		return true
	default:
		st.closed = true
		close(st.cut)
		return false
	}
}

// end stops the stream: later sends fail, and the handler writing it returns.
func (st *stream) end() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.closed {
		st.closed = true
		close(st.cut)
	}
}
