package mcpbridge

import (
	"context"
	"encoding/json"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
)

// upstreamConn is a server's connection as the request's stages use it:
// the calls alone. routes.Registry keeps each server's *upstream.Conn and
// its life (dialled, retired, drained); a stage only calls through it, so
// a stage test can put a small fake in its place where the fault it needs
// (an answer no real server gives on demand) cannot be had from a real
// one.
type upstreamConn interface {
	// CallFor sends one request other than tools/call, in agent's own
	// upstream session where the server keeps sessions (nil: none).
	CallFor(ctx context.Context, agent *upstream.Agent, method string, params json.RawMessage) (json.RawMessage, error)
	// CallTool forwards tools/call params, the server's messages during
	// the call handed to hooks.
	CallTool(ctx context.Context, params json.RawMessage, hooks upstream.CallHooks) (json.RawMessage, error)
	// ListAllFresh lists every item of a paginated list method, and how
	// long the server said the list stays fresh.
	ListAllFresh(ctx context.Context, method, key string) ([]json.RawMessage, client.Freshness, error)
	// Subscribe makes the server hold a resource subscription (the URI
	// listed by the subscriptions the bridge counts) and Resubscribe has
	// the subscriptions established again after they changed.
	Subscribe(ctx context.Context, uri string) error
	Resubscribe()
}

var _ upstreamConn = (*upstream.Conn)(nil)
