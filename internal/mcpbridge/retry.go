package mcpbridge

import (
	"errors"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
)

// Every error the bridge itself answers a tools/call with, and a request
// refused at the replica's bounds, says in its data whether the request may
// be made again, in two members (docs/bridge.md, "Sending a request
// again", has the table of every reason):
//
//	retryable     true: the request did not run, and making it again is
//	              safe and may be answered otherwise (where it must be
//	              made without its requestState, the message says so);
//	              false: do not send it again as it is, because it may
//	              have run (the message says so) or because it would be
//	              answered the same
//	retryAfterMs  with retryable true, how long to wait before making it
//	              again, where the bridge knows; absent where it does not
//
// The agent decides from these two alone: the reason says why, not what to
// do.

// retryHint is what an answer says about sending its request again.
type retryHint struct {
	retryable bool
	// after is how long to wait, where timed (the bridge knows).
	after time.Duration
	timed bool
}

// Hints the bridge gives on its own.
var (
	// retryNever: did not run, and sending it again is answered the same
	// (or it may have run: the reason says which).
	retryNever = retryHint{}
	// retryAnytime: did not run; nothing tells when it would be answered
	// otherwise.
	retryAnytime = retryHint{retryable: true}
)

// retryIn is a hint to send the request again after d (now, for d <= 0).
func retryIn(d time.Duration) retryHint {
	return retryHint{retryable: true, after: max(d, 0), timed: true}
}

// with adds the hint to an answer's error data and returns it.
func (h retryHint) with(data map[string]any) map[string]any {
	if data == nil {
		data = map[string]any{}
	}
	data["retryable"] = h.retryable
	if h.retryable && h.timed {
		data["retryAfterMs"] = h.after.Milliseconds()
	}
	return data
}

// advice says in words what the hint says: for an answer's message.
func (h retryHint) advice() string {
	switch {
	case !h.retryable:
		return "sending it again as it is gets the same answer"
	case h.timed:
		return "send it again in " + h.after.Round(time.Millisecond).String()
	}
	return "it may be sent again"
}

// notSentError marks a failure of a call the bridge never sent upstream
// (the server left its scope between the decision and the send).
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// neverRan says whether an upstream failure shows that the call never ran
// on its server: the bridge held it back (at the cap of upstream sessions,
// or its server left), or the server refused it unrun (its session had
// ended). Anything else may have reached the server: a connection that
// failed may have failed after the call was written, or while its answer
// was being resumed.
func neverRan(err error) bool {
	var ue *upstream.Error
	if errors.As(err, &ue) && ue.Reason == upstream.ReasonBusy {
		return true
	}
	var ns *notSentError
	return errors.As(err, &ns) || errors.Is(err, streamhttp.ErrNotRun)
}
