package upstream

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
)

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
