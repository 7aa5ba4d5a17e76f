package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/policy"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
	"github.com/mcp-operator/mcp-operator/internal/tracing"
)

// oneCallsHooks runs every tracing hook one tools/call goes through, in the
// pipeline's order, on b: the request's span, its target, the decide and
// ask stages, the call to the server (and the trace context it would be
// sent), the output stage, a failure, the audit ids, the end. rq and x are
// the caller's (made once: what is counted is the hooks' allocations).
func oneCallsHooks(b *Bridge, rq *request, x *exchange) {
	*rq = request{ctx: context.Background(), msg: hookMessage, version: "2026-07-28"}
	rq.ctx = b.startRequest(rq.ctx, hookRequest, rq, hookTime, hookTime)
	*x = exchange{rq: rq, method: methodCall, target: "mcp.fs.read_file", server: hookServer, id: "call-1", res: hookResult}
	x.traceTarget()
	b.traced(x, spanDecide, func() *jsonrpc.Message { return nil })
	x.outcome = outcome{decision: v1alpha1.DecisionAllow, actor: "user", sourcedFrom: "session"}
	b.traced(x, spanAsk, func() *jsonrpc.Message { return nil })
	ctx, forward := b.forwardSpan(rq.ctx, x, methodCall, "read_file")
	_, _ = tracing.Context(ctx) // what upstream.propagate reads
	endForward(forward, nil)
	b.traced(x, spanOutput, func() *jsonrpc.Message {
		x.shown = shownOf(output.Summary{SizeIn: 10})
		return nil
	})
	x.traceFailure("tool_error")
	x.traceCallID()
	_ = rq.traceIDs()
	endRequest(rq, hookAnswer)
}

// The hooks' inputs, made once.
var (
	hookRequest = httptest.NewRequest("POST", "/mcp", nil)
	hookMessage = &jsonrpc.Message{JSONRPC: "2.0", ID: json.RawMessage(`7`), Method: "tools/call",
		Params: json.RawMessage(`{"name":"mcp.fs.read_file","arguments":{},"_meta":{"traceparent":"` + agentTP + `"}}`)}
	hookTime   = time.Unix(1700000000, 0)
	hookServer = &routes.Server{Name: "fs"}
	hookResult = policy.Result{Decision: v1alpha1.DecisionAsk, SourcedFrom: "tools/alice", RiskAtDecision: v1alpha1.RiskRead}
	hookAnswer = &jsonrpc.Message{JSONRPC: "2.0", ID: json.RawMessage(`7`), Error: &jsonrpc.Error{Code: CodeDenied, Message: "denied"}}
)

// TestTracingOffAllocatesNothing: with tracing off (no Tracer), the tracing
// hooks of one call's stages allocate nothing: each is a nil check, with
// no context value, attribute list or span-text work before it. With
// tracing on, the same hooks allocate (the measure can see them).
func TestTracingOffAllocatesNothing(t *testing.T) {
	rq, x := &request{}, &exchange{}
	off := &Bridge{}
	if n := testing.AllocsPerRun(1000, func() { oneCallsHooks(off, rq, x) }); n != 0 {
		t.Errorf("tracing off: one call's tracing hooks allocate %.1f times, want 0", n)
	}

	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	on := &Bridge{cfg: Config{Tracer: provider.Tracer("test")}}
	if n := testing.AllocsPerRun(10, func() { oneCallsHooks(on, rq, x) }); n < 10 {
		t.Errorf("tracing on: one call's tracing hooks allocate %.1f times; want many (six spans): the measure sees nothing", n)
	}
}

// BenchmarkTracingHooks: the time one call's tracing hooks take, off and
// on (spans batched for the no-op exporter), beside the whole call of
// BenchmarkToolCallTracing.
func BenchmarkTracingHooks(b *testing.B) {
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	for name, br := range map[string]*Bridge{"off": {}, "on": {cfg: Config{Tracer: provider.Tracer("test")}}} {
		b.Run("tracing="+name, func(b *testing.B) {
			rq, x := &request{}, &exchange{}
			b.ReportAllocs()
			for range b.N {
				oneCallsHooks(br, rq, x)
			}
		})
	}
}

// BenchmarkToolCallTracing: one tools/call through the whole pipeline, in
// process (agent, bridge), to the go-sdk everything-server as the real
// upstream, with tracing off and on. On, every request is sampled (the
// agent sends a sampled traceparent) and its spans go through the SDK's
// batch processor as in production, to the SDK's no-op exporter: what is
// measured is the bridge's work, not a collector's (make bench-bridge's
// bridge+otel row has Jaeger too). docs/observability.md has the numbers.
func BenchmarkToolCallTracing(b *testing.B) {
	up := testpeers.GoEverything(b, true)
	server := bridgetest.Published(b, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.test_simple_text"))
	params := json.RawMessage(`{"name":"mcp.everything.test_simple_text","arguments":{},"_meta":{"traceparent":"` + agentTP + `"}}`)
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("tracing=%s", map[bool]string{false: "off", true: "on"}[on]), func(b *testing.B) {
			h := newHarness(b, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, func(c *Config) {
				if on {
					provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
					b.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
					c.Tracer = provider.Tracer("github.com/mcp-operator/mcp-operator/internal/mcpbridge")
				}
			})
			c := h.connect(b, "alice-token", "/mcp", client.EraStateless)
			ctx := testkit.Context(b)
			// The first call dials the server: not part of what is measured.
			if _, err := c.CallToolParams(ctx, params); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			// CPU time of this process (agent, bridge and the span
			// processor; not the server's) per call: steadier than wall
			// time on a shared machine.
			cpu0 := testkit.ProcessCPU()
			b.ResetTimer()
			for range b.N {
				if _, err := c.CallToolParams(ctx, params); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((testkit.ProcessCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// TestTraceIDsOfAParkedCallThatTimesOut: a call parked for its agent's
// answer outlives its request's span (the agent got input_required and
// never answered); the events written when it ends at its deadline still
// name the request's trace and span.
func TestTraceIDsOfAParkedCallThatTimesOut(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	const tool = "mcp.everything.test_elicitation"
	up := testpeers.GoEverything(t, false) // the session era: its question parks the call
	srv := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", tool))
	h := newHarness(t, []v1alpha1.MCPServer{srv}, []v1alpha1.ToolPolicy{pol}, func(c *Config) {
		c.CallTimeout = 3 * time.Second
		c.Tracer = provider.Tracer("test")
	})

	c := connectAnswering(t, h.url+"/mcp", "alice-token")
	raw, err := c.CallToolParams(testkit.Context(t), json.RawMessage(`{"name":"`+tool+`","arguments":{"message":"Who are you?"},"_meta":{"traceparent":"`+agentTP+`"}}`))
	if err != nil || !strings.Contains(string(raw), `"input_required"`) {
		t.Fatalf("want the call parked with input_required: %s, %v", raw, err)
	}
	// The request's span ends after its answer is flushed to the agent
	// (endRequest runs deferred): it may end just after the answer arrives.
	var request trace.SpanContext
	testkit.Eventually(t, "the request span tools/call "+tool+" has ended", func() bool {
		for _, s := range spans.Ended() {
			if s.SpanKind() == trace.SpanKindServer && s.Name() == "tools/call "+tool {
				request = s.SpanContext()
			}
		}
		return request.IsValid()
	})

	// Unanswered, the call ends at its deadline (3 s on the bridge's
	// clock); the wait allows for a loaded machine.
	var failed map[string]any
	for deadline := time.Now().Add(60 * time.Second); failed == nil; time.Sleep(100 * time.Millisecond) {
		for _, ev := range h.events(t) {
			if ev["type"] == "tool.failed" {
				failed = ev
			}
		}
		if failed == nil && time.Now().After(deadline) {
			t.Fatal("the parked call did not end within 60 s")
		}
	}
	if failed["reason"] != "timeout" {
		t.Errorf("tool.failed reason %v, want timeout", failed["reason"])
	}
	if failed["traceId"] != agentTrace || failed["spanId"] != request.SpanID().String() {
		t.Errorf("the timed-out call's tool.failed names trace %v span %v, want the request's %s %s",
			failed["traceId"], failed["spanId"], agentTrace, request.SpanID())
	}
}
