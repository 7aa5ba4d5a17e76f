package mcpbridge

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
	"github.com/mcp-operator/mcp-operator/internal/tracing"
)

// TestTraceInJaeger: a real collector. The agent's span (exported over
// OTLP gRPC) and the bridge's (over OTLP HTTP, set up from the OTEL_*
// environment as the manager does) land in Jaeger, and the trace an audit
// event names holds them all: the agent's span, the bridge's request span
// under it, and the stages under that, the call to the server among them.
func TestTraceInJaeger(t *testing.T) {
	j := testpeers.StartJaeger(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	setup := func(service, endpoint, protocol string) *tracing.Provider {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
		// Export every 100 ms, not every 5 s.
		t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
		p, err := tracing.Setup(ctx, service, "test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
		return p
	}
	agentTracing := setup("test-agent", j.OTLPGRPC, tracing.ProtocolGRPC)
	bridgeTracing := setup("mcp-operator-bridge", j.OTLPHTTP, tracing.ProtocolHTTP)

	up := testpeers.GoEverything(t, true)
	server := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.test_simple_text"))
	h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, func(c *Config) {
		c.Tracer = bridgeTracing.Tracer("github.com/mcp-operator/mcp-operator/internal/mcpbridge")
	})
	c := h.connect(t, "alice-token", "/mcp", client.EraStateless)

	actx, agentSpan := agentTracing.Tracer("agent").Start(ctx, "agent turn")
	parent, _ := tracing.Context(actx)
	_, err := c.CallToolParams(testkit.Context(t), json.RawMessage(`{"name":"mcp.everything.test_simple_text","arguments":{},"_meta":{"traceparent":"`+parent+`"}}`))
	agentSpan.End()
	if err != nil {
		t.Fatal(err)
	}

	// From the audit line to the trace.
	events := h.events(t)
	id := lastCallID(events, "mcp.everything.test_simple_text")
	traceID := ""
	for _, ev := range events {
		if ev["toolCallId"] == id && ev["type"] == "tool.completed" {
			traceID, _ = ev["traceId"].(string)
		}
	}
	if want := agentSpan.SpanContext().TraceID().String(); traceID != want {
		t.Fatalf("tool.completed names trace %q, want the agent's %s", traceID, want)
	}

	var spans []testpeers.JaegerSpan
	wantNames := []string{"agent turn", "tools/call mcp.everything.test_simple_text", "authenticate", "decide", "tools/call test_simple_text", "output"}
	// Both exporters send every 100 ms; Jaeger stores a batch within 100 ms.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if spans, err = j.Trace(traceID); err != nil {
			t.Fatal(err)
		}
		if len(spans) >= len(wantNames) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger holds %d spans of the trace after 30 s, want %d: %+v", len(spans), len(wantNames), spans)
		}
	}
	byName := map[string]testpeers.JaegerSpan{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	for _, n := range wantNames {
		if _, ok := byName[n]; !ok {
			t.Fatalf("no span %q in Jaeger's trace: %+v", n, spans)
		}
	}
	agent, request := byName["agent turn"], byName["tools/call mcp.everything.test_simple_text"]
	if agent.Service != "test-agent" || request.Service != "mcp-operator-bridge" {
		t.Errorf("services %q and %q, want test-agent and mcp-operator-bridge", agent.Service, request.Service)
	}
	if !strings.EqualFold(agent.SpanID, agentSpan.SpanContext().SpanID().String()) || !strings.EqualFold(request.ParentSpanID, agent.SpanID) {
		t.Errorf("the bridge's span has parent %s, want the agent's %s", request.ParentSpanID, agent.SpanID)
	}
	if request.Kind != int(trace.SpanKindServer) || request.Attributes["mcp_operator.decision"] != "allow" || request.Attributes["gen_ai.tool.name"] != "mcp.everything.test_simple_text" {
		t.Errorf("the bridge's span in Jaeger: kind %d attributes %v", request.Kind, request.Attributes)
	}
	for _, n := range wantNames[2:] {
		if s := byName[n]; !strings.EqualFold(s.ParentSpanID, request.SpanID) {
			t.Errorf("stage %q has parent %s, want the request's span %s", n, s.ParentSpanID, request.SpanID)
		}
	}
	if forward := byName["tools/call test_simple_text"]; forward.Kind != int(trace.SpanKindClient) || forward.Attributes["mcp_operator.server"] != "everything" {
		t.Errorf("the call to the server in Jaeger: kind %d attributes %v", forward.Kind, forward.Attributes)
	}
}
