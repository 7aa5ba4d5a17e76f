// Package jsonrpc holds the JSON-RPC 2.0 messages MCP is made of, and the Conn
// interface every upstream transport (Streamable HTTP, stdio) implements.
// Params and results stay raw JSON: nothing is re-typed on the way through.
package jsonrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcp-operator/mcp-operator/internal/rawjson"
	"github.com/mcp-operator/mcp-operator/internal/textcut"
)

// Version is the only JSON-RPC version MCP speaks.
const Version = "2.0"

// Standard and MCP error codes this project looks at.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
	// CodeResourceNotFound is MCP's error for an unknown resource.
	CodeResourceNotFound = -32002
	// CodeHeaderMismatch, CodeMissingClientCapability and
	// CodeUnsupportedProtocolVersion are the 2026-07-28 revision's errors.
	CodeHeaderMismatch             = -32020
	CodeMissingClientCapability    = -32021
	CodeUnsupportedProtocolVersion = -32022
)

// Message is any JSON-RPC message: a request (ID and Method), a notification
// (Method, no ID) or a response (ID and Result or Error).
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
	// Header holds transport headers for this one message (the 2026
	// revision's Mcp-Param-* headers); transports without headers ignore it.
	Header http.Header `json:"-"`
}

// IsResponse tells a response (result or error) from a request or notification.
func (m *Message) IsResponse() bool { return m.Method == "" && (m.Result != nil || m.Error != nil) }

// IsRequest tells a request from the server (it expects an answer).
func (m *Message) IsRequest() bool { return m.Method != "" && len(m.ID) > 0 }

// IsNotification tells a notification (no answer expected).
func (m *Message) IsNotification() bool { return m.Method != "" && len(m.ID) == 0 }

// Error is a JSON-RPC error object. It is also a Go error, so a call that the
// server refused returns it.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string {
	if len(e.Data) > 0 && len(e.Data) < 256 {
		return fmt.Sprintf("server error %d: %s (data: %s)", e.Code, e.Message, e.Data)
	}
	return fmt.Sprintf("server error %d: %s", e.Code, e.Message)
}

// IsCode says whether err is (or wraps) a JSON-RPC error with this code.
func IsCode(err error, code int) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// NewRequest builds a request with a numeric id.
func NewRequest(id int64, method string, params json.RawMessage) *Message {
	return &Message{JSONRPC: Version, ID: json.RawMessage(strconv.FormatInt(id, 10)), Method: method, Params: params}
}

// NewNotification builds a notification.
func NewNotification(method string, params json.RawMessage) *Message {
	return &Message{JSONRPC: Version, Method: method, Params: params}
}

// NewResult answers a server's request with a result.
func NewResult(id json.RawMessage, result json.RawMessage) *Message {
	return &Message{JSONRPC: Version, ID: id, Result: result}
}

// NewErrorResponse answers a server's request with an error.
func NewErrorResponse(id json.RawMessage, code int, msg string) *Message {
	return &Message{JSONRPC: Version, ID: id, Error: &Error{Code: code, Message: msg}}
}

// Encode is json.Marshal(m) without reflection, for the messages on every
// call's path (requests upstream, answers to agents). The raw members are
// compacted into place, and json.Compact refuses one that is not valid JSON
// as Marshal would; unlike Marshal, <, > and & in strings are not escaped
// for HTML (they need not be in JSON).
func Encode(m *Message) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(64 + len(m.Method) + len(m.ID) + len(m.Params) + len(m.Result))
	b.WriteString(`{"jsonrpc":`)
	b.Write(rawjson.AppendString(b.AvailableBuffer(), m.JSONRPC))
	if err := appendRaw(&b, `,"id":`, m.ID); err != nil {
		return nil, err
	}
	if m.Method != "" {
		b.WriteString(`,"method":`)
		b.Write(rawjson.AppendString(b.AvailableBuffer(), m.Method))
	}
	if err := appendRaw(&b, `,"params":`, m.Params); err != nil {
		return nil, err
	}
	if err := appendRaw(&b, `,"result":`, m.Result); err != nil {
		return nil, err
	}
	if e := m.Error; e != nil {
		b.WriteString(`,"error":{"code":`)
		b.Write(strconv.AppendInt(b.AvailableBuffer(), int64(e.Code), 10))
		b.WriteString(`,"message":`)
		b.Write(rawjson.AppendString(b.AvailableBuffer(), e.Message))
		if err := appendRaw(&b, `,"data":`, e.Data); err != nil {
			return nil, err
		}
		b.WriteByte('}')
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// appendRaw writes a raw member (omitted when empty, as omitempty does).
func appendRaw(b *bytes.Buffer, key string, raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	b.WriteString(key)
	if err := json.Compact(b, raw); err != nil {
		return fmt.Errorf("while encoding a JSON-RPC message: %s: %w", strings.Trim(key, `,":`), err)
	}
	return nil
}

// ErrMalformed is what Decode's errors wrap: the bytes are not a JSON-RPC
// message (not JSON, not an object, a bad envelope).
var ErrMalformed = errors.New("malformed JSON-RPC message")

// Decode parses one message and checks the envelope, so a malformed message
// from a server becomes a clear error instead of a call that never ends.
//
// It runs on every message both ways through the bridge, so it reads the
// envelope's members in one walk (rawjson.Members) rather than through
// encoding/json's reflection, with what encoding/json would make of them:
// the last of repeated keys wins, null leaves a string empty and is kept as
// "null" in a raw member. The raw members are sub-slices of one copy of
// data, so the caller may reuse its buffer.
func Decode(data []byte) (*Message, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object: %s", ErrMalformed, Snippet(data))
	}
	if !json.Valid(data) {
		return nil, fmt.Errorf("%w: not valid JSON: %s", ErrMalformed, Snippet(data))
	}
	members, err := rawjson.Members(bytes.Clone(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %v: %s", ErrMalformed, err, Snippet(data))
	}
	var m Message
	for _, f := range members {
		if err := m.set(f); err != nil {
			return nil, fmt.Errorf("%w: %v: %s", ErrMalformed, err, Snippet(data))
		}
	}
	if m.JSONRPC != Version {
		return nil, fmt.Errorf("%w: jsonrpc is %q, want %q: %s", ErrMalformed, m.JSONRPC, Version, Snippet(data))
	}
	if m.Method == "" && m.Result == nil && m.Error == nil {
		return nil, fmt.Errorf("%w: neither a method nor a result or error: %s", ErrMalformed, Snippet(data))
	}
	if bytes.Equal(m.ID, []byte("null")) {
		m.ID = nil
	}
	return &m, nil
}

// set reads one member of the envelope into m. Other members are ignored,
// but not keys that differ from an envelope key only in case: encoding/json
// would match them anyway, and a message whose "METHOD" means something to
// us but nothing to the peer (or the reverse) is a way past checks.
func (m *Message) set(f rawjson.Member) error {
	switch f.Key {
	case "jsonrpc":
		if string(f.Value) == `"`+Version+`"` {
			m.JSONRPC = Version // the one value there is, without a copy
			return nil
		}
		return setString(&m.JSONRPC, f)
	case "method":
		return setString(&m.Method, f)
	// The members share one copy of the message: capped, so that an append
	// to one makes a copy instead of writing over the next.
	case "id":
		m.ID = f.Value[:len(f.Value):len(f.Value)]
	case "params":
		m.Params = f.Value[:len(f.Value):len(f.Value)]
	case "result":
		m.Result = f.Value[:len(f.Value):len(f.Value)]
	case "error":
		if string(f.Value) == "null" {
			m.Error = nil
			return nil
		}
		if m.Error == nil { // a repeated "error" fills the same one, as encoding/json does
			m.Error = &Error{}
		}
		if err := json.Unmarshal(f.Value, m.Error); err != nil {
			return fmt.Errorf("the error member: %w", err)
		}
	default:
		for _, want := range envelopeKeys {
			if strings.EqualFold(f.Key, want) {
				return fmt.Errorf("key %q: JSON-RPC keys are case-sensitive (want %q)", f.Key, want)
			}
		}
	}
	return nil
}

// setString sets *dst to a string member's value; null leaves it as it is.
func setString(dst *string, f rawjson.Member) error {
	if string(f.Value) == "null" {
		return nil
	}
	s, ok := rawjson.String(f.Value)
	if !ok {
		return fmt.Errorf("the %s member is not a string", f.Key)
	}
	if !utf8.ValidString(s) {
		s = string([]rune(s)) // each invalid byte becomes U+FFFD, as encoding/json makes it
	}
	*dst = s
	return nil
}

// envelopeKeys are the member names of a message.
var envelopeKeys = []string{"jsonrpc", "id", "method", "params", "result", "error"}

// Snippet shortens untrusted server output for an error message.
func Snippet(data []byte) string {
	return strconv.Quote(textcut.CutBytes(data, 120))
}

// ReplyTo is this client's answer to a request from the server: ping
// succeeds; everything else (sampling, elicitation, roots) is not offered.
func ReplyTo(m *Message) *Message {
	if m.Method == "ping" {
		return NewResult(m.ID, json.RawMessage(`{}`))
	}
	return NewErrorResponse(m.ID, CodeMethodNotFound, "this client does not offer "+m.Method)
}

// What names a message for error text: its method, or "a response".
func (m *Message) What() string {
	if m.Method != "" {
		return m.Method
	}
	return "a response"
}

// NotificationHandler receives the server's notifications (progress, log
// messages, list changes). It must not block.
type NotificationHandler func(*Message)

// Conn carries JSON-RPC calls to one MCP server. Implementations correlate
// responses with requests, answer the server's own requests (ping) and are
// safe for concurrent use.
type Conn interface {
	// Call sends a request and waits for its response. A JSON-RPC error from
	// the server is returned as the response's Error, not as err; err is a
	// transport failure (or the context ending).
	Call(ctx context.Context, req *Message) (*Message, error)
	// Notify sends a notification.
	Notify(ctx context.Context, n *Message) error
	// SetNotificationHandler sets who gets the server's notifications.
	SetNotificationHandler(h NotificationHandler)
	// SetProtocolVersion tells the transport the version negotiated, for
	// transports that announce it (the HTTP MCP-Protocol-Version header); ""
	// before negotiation.
	SetProtocolVersion(v string)
	// Close ends the connection and releases everything it holds.
	Close() error
}
