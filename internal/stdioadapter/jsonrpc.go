package stdioadapter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// The adapter relays messages as the bytes it received. It reads only the
// envelope (jsonrpc, id, method, result, error) and the few params it must
// route by, and it edits a message by splicing one value's bytes, so
// everything else — vendor keys, key order, number spelling, escapes — reaches
// the other side exactly as it was written.

// span is the byte range [start, end) of one JSON value inside a message.
type span struct{ start, end int }

// JSON-RPC error codes of the adapter's own (the standard ones are
// jsonrpc's).
const (
	// codeSessionNotFound is what the TypeScript SDK answers for an unknown
	// Mcp-Session-Id; clients look for the HTTP 404, the code is informative.
	codeSessionNotFound = -32001
	// codeServerGone: the stdio server exited or stopped talking, so the
	// request can never be answered.
	codeServerGone = -32000
)

// objectFields reads one JSON object and returns where the value of each of
// its members is. Names are matched exactly (after JSON unescaping); a name
// that appears twice is an error, because two readers could disagree on
// which one counts.
func objectFields(obj []byte) (map[string]span, error) {
	if !json.Valid(obj) {
		return nil, errors.New("not one valid JSON value")
	}
	ms, err := rawjson.Members(obj)
	if err != nil {
		return nil, err
	}
	fields := make(map[string]span, len(ms))
	for _, m := range ms {
		if _, dup := fields[m.Key]; dup {
			return nil, fmt.Errorf("member %q appears twice", m.Key)
		}
		fields[m.Key] = span{m.Start, m.Start + len(m.Value)}
	}
	return fields, nil
}

// splice returns b with the bytes of sp replaced by repl.
func splice(b []byte, sp span, repl []byte) []byte {
	out := make([]byte, 0, len(b)-(sp.end-sp.start)+len(repl))
	out = append(out, b[:sp.start]...)
	out = append(out, repl...)
	return append(out, b[sp.end:]...)
}

type messageKind int

const (
	kindRequest      messageKind = iota // method and id: needs a response
	kindNotification                    // method, no id
	kindResponse                        // result or error, and id
)

// message is one JSON-RPC message: its exact bytes and where its envelope
// members are.
type message struct {
	raw    []byte
	fields map[string]span
	kind   messageKind
	method string
	id     []byte // raw bytes of the id; nil when the message has none
}

func (m *message) field(name string) ([]byte, bool) {
	sp, ok := m.fields[name]
	if !ok {
		return nil, false
	}
	return m.raw[sp.start:sp.end], true
}

// isError reports whether m is a response carrying an error.
func (m *message) isError() bool {
	_, ok := m.fields["error"]
	return m.kind == kindResponse && ok
}

// withID returns m's bytes with its id replaced.
func (m *message) withID(id []byte) []byte {
	return splice(m.raw, m.fields["id"], id)
}

// parseMessage checks that b is one well-formed JSON-RPC 2.0 message and
// reads its envelope.
func parseMessage(b []byte) (*message, error) {
	fields, err := objectFields(b)
	if err != nil {
		return nil, err
	}
	m := &message{raw: b, fields: fields}
	version, ok := m.field("jsonrpc")
	if !ok || string(version) != `"2.0"` {
		return nil, errors.New(`"jsonrpc" must be "2.0"`)
	}
	if id, ok := m.field("id"); ok {
		if !validID(id) {
			return nil, errors.New(`"id" must be a string or a number`)
		}
		m.id = id
	}
	_, hasResult := fields["result"]
	_, hasError := fields["error"]
	if rawMethod, ok := m.field("method"); ok {
		if err := json.Unmarshal(rawMethod, &m.method); err != nil || m.method == "" {
			return nil, errors.New(`"method" must be a non-empty string`)
		}
		if hasResult || hasError {
			return nil, errors.New("a request carries no result or error")
		}
		if params, ok := m.field("params"); ok && params[0] != '{' && params[0] != '[' {
			return nil, errors.New(`"params" must be an object or an array`)
		}
		m.kind = kindNotification
		if m.id != nil {
			m.kind = kindRequest
		}
		return m, nil
	}
	if hasResult == hasError {
		return nil, errors.New("a response carries exactly one of result and error")
	}
	if m.id == nil {
		// An error response to a message the peer could not parse has a null
		// id; there is no one to hand it to.
		return nil, errors.New("a response without an id cannot be routed")
	}
	m.kind = kindResponse
	return m, nil
}

// parseBatch reads a body or line that holds one message or a JSON array of
// messages (a batch, allowed before protocol 2025-06-18).
func parseBatch(b []byte) (msgs []*message, isBatch bool, err error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '[' {
		m, err := parseMessage(oneLine(b))
		if err != nil {
			return nil, false, err
		}
		return []*message{m}, false, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(b, &elems); err != nil {
		return nil, true, err
	}
	if len(elems) == 0 {
		return nil, true, errors.New("empty batch")
	}
	for i, e := range elems {
		m, err := parseMessage(oneLine(e))
		if err != nil {
			return nil, true, fmt.Errorf("batch element %d: %w", i, err)
		}
		msgs = append(msgs, m)
	}
	return msgs, true, nil
}

// validID: MCP ids are strings or numbers (never null).
func validID(id []byte) bool {
	switch c := id[0]; {
	case c == '"':
		return true
	case c == '-' || (c >= '0' && c <= '9'):
		return true
	}
	return false
}

// idKey names an id for map lookups: strings by their decoded value,
// numbers by their spelling.
func idKey(id []byte) string {
	if id[0] == '"' {
		var s string
		if json.Unmarshal(id, &s) == nil {
			return "s:" + s
		}
	}
	return "n:" + string(id)
}

// childSideID parses an id the adapter gave the child (a positive integer).
func childSideID(id []byte) (int64, bool) {
	n, err := strconv.ParseInt(string(id), 10, 64)
	return n, err == nil && n > 0
}

// nestedField finds the value of params.<outer>.<inner> (or params.<outer>
// when inner is empty) in m and returns its span within m.raw.
func (m *message) nestedField(path ...string) (span, bool) {
	sp, ok := m.fields["params"]
	if !ok {
		return span{}, false
	}
	for _, name := range path {
		if m.raw[sp.start] != '{' {
			return span{}, false
		}
		fields, err := objectFields(m.raw[sp.start:sp.end])
		if err != nil {
			return span{}, false
		}
		inner, ok := fields[name]
		if !ok {
			return span{}, false
		}
		sp = span{sp.start + inner.start, sp.start + inner.end}
	}
	return sp, true
}

// stringParam decodes params.<name> as a string.
func (m *message) stringParam(name string) (string, bool) {
	sp, ok := m.nestedField(name)
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(m.raw[sp.start:sp.end], &s) != nil {
		return "", false
	}
	return s, true
}

// errorResponse builds a JSON-RPC error response; a nil id is sent as null.
func errorResponse(id []byte, code int, text string) []byte {
	if id == nil {
		id = []byte("null")
	}
	msg, _ := json.Marshal(text)
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`, id, code, msg)
}

// resultResponse builds a JSON-RPC response carrying result.
func resultResponse(id, result []byte) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
}

// cancelledNotification tells the child that the adapter gave up on the
// request it knows as id.
func cancelledNotification(id int64, reason string) []byte {
	r, _ := json.Marshal(reason)
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":%s}}`, id, r)
}

// oneLine makes sure a message holds no raw line break, which would split it
// on the newline-delimited stdio stream (or an SSE data line). JSON allows raw
// line breaks only as whitespace between tokens, so compacting removes them
// and nothing else.
func oneLine(b []byte) []byte {
	if !bytes.ContainsAny(b, "\r\n") {
		return b
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b // parsed before, so this does not happen
	}
	return buf.Bytes()
}
