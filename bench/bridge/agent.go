package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
)

// agent is one agent session, as the bench drives it on every path: the
// client an agent would use, connected, one session and one HTTP
// connection of its own.
type agent interface {
	// CallTool calls tool once. Its result is read only by callChecked:
	// what an agent does with an answer is not the hop's cost.
	CallTool(ctx context.Context, tool string, args json.RawMessage) (toolResult, error)
	// Close ends the session (DELETE) and drops the agent's connection.
	Close() error
}

// toolResult is a tools/call result in its client's own form: JSON
// encodes it for checkAnswer, off the timed calls (mcp-go's client decodes
// results into its types, ours keeps the bytes).
type toolResult interface {
	JSON() (json.RawMessage, error)
}

// agentsDo says, for the run's output, which client each era's agents are
// and what each sends on the wire.
var agentsDo = "2025-11-25: mcp-go " + moduleVersion("github.com/mark3labs/mcp-go") + "'s Streamable HTTP client, " +
	"one session and one HTTP connection each: POST initialize (the version pinned, so no server/discover), POST notifications/initialized, " +
	"no GET listening stream, one POST per call (Mcp-Session-Id, Mcp-Protocol-Version, Accept: application/json, text/event-stream), " +
	"DELETE when done (without the headers it was given, so without its token); it stops reading an SSE answer at the response, " +
	"so its connection is dropped when the stream's end had not arrived yet; " +
	"2026-07-28: our own client (internal/mcp/client), one HTTP connection each: POST server/discover, then one POST per call " +
	"(MCP-Protocol-Version, Mcp-Method, Mcp-Name, the client's info and capabilities in _meta)"

// moduleVersion is the version of a module this binary was built with.
func moduleVersion(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == path {
				return m.Version
			}
		}
	}
	return "(version unknown)"
}

// connect opens an agent session of era on url. Session-era agents are
// mcp-go's Streamable HTTP client: software
// nobody here wrote, as a new user would connect it. 2026-07-28 agents are
// our own client (internal/mcp/client).
func connect(url, token string, era client.Era) (agent, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if era == client.EraSession {
		return connectMCPGo(ctx, url, token)
	}
	c, err := connectOwn(ctx, url, token, era)
	if err != nil {
		return nil, err
	}
	return ownAgent{c}, nil
}

// connectOwn connects our own client in a session of era on url.
func connectOwn(ctx context.Context, url, token string, era client.Era) (*client.Client, error) {
	conn, err := streamhttp.New(streamhttp.Options{URL: url, BearerToken: token})
	if err != nil {
		return nil, err
	}
	c, err := client.Connect(ctx, conn, client.Options{Era: era, ClientName: "bench"})
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// ownAgent is our own client (internal/mcp/client over streamhttp, alone on
// its pool of HTTP connections).
type ownAgent struct{ c *client.Client }

func (a ownAgent) CallTool(ctx context.Context, tool string, args json.RawMessage) (toolResult, error) {
	res, err := a.c.CallTool(ctx, tool, args)
	if err != nil {
		return nil, err
	}
	return rawResult(res), nil
}

func (a ownAgent) Close() error { return a.c.Close() }

type rawResult json.RawMessage

func (r rawResult) JSON() (json.RawMessage, error) { return json.RawMessage(r), nil }

// mcpgoAgent is mcp-go's Streamable HTTP client in a 2025-11-25 session.
// On the wire, per session: POST initialize (no server/discover: the
// version is pinned), POST notifications/initialized, no GET listening
// stream (mcp-go opens one only with WithContinuousListening), and DELETE
// on Close, which carries none of the headers given with WithHTTPHeaders
// (the bridge ends the session its sealed id names all the same); per call
// one POST of tools/call with Mcp-Session-Id, Mcp-Protocol-Version:
// 2025-11-25 and Accept: application/json, text/event-stream. It never
// sends notifications/cancelled over HTTP. It closes an SSE answer's body
// once the response is read: when the stream's end has not come yet, the
// HTTP connection goes with it and the next call dials again (a third of
// the calls made directly to the everything-server; none on JSON answers).
type mcpgoAgent struct {
	c       *mcpgoclient.Client
	tr      *http.Transport
	deletes *deleteWatch
}

// deleteWatch is the mcp-go agent's RoundTripper: it keeps the status of
// the session's DELETE. mcp-go's Close returns nil whatever the answer,
// and its logger is discarded here, so a refused DELETE would go unseen
// while its session stayed open on the bridge, counted against the
// caller's cap (--max-caller-sessions), as before the bridge took mcp-go's
// DELETE without its token.
type deleteWatch struct {
	next http.RoundTripper
	// status is the last DELETE's: 0 before one was sent, -1 when it got
	// no answer.
	status atomic.Int32
}

func (d *deleteWatch) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := d.next.RoundTrip(r)
	if r.Method == http.MethodDelete {
		status := int32(-1)
		if err == nil {
			status = int32(resp.StatusCode)
		}
		d.status.Store(status)
	}
	return resp, err
}

// refusedDeletes counts the mcp-go agents' DELETEs refused in this run.
var refusedDeletes atomic.Int64

// refused is why the agent's DELETE failed, nil when it was answered 2xx
// or none was sent (a session that never opened).
func (d *deleteWatch) refused() error {
	switch status := d.status.Load(); {
	case status == 0 || status/100 == 2:
		return nil
	case status < 0:
		return fmt.Errorf("mcp-go's DELETE of its session got no answer (refused DELETEs in this run: %d)", refusedDeletes.Add(1))
	default:
		return fmt.Errorf("mcp-go's DELETE of its session was refused: status %d (refused DELETEs in this run: %d)", status, refusedDeletes.Add(1))
	}
}

// connectMCPGo connects mcp-go's client as its NewStreamableHttpClient
// does, with what an agent in a cluster adds: its bearer token, the 2025-11-25 era pinned, and
// an http.Client of its own, so that each session is one connection (the
// default client shares http.DefaultTransport, which keeps 2 idle
// connections per host: 32 sessions would dial again and again).
func connectMCPGo(ctx context.Context, url, token string) (agent, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	deletes := &deleteWatch{next: tr}
	t, err := mcpgotransport.NewStreamableHTTP(url,
		mcpgotransport.WithHTTPBasicClient(&http.Client{Transport: deletes}),
		mcpgotransport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}),
		// The calls' errors come back from CallTool, a refused DELETE's
		// from Close (deleteWatch).
		mcpgotransport.WithHTTPLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return nil, err
	}
	c := mcpgoclient.NewClient(t, mcpgoclient.WithProtocolVersion(mcpgo.LATEST_LEGACY_PROTOCOL_VERSION))
	a := &mcpgoAgent{c: c, tr: tr, deletes: deletes}
	if err := c.Start(ctx); err != nil {
		a.Close()
		return nil, err
	}
	var init mcpgo.InitializeRequest
	init.Params.ClientInfo = mcpgo.Implementation{Name: "bench", Version: "1"}
	res, err := c.Initialize(ctx, init)
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("mcp-go's client could not initialize a session: %w", err)
	}
	if res.ProtocolVersion != mcpgo.LATEST_LEGACY_PROTOCOL_VERSION {
		a.Close()
		return nil, fmt.Errorf("mcp-go's client negotiated %s, want %s", res.ProtocolVersion, mcpgo.LATEST_LEGACY_PROTOCOL_VERSION)
	}
	return a, nil
}

func (a *mcpgoAgent) CallTool(ctx context.Context, tool string, args json.RawMessage) (toolResult, error) {
	var req mcpgo.CallToolRequest
	req.Params.Name = tool
	if len(args) > 0 {
		// The same bytes on the wire as our client's; nil leaves
		// "arguments" out, as mcp-go does for a call without any.
		req.Params.Arguments = args
	}
	res, err := a.c.CallTool(ctx, req)
	if err != nil {
		return nil, err
	}
	return mcpgoResult{res}, nil
}

// Close sends the session's DELETE, then drops the agent's idle
// connection, which mcp-go's Close leaves to the transport's idle timeout:
// a bench's thousand closed sessions must not hold the bridge's goroutines.
// A refused DELETE is Close's error, and is printed: the bench's callers
// close agents in defers that drop the error.
func (a *mcpgoAgent) Close() error {
	err := a.c.Close()
	a.tr.CloseIdleConnections()
	if err == nil {
		err = a.deletes.refused()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
	}
	return err
}

type mcpgoResult struct{ r *mcpgo.CallToolResult }

func (r mcpgoResult) JSON() (json.RawMessage, error) { return json.Marshal(r.r) }
