package streamhttp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
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

// sseReader holds the buffers a stream is read with. They are pooled: a
// call answered on SSE used to allocate a 32 KiB reader and a copy of each
// line and event, which on the go-sdk's everything-server was about half of
// the bridge's bytes allocated per call (issue 14).
type sseReader struct {
	br   *bufio.Reader
	body eofSeen // what br reads
	line []byte  // a line longer than br's buffer, put together
	data []byte  // the event's data lines
	id   []byte  // the event's id, until it is dispatched
}

// sseBufferSize is the reader's buffer: a line that fits is parsed where
// it was read, and the body is read in pieces this large.
const sseBufferSize = 32 << 10

// maxPooledBuffer: larger buffers (a large event's) are not kept in the
// pool.
const maxPooledBuffer = 64 << 10

var sseReaders = sync.Pool{New: func() any { return &sseReader{br: bufio.NewReaderSize(nil, sseBufferSize)} }}

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
	defer func() {
		cur.ended = r.body.eof
		r.release()
	}()
	r.body = eofSeen{r: body}
	r.br.Reset(&r.body)
	r.data, r.id = r.data[:0], r.id[:0]
	var name string
	hasID, hasData := false, false
	for {
		line, err := r.readLine(maxEvent)
		if err != nil {
			return err
		}
		if len(line) == 0 { // blank line: dispatch
			if hasID {
				cur.lastID = append(cur.lastID[:0], r.id...)
			}
			// An event with empty data (a server's priming event, which
			// only carries an id) is not dispatched, as in the SSE spec.
			if hasData && len(r.data) > 0 {
				done, err := onEvent(sseEvent{name: name, data: r.data})
				if err != nil || done {
					return err
				}
			}
			name, hasID, hasData = "", false, false
			r.data = r.data[:0]
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			name = eventName(value)
		case "data":
			if hasData {
				r.data = append(r.data, '\n')
			}
			if len(r.data)+len(value) > maxEvent {
				return fmt.Errorf("%w: an event is larger than %d bytes (bound maxMessageBytes)", errTooLarge, maxEvent)
			}
			r.data = append(r.data, value...)
			hasData = true
		case "id":
			if !bytes.ContainsRune(value, 0) {
				r.id, hasID = append(r.id[:0], value...), true
			}
		case "retry":
			if ms, err := strconv.ParseUint(string(value), 10, 31); err == nil {
				cur.retry, cur.hasRetry = time.Duration(ms)*time.Millisecond, true
			}
		}
		// Lines starting with ':' are comments (keep-alives); ignored.
	}
}

// eventName is an event's type, without a copy for the one MCP sends.
func eventName(v []byte) string {
	if string(v) == "message" {
		return "message"
	}
	return string(v)
}

var errTooLarge = errors.New("message too large")

// readLine reads one line without its end (\n, \r\n or \r-less). The line
// is r's buffer, valid until the next read: most lines are parsed where
// the reader read them.
func (r *sseReader) readLine(max int) ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		// Longer than the reader's buffer: put together in r.line.
		r.line = append(r.line[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) && len(r.line) <= max+2 {
			line, err = r.br.ReadSlice('\n')
			r.line = append(r.line, line...)
		}
		line = r.line
	}
	if len(line) > max+2 {
		return nil, fmt.Errorf("%w: a line is longer than %d bytes (bound maxMessageBytes)", errTooLarge, max)
	}
	if err != nil {
		if err == io.EOF && len(line) > 0 {
			// A stream that ends mid-line broke off.
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return bytes.TrimRight(line, "\r\n"), nil
}
