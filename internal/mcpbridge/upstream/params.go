package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/translate"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
	"github.com/mcp-operator/mcp-operator/internal/tracing"
)

// propagate passes the trace context of ctx's span (the bridge's call) on
// to the server both ways OpenTelemetry's conventions for MCP know: in
// params._meta, which names this one message, and in the headers of the
// HTTP request. Without a span (tracing off) params go as they are.
func propagate(ctx context.Context, params json.RawMessage) (context.Context, json.RawMessage) {
	parent, state := tracing.Context(ctx)
	if parent == "" {
		return ctx, params
	}
	h := http.Header{}
	h.Set(tracing.KeyTraceparent, parent)
	if state != "" {
		h.Set(tracing.KeyTracestate, state)
	}
	return streamhttp.WithCallHeader(ctx, h), translate.TraceContext(params, parent, state)
}

// withProgressToken sets params._meta.progressToken to tok (a JSON value).
func withProgressToken(params json.RawMessage, tok string) (json.RawMessage, error) {
	ms, err := rawjson.Members(params)
	if err != nil {
		return nil, fmt.Errorf("while forwarding tools/call: params: %w", err)
	}
	var meta []rawjson.Member
	out := ms[:0:0]
	for _, m := range ms {
		if m.Key == "_meta" {
			if meta, err = rawjson.Members(m.Value); err != nil {
				return nil, fmt.Errorf("while forwarding tools/call: params._meta: %w", err)
			}
			continue
		}
		out = append(out, m)
	}
	kept := meta[:0:0]
	for _, m := range meta {
		if m.Key != "progressToken" {
			kept = append(kept, m)
		}
	}
	kept = append(kept, rawjson.Member{Key: "progressToken", Value: []byte(tok)})
	out = append(out, rawjson.Member{Key: "_meta", Value: rawjson.AppendObject(nil, kept)})
	return rawjson.AppendObject(nil, out), nil
}
