package tracing

import (
	"context"
	"encoding/json"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// The W3C trace context keys: HTTP header names, and the keys of an MCP
// request's params._meta that carry the same values (OpenTelemetry's
// semantic conventions for MCP).
const (
	KeyTraceparent = "traceparent"
	KeyTracestate  = "tracestate"
)

var w3c = propagation.TraceContext{}

// Extract returns ctx with the remote span context the agent sent:
// params._meta.traceparent (and tracestate) when valid, else the HTTP
// headers'. _meta comes first: it names this one message, where a header
// names the whole HTTP request (a stream may carry many messages).
func Extract(ctx context.Context, header http.Header, params json.RawMessage) context.Context {
	if meta := rawjson.Get(params, "_meta"); meta != nil {
		if parent, _ := rawjson.String(rawjson.Get(meta, KeyTraceparent)); parent != "" {
			carrier := propagation.MapCarrier{KeyTraceparent: parent}
			if state, _ := rawjson.String(rawjson.Get(meta, KeyTracestate)); state != "" {
				carrier[KeyTracestate] = state
			}
			if sc := trace.SpanContextFromContext(w3c.Extract(ctx, carrier)); sc.IsValid() {
				return trace.ContextWithRemoteSpanContext(ctx, sc)
			}
		}
	}
	if header.Get(KeyTraceparent) == "" {
		return ctx
	}
	return w3c.Extract(ctx, propagation.HeaderCarrier(header))
}

// Context is the W3C trace context of ctx's span, "" when it has none:
// what the bridge passes on to the server.
func Context(ctx context.Context) (traceparent, tracestate string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	carrier := propagation.MapCarrier{}
	w3c.Inject(ctx, carrier)
	return carrier[KeyTraceparent], carrier[KeyTracestate]
}
