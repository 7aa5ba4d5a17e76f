package upstream

import (
	"context"
	"encoding/json"
	"errors"
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

// do runs f with the shared client, bounded by the Conn's life, and turns
// failures into reasons. A transport failure drops the client so that the
// next call dials again; the failed call itself is not retried.
func (c *Conn) do(ctx context.Context, f func(context.Context, *client.Client) (json.RawMessage, error)) (json.RawMessage, error) {
	return c.doOn(ctx, nil, f)
}

// doOn is do with the client clientFor picks for agent. A call the server
// refused unrun is sent once more: when the session a session-era agent's
// call took had ended (the server expired or forgot it), in a new session;
// when the refusal says the server no longer speaks the era the Conn
// learned (it was upgraded or replaced behind its URL), once the Conn
// learned it again.
func (c *Conn) doOn(ctx context.Context, agent *Agent, f func(context.Context, *client.Client) (json.RawMessage, error)) (json.RawMessage, error) {
	c.begin()
	defer c.end()
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(c.life, func() { cancel(context.Cause(c.life)) })
	defer stop()
	// resent: the call was sent and refused once (it is not sent a third
	// time); relearned: a failure to take a client (nothing sent) had the
	// server learned again, once.
	resent, relearned := false, false
	for {
		// A refusal for its era on the client taken now sends the call
		// again only if the server was learned again since the take (by
		// another call): eras counts the relearns before it. A relearn
		// clientFor ran for this call (its agent's session opened without
		// an id) is not another's, so eras is read again after it. A
		// failure to take a client counts from before the take, that
		// relearn included: it found the server changed (keeping only
		// sessions now), and the call starts again.
		before := c.eras.Load()
		cli, l, ownRelearn, err := c.clientFor(cctx, agent)
		if err != nil {
			if !relearned && eraRefused(nil, err) && c.relearn(cctx, before) {
				relearned = true
				continue
			}
			return nil, c.classify(ctx, cctx, err)
		}
		eras := before
		if ownRelearn {
			eras = c.eras.Load()
		}
		res, err := f(cctx, cli)
		if !resent && err != nil && ctx.Err() == nil {
			switch {
			case errors.Is(err, streamhttp.ErrNotRun) && agent != nil:
				c.drop(l, cli)
				c.release(l, cli)
				resent = true
				continue
			case eraRefused(cli, err) && c.relearn(cctx, eras):
				c.release(l, cli)
				resent = true
				continue
			}
		}
		res, err = c.answer(ctx, cctx, l, cli, res, err)
		c.release(l, cli)
		return res, err
	}
}

// answer is what a call on cli, taken from l, returns to its caller.
func (c *Conn) answer(ctx, cctx context.Context, l *line, cli *client.Client, res json.RawMessage, err error) (json.RawMessage, error) {
	if err == nil {
		return res, strict("result", res)
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		if err := strict("error data", rpcErr.Data); err != nil {
			return nil, err
		}
		return nil, rpcErr
	}
	// Only a broken connection is dropped: the caller giving up (cancel,
	// deadline) says nothing about it, and dropping the shared connection
	// ends its session under every other call in flight.
	var limit *client.LimitError
	if !errors.As(err, &limit) && ctx.Err() == nil {
		c.drop(l, cli)
	}
	return nil, c.classify(ctx, cctx, err)
}
