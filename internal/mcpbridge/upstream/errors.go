package upstream

// The classes of a call's failure. A call the server answered with a
// JSON-RPC error returns that *jsonrpc.Error unchanged: it is the server's
// answer. Any other failure is an *Error whose Reason says what happened
// (the reason of tool.failed), decided by classify from the error's type
// alone, never from its text:
//
//	the Conn retired under the call      the Retire reason (restarted, unstable, unavailable)
//	no connection could be made          ReasonUnavailable (dial)
//	the caller's deadline passed         ReasonTimeout
//	the caller gave up                   ReasonCancelled
//	the answer is not MCP, or too large  ReasonInvalid (isMalformed, a 2xx that is not MCP)
//	the connection broke                 ReasonUnstable
//	no session to give this caller       ReasonBusy (agents.go)

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// Reasons a call failed without an answer from the server: the reason of
// tool.failed.
const (
	ReasonRestarted   = "mcp_server_restarted"
	ReasonUnstable    = "mcp_server_unstable"
	ReasonUnavailable = "mcp_server_unavailable"
	ReasonTimeout     = "timeout"
	ReasonCancelled   = "cancelled"
	ReasonInvalid     = "invalid_result"
	// ReasonBusy: the bridge holds its cap of upstream sessions to a
	// session-only server (Options.MaxAgentSessions), none the caller may
	// close: each in use by a call, or another caller's idle one that fair
	// sharing keeps.
	ReasonBusy = "mcp_server_busy"
)

// Error is a call that got no answer from the server.
type Error struct {
	Reason string
	Err    error
}

func (e *Error) Error() string { return e.Reason + ": " + e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// errNoSession is a server that answered initialize without a session id.
var errNoSession = errors.New("initialize was answered without a session id")

// errAgentEnded: the agent session the call was made for has ended.
var errAgentEnded = &Error{Reason: ReasonCancelled, Err: errors.New("the agent session ended")}

// errAtCap: the Conn holds Options.MaxAgentSessions agents' upstream
// sessions, none the caller may close (in use by a call, or another
// caller's that fair sharing keeps).
var errAtCap = errors.New("at the cap of agent sessions, none to close for this caller")

// strict holds what the server answers to the rules the bridge holds agents'
// requests to (rawjson.Check): a repeated key, or two keys that differ only in
// case, could be read one way by the bridge's redaction and injection scan
// (the first value) and another by the agent's parser (the last), so such an
// answer is refused as invalid_result.
func strict(what string, doc json.RawMessage) error {
	if len(doc) == 0 {
		return nil
	}
	if err := rawjson.Check(doc); err != nil {
		return &Error{Reason: ReasonInvalid, Err: fmt.Errorf("the server's %s: %w", what, err)}
	}
	return nil
}

// classify is the *Error a call that failed without the server's answer
// returns: the Conn's own cause (retired) first, then an *Error made
// earlier (a dial, the cap), then the caller's context, then what the
// error itself is. ctx is the caller's context, cctx the call's (ctx
// bounded by the Conn's life).
func (c *Conn) classify(ctx, cctx context.Context, err error) error {
	var e *Error
	switch cause := context.Cause(cctx); {
	case errors.As(cause, &e):
		return e
	case errors.As(err, &e):
		return e
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &Error{Reason: ReasonTimeout, Err: err}
	case ctx.Err() != nil:
		return &Error{Reason: ReasonCancelled, Err: err}
	}
	var httpErr *streamhttp.HTTPError
	if errors.As(err, &httpErr) && httpErr.Status/100 == 2 || isMalformed(err) {
		return &Error{Reason: ReasonInvalid, Err: err}
	}
	return &Error{Reason: ReasonUnstable, Err: err}
}

// isMalformed says whether err is an answer the bridge cannot read as
// MCP: not JSON, not a JSON-RPC message, larger than
// Options.MaxMessageBytes, or a message that is not the answer to the
// request. The server ran (or may have run) the call, and sending it again
// would get the same: invalid_result, not a broken connection.
func isMalformed(err error) bool {
	var se *json.SyntaxError
	return errors.As(err, &se) ||
		errors.Is(err, jsonrpc.ErrMalformed) ||
		errors.Is(err, streamhttp.ErrTooLarge) ||
		errors.Is(err, streamhttp.ErrNotTheAnswer)
}
