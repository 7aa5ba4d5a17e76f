package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstreamcred"
	"github.com/mcp-operator/mcp-operator/internal/redact"
	"github.com/mcp-operator/mcp-operator/internal/textcut"
	"github.com/mcp-operator/mcp-operator/internal/tracing"
)

// Traces (docs/observability.md): with Config.Tracer set, every JSON-RPC
// request an agent sends is a SERVER span named after OpenTelemetry's
// conventions for MCP ("tools/call mcp.fs.read_file"), a child of the
// agent's span when it sent a W3C trace context, with a child span per
// pipeline stage: authenticate, decide, ask (only when the policy asks),
// the CLIENT span of the call to the server (whose context the server
// gets), and output. Attributes name the request, never its arguments or
// results. Without a tracer none of this runs.

// Span names of the pipeline stages.
const (
	spanAuthenticate = "authenticate"
	spanDecide       = "decide"
	spanAsk          = "ask"
	spanOutput       = "output"
)

// Attribute keys: OpenTelemetry's semantic conventions for MCP and GenAI
// first, then the bridge's own (mcp_operator.*).
const (
	attrMethod       = "mcp.method.name"
	attrSession      = "mcp.session.id"
	attrProtocol     = "mcp.protocol.version"
	attrResourceURI  = "mcp.resource.uri"
	attrRequestID    = "jsonrpc.request.id"
	attrToolName     = "gen_ai.tool.name"
	attrPromptName   = "gen_ai.prompt.name"
	attrOperation    = "gen_ai.operation.name"
	attrErrorType    = "error.type"
	attrTransport    = "network.transport"
	attrStatusCode   = "rpc.response.status_code"
	attrNetProtocol  = "network.protocol.name"
	attrServer       = "mcp_operator.server"
	attrToolCallID   = "mcp_operator.tool_call.id"
	attrDecision     = "mcp_operator.decision"
	attrRule         = "mcp_operator.rule"
	attrRisk         = "mcp_operator.risk"
	attrActor        = "mcp_operator.actor"
	attrResultSize   = "mcp_operator.result.size"
	attrRedactions   = "mcp_operator.redactions"
	attrInjection    = "mcp_operator.injection.findings"
	attrCapped       = "mcp_operator.result.capped"
	attrBlocked      = "mcp_operator.result.blocked"
	operationExecute = "execute_tool"
)

// noSpan is what the stages get when tracing is off: it records nothing
// and costs nothing.
var noSpan = trace.SpanFromContext(context.Background())

// startRequest starts rq's span, in the agent's trace when it sent one,
// and returns the context the request runs in. began is when the HTTP
// request arrived and authenticated when its token was checked: the
// authenticate stage ran before the agent's trace context could be read
// (it may be in the body), so its span is written afterwards with those
// times.
func (b *Bridge) startRequest(ctx context.Context, r *http.Request, rq *request, began, authenticated time.Time) context.Context {
	if b.cfg.Tracer == nil {
		return ctx
	}
	ctx = tracing.Extract(ctx, r.Header, rq.msg.Params)
	method := traceMethod(rq.msg.Method)
	ctx, rq.span = b.cfg.Tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(began),
		trace.WithAttributes(
			attribute.String(attrMethod, method),
			attribute.String(attrRequestID, requestIDAttr(rq.msg.ID)),
			attribute.String(attrProtocol, rq.version),
			attribute.String(attrTransport, "tcp"),
			attribute.String(attrNetProtocol, "http"),
		))
	if id := rq.sessionID(); id != "" {
		rq.span.SetAttributes(attribute.String(attrSession, id))
	}
	_, auth := b.cfg.Tracer.Start(ctx, spanAuthenticate, trace.WithTimestamp(began))
	auth.End(trace.WithTimestamp(authenticated))
	return ctx
}

// requestIDAttr is the agent's JSON-RPC id for jsonrpc.request.id: a
// string without its quotes, cut at 64 bytes (the agent chooses it, of any
// length).
func requestIDAttr(id json.RawMessage) string {
	return traceText(strings.Trim(string(id), `"`), 64)
}

// traceMethod names a request's method in spans: one of the methods the
// bridge serves, else _OTHER (OpenTelemetry's convention): the agent
// chooses it, of any length, and a span name is not a place for that.
func traceMethod(m string) string {
	if m = metricMethod(m); m == "other" {
		return "_OTHER"
	}
	return m
}

// traceText is a string the agent chose (a resource URI, a prompt name, an
// id) as a span may carry it: redacted by shape (a URI may carry a token
// in its query), at most limit bytes, cut on a character boundary and valid
// UTF-8 (OTLP refuses a batch holding invalid UTF-8).
func traceText(s string, limit int) string {
	s = strings.ToValidUTF8(redact.Shapes().String(s, nil), "\uFFFD")
	return textcut.Prefix(s, limit)
}

// endRequest ends rq's span; an error answer is recorded by its JSON-RPC
// code (the span is failed already when a stage said why).
func endRequest(rq *request, resp *jsonrpc.Message) {
	if rq.span == nil {
		return
	}
	if resp != nil && resp.Error != nil && rq.span.IsRecording() {
		code := strconv.Itoa(resp.Error.Code)
		rq.span.SetAttributes(attribute.String(attrStatusCode, code))
		if !rq.failed {
			rq.span.SetAttributes(attribute.String(attrErrorType, code))
			rq.span.SetStatus(codes.Error, "JSON-RPC error "+code)
		}
	}
	rq.span.End()
}

// stage starts the span of one stage of x's pipeline.
func (b *Bridge) stage(x *exchange, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if b.cfg.Tracer == nil || x.rq.span == nil {
		return x.rq.ctx, noSpan
	}
	return b.cfg.Tracer.Start(x.rq.ctx, name, trace.WithSpanKind(kind))
}

// traced runs stage, the stage of x's pipeline named name, in a span of
// its own where the stage has one (spanned): started before it, ended
// after it, with what it did recorded on it (record). The stages
// themselves start and end no span: this is where the decide, ask,
// credential and output spans come from (the CLIENT span of the call
// upstream comes from sendContext, in the forward stage).
func (b *Bridge) traced(x *exchange, name string, stage func() *jsonrpc.Message) *jsonrpc.Message {
	span := noSpan
	if x.spanned(name) {
		_, span = b.stage(x, name, trace.SpanKindInternal)
	}
	answer := stage()
	x.record(span, name, answer)
	span.End()
	return answer
}

// spanned says whether stage name of x has a span: ask only where the
// policy asks, credential only where x carries its caller's own.
func (x *exchange) spanned(name string) bool {
	switch name {
	case spanAsk:
		return x.res.Decision == v1alpha1.DecisionAsk
	case spanCredential:
		return x.callersOwnCredential()
	}
	return true
}

// record records on span what stage name did for x (answer, when not nil,
// ended the request there), and on x's request span what that span
// shows of it.
func (x *exchange) record(span trace.Span, name string, answer *jsonrpc.Message) {
	switch name {
	case spanDecide:
		if answer == nil {
			x.traceDecision(span)
		}
	case spanAsk:
		x.traceOutcome(span, x.outcome)
	case spanCredential:
		if span.IsRecording() {
			span.SetAttributes(attribute.String(attrCredential, string(x.credKind)))
		}
	case spanOutput:
		x.shown.trace(span)
	}
}

// traceTarget names x's span after what it is about, once resolved.
func (x *exchange) traceTarget() {
	span := x.rq.span
	if span == nil || !span.IsRecording() {
		return
	}
	var attrs []attribute.KeyValue
	if x.server != nil {
		attrs = append(attrs, attribute.String(attrServer, x.server.Name))
	}
	target := traceText(x.target, 256)
	switch x.method {
	case methodCall:
		span.SetName(traceMethod(x.rq.msg.Method) + " " + target)
		attrs = append(attrs, attribute.String(attrToolName, target), attribute.String(attrOperation, operationExecute))
	case methodPrompt:
		span.SetName(traceMethod(x.rq.msg.Method) + " " + target)
		attrs = append(attrs, attribute.String(attrPromptName, target))
	case methodRead:
		attrs = append(attrs, attribute.String(attrResourceURI, target))
	}
	span.SetAttributes(attrs...)
}

// traceCallID names the toolCallId of x's audit events on its span, once
// the pipeline is done with it (it is set by settle or resume).
func (x *exchange) traceCallID() {
	if span := x.rq.span; x.id != "" && span != nil && span.IsRecording() {
		span.SetAttributes(attribute.String(attrToolCallID, x.id))
	}
}

// traceDecision records the engine's decision on x's decide span and on
// its request's span.
func (x *exchange) traceDecision(span trace.Span) {
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{
		attribute.String(attrDecision, string(x.res.Decision)),
		attribute.String(attrRule, x.res.SourcedFrom),
		attribute.String(attrRisk, string(x.res.RiskAtDecision)),
	}
	span.SetAttributes(attrs...)
	x.rq.span.SetAttributes(attrs...)
}

// traceOutcome records the resolved decision on the request's span (an
// approval's source replaces the rule that asked) and, when the policy
// asked, how the question ended on the ask span. A 2026-07-28 question
// still open is "pending".
func (x *exchange) traceOutcome(ask trace.Span, o outcome) {
	span := x.rq.span
	if span == nil || !span.IsRecording() {
		return
	}
	decision := string(o.decision)
	if o.pending != nil {
		decision = "pending"
	}
	attrs := []attribute.KeyValue{attribute.String(attrDecision, decision), attribute.String(attrActor, o.actor), attribute.String(attrRule, o.sourcedFrom)}
	span.SetAttributes(attrs...)
	if ask.IsRecording() {
		ask.SetAttributes(attrs...)
		if o.failReason != "" {
			ask.SetAttributes(attribute.String(attrErrorType, o.failReason))
		}
	}
}

// traceFailure marks x's request span failed with reason (a tool.failed
// reason: denied, timeout, mcp_server_restarted, …); the message is the
// bridge's own text, redacted like the agent's answer.
func (x *exchange) traceFailure(reason string) {
	span := x.rq.span
	if span == nil || !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String(attrErrorType, reason))
	span.SetStatus(codes.Error, reason)
	x.rq.failed = true
}

// forwardSpan starts the CLIENT span of the call x makes to its server:
// the context returned carries it to upstream.Conn, which passes it on.
func (b *Bridge) forwardSpan(ctx context.Context, x *exchange, method, upstreamName string) (context.Context, trace.Span) {
	if b.cfg.Tracer == nil || x.rq.span == nil {
		return ctx, noSpan
	}
	name := method
	if upstreamName != "" {
		name += " " + upstreamName
	}
	attrs := []attribute.KeyValue{attribute.String(attrMethod, method), attribute.String(attrToolCallID, x.id)}
	if x.server != nil {
		attrs = append(attrs, attribute.String(attrServer, x.server.Name))
	}
	if x.credKind != upstreamcred.None {
		attrs = append(attrs, attribute.String(attrCredential, string(x.credKind)))
	}
	if method == methodCall {
		attrs = append(attrs, attribute.String(attrToolName, upstreamName), attribute.String(attrOperation, operationExecute))
	}
	return b.cfg.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endForward ends a forward span with the call's error, if any.
func endForward(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		reason := upstream.ReasonUnavailable
		var ue *upstream.Error
		var rpcErr *jsonrpc.Error
		switch {
		case errors.As(err, &ue):
			reason = ue.Reason
		case errors.As(err, &rpcErr):
			// The conventions' error.type of a JSON-RPC error: its code.
			reason = strconv.Itoa(rpcErr.Code)
		}
		span.SetAttributes(attribute.String(attrErrorType, reason))
		span.SetStatus(codes.Error, reason)
	}
	span.End()
}

// outputShown is what the output span shows of what the output pipeline
// did to a result: sizes and counts, never content (and not the whole
// output.Summary, whose counts by kind of secret are kilobytes).
type outputShown struct {
	size, redactions, findings int
	capped, blocked            bool
}

func shownOf(sum output.Summary) outputShown {
	return outputShown{size: sum.SizeIn, redactions: sum.Redactions.Total(), findings: len(sum.Findings), capped: sum.Capped, blocked: sum.Blocked}
}

// trace records o on the output span.
func (o outputShown) trace(span trace.Span) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(
		attribute.Int(attrResultSize, o.size),
		attribute.Int(attrRedactions, o.redactions),
		attribute.Int(attrInjection, o.findings),
		attribute.Bool(attrCapped, o.capped),
		attribute.Bool(attrBlocked, o.blocked),
	)
}

// traceIDs name the sampled span an audit event of rq belongs to. Its
// context, not whether it still records: a parked call's last events
// (parked.go) are written after its request's span has ended.
func (rq *request) traceIDs() audit.Trace {
	if rq.span == nil {
		return audit.Trace{}
	}
	sc := rq.span.SpanContext()
	if !sc.IsSampled() {
		return audit.Trace{}
	}
	return audit.Trace{TraceID: sc.TraceID().String(), SpanID: sc.SpanID().String()}
}
