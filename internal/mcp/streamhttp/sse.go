package streamhttp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// sseEvent is one dispatched server-sent event.
type sseEvent struct {
	name string
	data []byte
}

// sseCursor is what resuming a stream needs: the last event id seen and the
// reconnection delay the server asked for.
type sseCursor struct {
	lastID   string
	retry    time.Duration
	hasRetry bool
}

// readSSE parses an event stream and calls onEvent for each event until the
// stream ends or onEvent returns done. It returns io.EOF for a stream the
// server ended, another error for a stream that broke off. Ids count once
// their event is dispatched (as in the SSE spec), so an event cut in half is
// asked for again on resumption.
func readSSE(body io.Reader, maxEvent int, cur *sseCursor, onEvent func(sseEvent) (done bool, err error)) error {
	r := bufio.NewReaderSize(body, 32<<10)
	var name string
	var data bytes.Buffer
	var id string
	hasID, hasData := false, false
	for {
		line, err := readSSELine(r, maxEvent)
		if err != nil {
			return err
		}
		if len(line) == 0 { // blank line: dispatch
			if hasID {
				cur.lastID = id
			}
			// An event with empty data (a server's priming event, which
			// only carries an id) is not dispatched, as in the SSE spec.
			if hasData && data.Len() > 0 {
				done, err := onEvent(sseEvent{name: name, data: bytes.Clone(data.Bytes())})
				if err != nil || done {
					return err
				}
			}
			name, hasID, hasData = "", false, false
			data.Reset()
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			name = string(value)
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			if data.Len()+len(value) > maxEvent {
				return fmt.Errorf("%w: an event is larger than %d bytes (bound maxMessageBytes)", errTooLarge, maxEvent)
			}
			data.Write(value)
			hasData = true
		case "id":
			if !bytes.ContainsRune(value, 0) {
				id, hasID = string(value), true
			}
		case "retry":
			if ms, err := strconv.ParseUint(string(value), 10, 31); err == nil {
				cur.retry, cur.hasRetry = time.Duration(ms)*time.Millisecond, true
			}
		}
		// Lines starting with ':' are comments (keep-alives); ignored.
	}
}

var errTooLarge = errors.New("message too large")

// readSSELine reads one line without its end (\n, \r\n or \r-less).
func readSSELine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > max+2 {
			return nil, fmt.Errorf("%w: a line is longer than %d bytes (bound maxMessageBytes)", errTooLarge, max)
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
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
}
