package streamhttp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// sseEvent is one dispatched server-sent event. data is the reader's own
// buffer: valid only until onEvent returns (jsonrpc.Decode copies what it
// keeps).
type sseEvent struct {
	name string
	data []byte
}

// sseCursor is what resuming a stream needs: the last event id seen and the
// reconnection delay the server asked for; and whether the stream last read
// had ended when readSSE returned (its end read ahead with its last event).
type sseCursor struct {
	lastID   []byte
	retry    time.Duration
	hasRetry bool
	ended    bool
}

// sseReader holds the buffers a stream is read with. They are pooled:
// unpooled, a call answered on SSE allocates a 32 KiB reader and a copy of
// each line and event, about half of the bridge's bytes allocated per call on
// the go-sdk's everything-server (make bench-bridge).
type sseReader struct {
	br   *bufio.Reader
	body eofSeen // what br reads
	line []byte  // a line longer than br's buffer, put together
	data []byte  // the spec's data buffer: each data line's value and a LF
	id   []byte  // the event's id, until it is dispatched
	// afterCR: the last line ended with a CR, so a LF first on the next
	// is the rest of its CRLF.
	afterCR bool
	// lfFree: how many of br's buffered bytes, from where it reads next,
	// are known to hold no LF. Bytes only arrive after them, so a search
	// for a LF starts there: with lines ended by CR alone it would
	// otherwise run over the whole buffer for each line, which let a
	// server burn the bridge's CPU (45 MB/s against 316 with LF).
	lfFree int
	// lfSearched counts the bytes searched for a LF, for a test that the
	// search is linear in the stream.
	lfSearched int
}

// sseBufferSize is the reader's buffer: a line that fits is parsed where
// it was read, and the body is read in pieces this large.
const sseBufferSize = 32 << 10

// maxPooledBuffer: larger buffers (a large event's) are not kept in the
// pool.
const maxPooledBuffer = 64 << 10

var sseReaders = sync.Pool{New: func() any { return newSSEReader() }}

func newSSEReader() *sseReader { return &sseReader{br: bufio.NewReaderSize(nil, sseBufferSize)} }

// eofSeen reads a body and remembers whether it said io.EOF.
type eofSeen struct {
	r   io.Reader
	eof bool
}

func (e *eofSeen) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		e.eof = true
	}
	return n, err
}

func (r *sseReader) release() {
	r.body = eofSeen{} // the body is not kept alive by the pool
	r.br.Reset(nil)
	for _, b := range [...]*[]byte{&r.line, &r.data, &r.id} {
		if cap(*b) > maxPooledBuffer {
			*b = nil
		}
	}
	sseReaders.Put(r)
}

// readSSE parses an event stream and calls onEvent for each event until the
// stream ends or onEvent returns done. It returns io.EOF for a stream the
// server ended, another error for a stream that broke off. Ids count once
// their event is dispatched (as in the SSE spec), so an event cut in half is
// asked for again on resumption.
func readSSE(body io.Reader, maxEvent int, cur *sseCursor, onEvent func(sseEvent) (done bool, err error)) error {
	r := sseReaders.Get().(*sseReader)
	defer r.release()
	return r.read(body, maxEvent, cur, onEvent)
}

// read is readSSE with r's buffers. The parsing follows the event-stream
// rules of the HTML standard (WHATWG, "Interpreting an event stream"):
// servers written by others are read with it.
func (r *sseReader) read(body io.Reader, maxEvent int, cur *sseCursor, onEvent func(sseEvent) (done bool, err error)) error {
	defer func() { cur.ended = r.body.eof }()
	// Nothing of the stream r read before (pooled, or broken off mid-event)
	// is carried into this one.
	r.body = eofSeen{r: body}
	r.br.Reset(&r.body)
	r.data, r.id, r.afterCR, r.lfFree = r.data[:0], r.id[:0], false, 0
	var name string
	hasID := false
	for first := true; ; first = false {
		line, err := r.readLine(maxEvent)
		if err != nil {
			return err
		}
		if first {
			// One leading byte order mark is ignored (spec); a second one
			// is part of the first field's name.
			line = bytes.TrimPrefix(line, utf8BOM)
		}
		if len(line) == 0 { // a blank line dispatches the event
			done, err := r.dispatch(cur, name, hasID, onEvent)
			if err != nil || done {
				return err
			}
			name, hasID = "", false
			continue
		}
		// A line starting with ':' is a comment (keep-alives): its field
		// name is empty, which no case below matches. A line without ':' is
		// a field name with an empty value (spec).
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		if len(value) > maxEvent {
			return fmt.Errorf("%w: a field is longer than %d bytes (bound maxMessageBytes)", ErrTooLarge, maxEvent)
		}
		switch string(field) {
		case "event":
			name = eventName(value)
		case "data":
			// The spec appends the value and a LF to the data buffer; the
			// bound is on the data dispatched, the buffer without its last
			// LF.
			if len(r.data)+len(value) > maxEvent {
				return fmt.Errorf("%w: an event is larger than %d bytes (bound maxMessageBytes)", ErrTooLarge, maxEvent)
			}
			r.data = append(append(r.data, value...), '\n')
		case "id":
			// An id with a NUL is ignored (spec).
			if !bytes.ContainsRune(value, 0) {
				r.id, hasID = append(r.id[:0], value...), true
			}
		case "retry":
			if d, ok := retryDelay(value); ok {
				cur.retry, cur.hasRetry = d, true
			}
		}
	}
}

// dispatch is the spec's dispatch at a blank line, for the event whose
// type is name and whose data is r.data; it empties r.data.
func (r *sseReader) dispatch(cur *sseCursor, name string, hasID bool, onEvent func(sseEvent) (bool, error)) (done bool, err error) {
	// The last event id is set first, also when no event is dispatched
	// (spec): a server primes a stream with an id and no data.
	if hasID {
		cur.lastID = append(cur.lastID[:0], r.id...)
	}
	data := r.data
	r.data = r.data[:0]
	if len(data) == 0 {
		// No data line: nothing is dispatched (spec).
		return false, nil
	}
	// The data buffer's last LF is removed (spec).
	data = data[:len(data)-1]
	if rawjson.Blank(data) {
		// Not the spec's rule but ours: the spec dispatches an event whose
		// data is empty ("data:", which MCP servers send with an id to
		// prime a stream) or only white space ("data:\ndata:" is a LF).
		// It carries no JSON-RPC message, and decoding it would fail the
		// call or the standalone stream for a harmless event.
		return false, nil
	}
	return onEvent(sseEvent{name: name, data: data})
}

// maxRetry bounds the reconnection delay a retry field sets. A larger value
// is clamped, not ignored: a server that asks for a long wait would
// otherwise be called again after the default delay, much sooner than it
// asked. An hour is more than any caller waits (Options.MaxRetryDelay caps
// it lower) and keeps the arithmetic far from overflowing.
const maxRetry = time.Hour

// retryDelay is a retry field's value: milliseconds in ASCII digits, any
// number of them (spec); a value with anything else is ignored.
func retryDelay(v []byte) (time.Duration, bool) {
	if len(v) == 0 {
		return 0, false
	}
	const maxMS = uint64(maxRetry / time.Millisecond)
	var ms uint64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		ms = min(ms*10+uint64(c-'0'), maxMS) // ms <= maxMS: ms*10+9 cannot overflow
	}
	return time.Duration(ms) * time.Millisecond, true
}

// eventName is an event's type, without a copy for the one MCP sends.
func eventName(v []byte) string {
	if string(v) == "message" {
		return "message"
	}
	return string(v)
}

var (
	// ErrTooLarge is what an answer larger than Options.MaxMessageBytes
	// fails with (a body, an SSE event or line).
	ErrTooLarge = errors.New("message too large")
	utf8BOM     = []byte("\uFEFF")
)

// lineSlack is what a line may hold on top of a field's value, which
// maxMessageBytes bounds: the field's name and separator ("data: ") and a
// byte order mark. The names the spec knows are 5 bytes at most; a line
// with a longer, unknown name and a value near the bound is refused.
const lineSlack = 64

// readLine reads one line without its end. A line ends with CRLF, LF or a
// CR alone (spec). A CR may be the last byte read so far with its LF still
// to come: that LF is skipped when the next line is read (r.afterCR), so a
// CRLF split across reads is one line end. The line is r's buffer, valid
// until the next read: most lines are parsed where the reader read them.
func (r *sseReader) readLine(bound int) ([]byte, error) {
	// Clamped: a bound near math.MaxInt (no bound, in effect) would
	// overflow to a negative limit that refuses every line.
	limit := bound + min(lineSlack, math.MaxInt-bound)
	r.line = r.line[:0] // a line longer than the buffer is put together here
	scanned := 0        // how much of the buffered bytes has no line end
	for {
		if r.br.Buffered() == scanned {
			if scanned == r.br.Size() {
				// A full buffer without a line end: set aside, to make
				// room.
				buf, _ := r.br.Peek(scanned)
				r.line = append(r.line, buf...)
				r.discard(scanned)
				scanned = 0
			}
			if _, err := r.br.Peek(scanned + 1); err != nil { // read more
				if err == io.EOF && len(r.line)+scanned > 0 {
					// A stream that ends mid-line broke off.
					return nil, io.ErrUnexpectedEOF
				}
				return nil, err
			}
		}
		buf, _ := r.br.Peek(r.br.Buffered())
		if r.afterCR {
			r.afterCR = false
			if buf[0] == '\n' {
				r.discard(1)
				continue
			}
		}
		end, n := r.lineEnd(buf, scanned)
		if end < 0 {
			scanned = len(buf)
			if len(r.line)+scanned > limit {
				return nil, errLineTooLong(bound)
			}
			continue
		}
		line := buf[:end]
		r.afterCR = n == 1 && buf[end] == '\r'
		r.discard(end + n)
		if len(r.line) > 0 {
			r.line = append(r.line, line...)
			line = r.line
		}
		if len(line) > limit {
			return nil, errLineTooLong(bound)
		}
		return line, nil
	}
}

// lineEnd finds the first line end in buf, whose first from bytes hold
// none: its index and its length, 2 for a CRLF, or -1. A CR that is buf's
// last byte counts as a line end alone; the LF that may follow it is not
// read yet. The search for a LF starts after r.lfFree.
func (r *sseReader) lineEnd(buf []byte, from int) (at, n int) {
	lfFrom := max(from, r.lfFree)
	lf := bytes.IndexByte(buf[lfFrom:], '\n')
	if lf < 0 {
		r.lfSearched += len(buf) - lfFrom
		r.lfFree = len(buf)
		if cr := bytes.IndexByte(buf[from:], '\r'); cr >= 0 {
			return from + cr, 1
		}
		return -1, 0
	}
	lf += lfFrom
	r.lfSearched += lf - lfFrom + 1
	r.lfFree = lf
	// There is no LF before lf: a CR before it ends the line, found as
	// soon as the line's end however much is buffered.
	switch cr := bytes.IndexByte(buf[from:lf], '\r'); {
	case cr < 0:
		return lf, 1
	case from+cr == lf-1:
		return lf - 1, 2
	default:
		return from + cr, 1
	}
}

// discard drops n bytes read: r.lfFree counts from where br reads next.
func (r *sseReader) discard(n int) {
	_, _ = r.br.Discard(n)
	r.lfFree = max(r.lfFree-n, 0)
}

func errLineTooLong(bound int) error {
	return fmt.Errorf("%w: a line is longer than %d bytes (bound maxMessageBytes, and %d for a field's name)", ErrTooLarge, bound, lineSlack)
}
