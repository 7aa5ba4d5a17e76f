package mcpbridge

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-operator/mcp-operator/internal/identity"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
)

// request is one agent request being served.
type request struct {
	ctx context.Context
	id  identity.Identity
	// token is the caller's bearer token as sent, for the stage that gets
	// the upstream credential on the caller's behalf (token exchange)
	// alone: never logged, audited, forwarded or part of the identity.
	token    string
	endpoint string // "" for /mcp, else the server name
	// search: the request came in on SearchPath (search.go).
	search bool
	sess   *session.Session
	// stateless is the 2026-07-28 era (no session).
	stateless bool
	version   string
	// elicitation: the client can answer elicitation/create (form).
	elicitation bool
	// elicitationURL and sampling: it can answer elicitation/create in URL
	// mode and sampling/createMessage (a server's requests are relayed only
	// to a client that can answer them).
	elicitationURL, sampling bool
	msg                      *jsonrpc.Message
	out                      *responder
	// span is the request's trace span (spans.go), nil when tracing is
	// off; failed says a stage recorded why the request failed on it.
	span   trace.Span
	failed bool
}

// sessionID is what audit events name the session by.
func (rq *request) sessionID() string {
	if rq.sess != nil {
		return rq.sess.ID
	}
	return ""
}

// errAgentGone is why an agent's request ended before its answer when its
// HTTP request ended, as what it ended (upstream calls, the handlers of
// their servers' requests) is told (context.Cause) and records it. The
// session gives the other reasons (session.ErrCancelled, ErrEnded).
var errAgentGone = errors.New("the agent's request ended (its connection closed)")

// requestContext is the context an agent's request runs in: ended by
// cancel, or with cause errAgentGone when the agent's HTTP request ends
// first (net/http ends it with a bare context.Canceled).
//
// WithoutCancel also drops agent's deadline: net/http sets none on a
// request's context today; one added later must be carried over here.
func requestContext(agent context.Context) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(agent))
	stop := context.AfterFunc(agent, func() { cancel(errAgentGone) })
	// AfterFunc runs its func in a goroutine, even when agent is done
	// already: end ctx now, so no work starts for an agent gone.
	if agent.Err() != nil {
		cancel(errAgentGone)
	}
	return ctx, func(cause error) {
		stop()
		cancel(cause)
	}
}
