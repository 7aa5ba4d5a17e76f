package mcpbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/metrics"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// Traces through the bridge, recorded in process by the SDK's span
// recorder, with the go-sdk everything-server as the real upstream behind
// a reverse proxy that records the trace context each tools/call brought
// (the server itself does not report what it was sent).

const (
	agentTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	agentSpan  = "00f067aa0ba902b7"
	agentTP    = "00-" + agentTrace + "-" + agentSpan + "-01"
	// Another agent span, for a header that _meta must win over.
	otherTP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
)

// seenCall is what the upstream got with one tools/call.
type seenCall struct {
	header, meta, state string
}

// traceRecorder is a reverse proxy in front of a server that records the
// trace context of the tools/call requests going through.
type traceRecorder struct {
	URL string
	mu  sync.Mutex
	got []seenCall
}

func recordTraces(t *testing.T, upstreamURL string) *traceRecorder {
	t.Helper()
	u, err := url.Parse(upstreamURL)
	if err != nil {
		t.Fatal(err)
	}
	rec := &traceRecorder{}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if m, _ := rawjson.String(rawjson.Get(body, "method")); m == "tools/call" {
				meta := rawjson.Get(rawjson.Get(body, "params"), "_meta")
				seen := seenCall{header: r.Header.Get("traceparent")}
				seen.meta, _ = rawjson.String(rawjson.Get(meta, "traceparent"))
				seen.state, _ = rawjson.String(rawjson.Get(meta, "tracestate"))
				rec.mu.Lock()
				rec.got = append(rec.got, seen)
				rec.mu.Unlock()
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rec.URL = srv.URL + u.Path
	return rec
}

func (r *traceRecorder) calls() []seenCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]seenCall(nil), r.got...)
}

// tracedBridge is a bridge with tracing on (recorded) or off, in front of
// the everything-server, and a policy for alice: test_simple_text and
// json_schema_2020_12_tool allowed, test_image_content asked.
type tracedBridge struct {
	*harness
	spans *tracetest.SpanRecorder
	up    *traceRecorder
}

func newTracedBridge(t *testing.T, on bool) *tracedBridge {
	t.Helper()
	return newTracedBridgeTo(t, on, testpeers.GoEverything(t, true).URL)
}

func newTracedBridgeTo(t *testing.T, on bool, upstreamURL string) *tracedBridge {
	t.Helper()
	spans := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	up := recordTraces(t, upstreamURL)
	server := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice")},
		rule("allow", "mcp.everything.test_simple_text", "mcp.everything.json_schema_2020_12_tool", "mcp.everything.echo"),
		rule("ask", "mcp.everything.test_image_content"))
	h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, func(c *Config) {
		c.Metrics = metrics.New(prometheus.NewRegistry(), func() float64 { return 0 }, func() float64 { return 0 })
		if on {
			c.Tracer = provider.Tracer("bridge-test")
		}
	})
	return &tracedBridge{harness: h, spans: spans, up: up}
}

// agent connects alice in the stateless era, sending header with every
// HTTP request.
func (tb *tracedBridge) agent(t *testing.T, header http.Header) *client.Client {
	t.Helper()
	conn, err := streamhttp.New(streamhttp.Options{URL: tb.url + "/mcp", BearerToken: "alice-token", Header: header})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Connect(testkit.Context(t), conn, client.Options{Era: client.EraStateless, ClientName: "traced-agent"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// requestSpan is the one SERVER span named name; its stages are the spans
// whose parent it is, by name.
func (tb *tracedBridge) requestSpan(t *testing.T, name string) (sdktrace.ReadOnlySpan, map[string]sdktrace.ReadOnlySpan) {
	t.Helper()
	// The request's span ends after its answer is written, so it may end
	// just after the agent has the answer.
	var found []sdktrace.ReadOnlySpan
	testkit.Eventually(t, "the span "+name+" ended", func() bool {
		found = found[:0]
		for _, s := range tb.spans.Ended() {
			if s.Name() == name && s.SpanKind() == trace.SpanKindServer {
				found = append(found, s)
			}
		}
		return len(found) > 0
	})
	if len(found) != 1 {
		t.Fatalf("%d SERVER spans named %q, want 1; spans: %v", len(found), name, spanNames(tb.spans.Ended()))
	}
	req := found[0]
	stages := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range tb.spans.Ended() {
		if s.Parent().SpanID() == req.SpanContext().SpanID() {
			if _, dup := stages[s.Name()]; dup {
				t.Fatalf("two %q stages under %q", s.Name(), name)
			}
			stages[s.Name()] = s
		}
	}
	return req, stages
}

func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.String()
	}
	return out
}

// wantAttrs fails unless s has each of want's attributes with its value.
func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[string]string) {
	t.Helper()
	got := attrs(s)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("span %q: %s = %q, want %q (all: %v)", s.Name(), k, got[k], v, got)
		}
	}
}

// wantNames fails unless the stages are exactly names.
func wantNames(t *testing.T, stages map[string]sdktrace.ReadOnlySpan, names ...string) {
	t.Helper()
	if len(stages) != len(names) {
		t.Errorf("stages %v, want %v", keys(stages), names)
	}
	for _, n := range names {
		if _, ok := stages[n]; !ok {
			t.Errorf("no %q stage among %v", n, keys(stages))
		}
	}
}

func keys(m map[string]sdktrace.ReadOnlySpan) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestTraceOfAnAllowedCall: a call whose agent sends a traceparent header
// is one SERVER span in the agent's trace, with a span per stage, and the
// server is sent the context of the bridge's forward span in both the HTTP
// header and params._meta. The audit events name the trace.
func TestTraceOfAnAllowedCall(t *testing.T) {
	tb := newTracedBridge(t, true)
	c := tb.agent(t, http.Header{"Traceparent": {agentTP}})
	if _, err := c.CallTool(testkit.Context(t), "mcp.everything.test_simple_text", nil); err != nil {
		t.Fatal(err)
	}

	req, stages := tb.requestSpan(t, "tools/call mcp.everything.test_simple_text")
	if got := req.SpanContext().TraceID().String(); got != agentTrace {
		t.Errorf("trace %s, want the agent's %s", got, agentTrace)
	}
	if got := req.Parent().SpanID().String(); got != agentSpan || !req.Parent().IsRemote() {
		t.Errorf("parent %s (remote %v), want the agent's span %s", got, req.Parent().IsRemote(), agentSpan)
	}
	wantAttrs(t, req, map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "mcp.everything.test_simple_text", "gen_ai.operation.name": "execute_tool",
		"mcp.protocol.version": client.StatelessVersion, "network.transport": "tcp", "mcp_operator.server": "everything",
		"mcp_operator.decision": "allow", "mcp_operator.rule": "policy:tools/alice#rules[0]", "mcp_operator.risk": "network",
	})
	wantNames(t, stages, "authenticate", "decide", "tools/call test_simple_text", "output")
	wantAttrs(t, stages["decide"], map[string]string{"mcp_operator.decision": "allow", "mcp_operator.rule": "policy:tools/alice#rules[0]", "mcp_operator.risk": "network"})
	forward := stages["tools/call test_simple_text"]
	if forward.SpanKind() != trace.SpanKindClient {
		t.Errorf("the forward span is %v, want CLIENT", forward.SpanKind())
	}
	wantAttrs(t, forward, map[string]string{"gen_ai.tool.name": "test_simple_text", "mcp_operator.server": "everything"})
	out := attrs(stages["output"])
	if out["mcp_operator.result.size"] == "0" || out["mcp_operator.result.size"] == "" || out["mcp_operator.redactions"] != "0" || out["mcp_operator.injection.findings"] != "0" {
		t.Errorf("output stage attributes %v", out)
	}

	// The server was sent the forward span's context, not the agent's.
	want := "00-" + agentTrace + "-" + forward.SpanContext().SpanID().String() + "-01"
	calls := tb.up.calls()
	if len(calls) != 1 || calls[0].header != want || calls[0].meta != want {
		t.Errorf("the server got %+v, want traceparent %s in the header and in _meta", calls, want)
	}

	// Every event of the call names the request's span.
	events := tb.events(t)
	id := lastCallID(events, "mcp.everything.test_simple_text")
	if attrs(req)["mcp_operator.tool_call.id"] != id {
		t.Errorf("tool_call.id %q, want the events' %q", attrs(req)["mcp_operator.tool_call.id"], id)
	}
	n := 0
	for _, ev := range events {
		if ev["toolCallId"] != id {
			continue
		}
		n++
		if ev["traceId"] != agentTrace || ev["spanId"] != req.SpanContext().SpanID().String() {
			t.Errorf("%s names trace %v span %v, want %s %s", ev["type"], ev["traceId"], ev["spanId"], agentTrace, req.SpanContext().SpanID())
		}
	}
	if n != 6 {
		t.Errorf("%d events of the call, want 6", n)
	}
}

// TestTraceContextFromMeta: params._meta.traceparent makes the parent, over
// a header naming another trace; the agent's _meta value does not reach
// the server, and nor does its tracestate.
func TestTraceContextFromMeta(t *testing.T) {
	tb := newTracedBridge(t, true)
	c := tb.agent(t, http.Header{"Traceparent": {otherTP}})
	params := `{"name":"mcp.everything.test_simple_text","arguments":{},"_meta":{"traceparent":"` + agentTP + `","tracestate":"agent=secret-ish"}}`
	if _, err := c.CallToolParams(testkit.Context(t), json.RawMessage(params)); err != nil {
		t.Fatal(err)
	}
	req, stages := tb.requestSpan(t, "tools/call mcp.everything.test_simple_text")
	if req.Parent().TraceID().String() != agentTrace || req.Parent().SpanID().String() != agentSpan {
		t.Errorf("parent %s/%s, want the _meta's %s/%s", req.Parent().TraceID(), req.Parent().SpanID(), agentTrace, agentSpan)
	}
	forward := stages["tools/call test_simple_text"]
	want := "00-" + agentTrace + "-" + forward.SpanContext().SpanID().String() + "-01"
	calls := tb.up.calls()
	if len(calls) != 1 || calls[0].meta != want || calls[0].header != want {
		t.Fatalf("the server got %+v, want %s both ways", calls, want)
	}
	// The W3C rules carry tracestate on with the trace: the bridge's span
	// inherits it, so it is the same list, now as the bridge's.
	if calls[0].state != "agent=secret-ish" {
		t.Errorf("tracestate %q, want the trace's", calls[0].state)
	}
}

// TestTraceOfRefusals: a denied call has no forward or output stage and
// ends with error.type denied; an asked call no one can be asked about has
// an ask stage that ends approval_unavailable.
func TestTraceOfRefusals(t *testing.T) {
	tb := newTracedBridge(t, true)
	c := tb.agent(t, nil)
	if _, err := c.CallTool(testkit.Context(t), "mcp.everything.test_audio_content", nil); rpcCode(err) != CodeDenied {
		t.Fatalf("want a denial, got %v", err)
	}
	req, stages := tb.requestSpan(t, "tools/call mcp.everything.test_audio_content")
	wantNames(t, stages, "authenticate", "decide")
	wantAttrs(t, req, map[string]string{"mcp_operator.decision": "deny", "mcp_operator.rule": "default", "error.type": "denied", "rpc.response.status_code": "-32010"})
	if req.Status().Code.String() != "Error" {
		t.Errorf("status %v, want Error", req.Status())
	}
	if req.Parent().IsValid() {
		t.Errorf("a request without trace context has parent %v, want a new trace", req.Parent())
	}

	if _, err := c.CallTool(testkit.Context(t), "mcp.everything.test_image_content", nil); rpcCode(err) != CodeDenied {
		t.Fatalf("want a denial, got %v", err)
	}
	req, stages = tb.requestSpan(t, "tools/call mcp.everything.test_image_content")
	wantNames(t, stages, "authenticate", "decide", "ask")
	wantAttrs(t, stages["decide"], map[string]string{"mcp_operator.decision": "ask"})
	wantAttrs(t, stages["ask"], map[string]string{"mcp_operator.decision": "deny", "mcp_operator.actor": "bridge", "error.type": "approval_unavailable"})
	wantAttrs(t, req, map[string]string{"mcp_operator.decision": "deny", "error.type": "approval_unavailable"})
	if n := len(tb.up.calls()); n != 0 {
		t.Errorf("%d refused calls reached the server", n)
	}

	// A request refused before any stage: its error code is the reason.
	_, err := c.CallTool(testkit.Context(t), "mcp.everything.no_such_tool", nil)
	code := rpcCode(err)
	if code == 0 {
		t.Fatalf("an unknown tool: %v, want a JSON-RPC error", err)
	}
	req, stages = tb.requestSpan(t, "tools/call")
	wantNames(t, stages, "authenticate")
	wantAttrs(t, req, map[string]string{"error.type": strconv.Itoa(code), "rpc.response.status_code": strconv.Itoa(code)})
	if req.Status().Code.String() != "Error" {
		t.Errorf("status %v, want Error", req.Status())
	}
}

// TestTraceCarriesNoArgumentsOrResults: no span attribute holds a value of
// the call's arguments or of its result.
func TestTraceCarriesNoArgumentsOrResults(t *testing.T) {
	tb := newTracedBridge(t, true)
	c := tb.agent(t, nil)
	const marker = "argument-marker-7f3a"
	res, err := c.CallTool(testkit.Context(t), "mcp.everything.json_schema_2020_12_tool", json.RawMessage(`{"name":"`+marker+`","email":"`+marker+`@example.com"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CallTool(testkit.Context(t), "mcp.everything.test_simple_text", nil); err != nil {
		t.Fatal(err)
	}
	result := firstText(t, res)
	tb.requestSpan(t, "tools/call mcp.everything.json_schema_2020_12_tool")
	tb.requestSpan(t, "tools/call mcp.everything.test_simple_text")
	for _, s := range tb.spans.Ended() {
		for k, v := range attrs(s) {
			if strings.Contains(v, marker) || (len(result) > 8 && strings.Contains(v, result)) || strings.Contains(v, "simple text response") {
				t.Errorf("span %q attribute %s = %q carries the call's arguments or result", s.Name(), k, v)
			}
		}
	}
}

// TestOutputStage: what the output pipeline did to a result (a token
// redacted, an injection flagged) is counted on the output span and in the
// bridge's metrics; server-everything (npm) echoes the text back.
func TestOutputStage(t *testing.T) {
	tb := newTracedBridgeTo(t, true, testpeers.NodeEverything(t).URL)
	c := tb.agent(t, nil)
	token := "ghp_" + strings.Repeat("A1b2C3", 6)
	if _, err := c.CallTool(testkit.Context(t), "mcp.everything.echo", json.RawMessage(`{"message":"`+token+` `+injected+`"}`)); err != nil {
		t.Fatal(err)
	}
	_, stages := tb.requestSpan(t, "tools/call mcp.everything.echo")
	out := attrs(stages["output"])
	if out["mcp_operator.redactions"] != "1" || out["mcp_operator.injection.findings"] == "0" || out["mcp_operator.result.blocked"] != "false" {
		t.Errorf("output stage attributes %v, want one redaction and findings, not blocked", out)
	}
	m := tb.b.cfg.Metrics
	if n := testutil.ToFloat64(m.Redactions.WithLabelValues("everything")); n != 1 {
		t.Errorf("mcp_bridge_redactions_total %v, want 1", n)
	}
	if n := testutil.ToFloat64(m.InjectionFindings.WithLabelValues("everything")); n < 1 {
		t.Errorf("mcp_bridge_injection_findings_total %v, want some", n)
	}
	for _, s := range tb.spans.Ended() {
		for k, v := range attrs(s) {
			if strings.Contains(v, token) || strings.Contains(v, "delete_all") {
				t.Errorf("span %q attribute %s = %q carries the result", s.Name(), k, v)
			}
		}
	}
}

// TestTracingOff: without a tracer the bridge starts no span, writes no
// trace ids, and passes the agent's _meta trace context on as it is (the
// server's spans stay in the agent's trace); the header is not passed on.
func TestTracingOff(t *testing.T) {
	tb := newTracedBridge(t, false)
	c := tb.agent(t, http.Header{"Traceparent": {otherTP}})
	params := `{"name":"mcp.everything.test_simple_text","arguments":{},"_meta":{"traceparent":"` + agentTP + `"}}`
	if _, err := c.CallToolParams(testkit.Context(t), json.RawMessage(params)); err != nil {
		t.Fatal(err)
	}
	if n := len(tb.spans.Ended()); n != 0 {
		t.Errorf("%d spans with tracing off", n)
	}
	calls := tb.up.calls()
	if len(calls) != 1 || calls[0].meta != agentTP || calls[0].header != "" {
		t.Errorf("the server got %+v, want the agent's _meta traceparent and no header", calls)
	}
	for _, ev := range tb.events(t) {
		if _, ok := ev["traceId"]; ok {
			t.Errorf("%s has a traceId with tracing off", ev["type"])
		}
	}
}

// What the agent chooses reaches a span bounded, valid and redacted: an id cut
// inside a character would make OTLP refuse the whole batch (other agents'
// spans with it), a method of any length must not name a span, and a URI's
// token must not reach the collector as it is.
func TestAgentTextInSpans(t *testing.T) {
	id := requestIDAttr(json.RawMessage(`"a` + strings.Repeat("é", 40) + `"`))
	if len(id) > 64 || !utf8.ValidString(id) || !strings.HasPrefix(id, "aé") {
		t.Errorf("the request id attribute %q (%d bytes)", id, len(id))
	}
	if got := traceMethod(strings.Repeat("x", 5000)); got != "_OTHER" {
		t.Errorf("an unknown method named the span %q", got)
	}
	if got := traceMethod("tools/call"); got != "tools/call" {
		t.Errorf("tools/call named the span %q", got)
	}
	token := "ghp_" + strings.Repeat("k9Q", 12)
	uri := traceText("mcp://fs/file:///data/x?access_token="+token+strings.Repeat("/a", 300), 256)
	if strings.Contains(uri, token) || len(uri) > 256 || !strings.Contains(uri, "[REDACTED:github-token]") {
		t.Errorf("the URI attribute %q", uri)
	}
	if got := traceText("\xff\xfeabc", 256); !utf8.ValidString(got) {
		t.Errorf("invalid UTF-8 reached a span: %q", got)
	}
}
