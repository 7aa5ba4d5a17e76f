package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// callState is what a Conn keeps of its calls in flight: the progress
// notifications each waits for, by the token the Conn gave it.
type callState struct {
	progress sync.Map // upstream progress token → func(params json.RawMessage)
	tokens   atomic.Int64
}

// Call sends one request of the bridge's own (not tools/call) on the
// shared connection and returns its raw result. A JSON-RPC error from the
// server comes back as a *jsonrpc.Error; a call without an answer as an
// *Error.
func (c *Conn) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	return c.CallFor(ctx, nil, method, params)
}

// CallFor is Call made for an agent session (nil: a 2026-07-28 agent or
// the bridge itself), which takes its own upstream session where the
// server keeps sessions.
func (c *Conn) CallFor(ctx context.Context, agent *Agent, method string, params json.RawMessage) (json.RawMessage, error) {
	ctx, params = propagate(ctx, params)
	return c.doOn(ctx, agent, func(ctx context.Context, cli *client.Client) (json.RawMessage, error) {
		return cli.Call(ctx, method, params)
	})
}

// ListAll lists every item of a paginated list method.
func (c *Conn) ListAll(ctx context.Context, method, key string) ([]json.RawMessage, error) {
	items, _, err := c.ListAllFresh(ctx, method, key)
	return items, err
}

// ListAllFresh is ListAll that also says how long the server said the list
// is fresh.
func (c *Conn) ListAllFresh(ctx context.Context, method, key string) ([]json.RawMessage, client.Freshness, error) {
	var items []json.RawMessage
	var fresh client.Freshness
	_, err := c.do(ctx, func(ctx context.Context, cli *client.Client) (json.RawMessage, error) {
		var err error
		items, fresh, err = cli.ListAllFresh(ctx, method, key, client.Limits{})
		return nil, err
	})
	for i, item := range items {
		if err == nil {
			err = strict(fmt.Sprintf("%s item %d", key, i), item)
		}
	}
	return items, fresh, err
}

// CallHooks receive what the server sends on a call's response stream
// before its result. Each may be nil.
type CallHooks struct {
	// Progress gets the server's progress notifications for the call. The
	// call then carries a progress token of this Conn's own: agents' tokens
	// could collide on the shared connection.
	Progress func(params json.RawMessage)
	// Log gets the log messages (notifications/message).
	Log func(params json.RawMessage)
	// Request answers the server's own requests (elicitation, sampling);
	// without it they are refused.
	Request streamhttp.RequestHandler
	// Agent is the session-era agent session the call is made for (nil
	// for a 2026-07-28 agent): it takes that agent session's own upstream
	// session where the server keeps sessions (agents.go).
	Agent *Agent
}

// CallTool forwards tools/call params (name already the upstream's), with
// what the server sends during the call handed to hooks.
func (c *Conn) CallTool(ctx context.Context, params json.RawMessage, hooks CallHooks) (json.RawMessage, error) {
	if hooks.Log != nil {
		ctx = streamhttp.WithCallNotifications(ctx, func(m *jsonrpc.Message) {
			if m.Method == "notifications/message" {
				hooks.Log(m.Params)
				return
			}
			c.onNotification(m)
		})
	}
	if hooks.Request != nil {
		ctx = streamhttp.WithCallRequests(ctx, hooks.Request)
	}
	if hooks.Progress != nil {
		tok := strconv.Quote("bridge-" + strconv.FormatInt(c.tokens.Add(1), 10))
		var err error
		if params, err = withProgressToken(params, tok); err != nil {
			return nil, err
		}
		c.progress.Store(tok, hooks.Progress)
		defer c.progress.Delete(tok)
	}
	ctx, params = propagate(ctx, params)
	return c.doOn(ctx, hooks.Agent, func(ctx context.Context, cli *client.Client) (json.RawMessage, error) {
		return cli.CallToolParams(ctx, params)
	})
}

func (c *Conn) onNotification(m *jsonrpc.Message) {
	switch m.Method {
	case "notifications/progress":
		tok := rawjson.Get(m.Params, "progressToken")
		if f, ok := c.progress.Load(string(tok)); ok {
			f.(func(json.RawMessage))(m.Params)
		}
	case "notifications/tools/list_changed", "notifications/resources/list_changed", "notifications/prompts/list_changed":
		if c.opts.OnListChanged != nil {
			c.opts.OnListChanged(m.Method)
		}
	case "notifications/resources/updated":
		if c.opts.OnResourceUpdated != nil {
			c.opts.OnResourceUpdated(m.Params)
		}
	}
}
