package controller

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// Traces of the MCPServer controller (docs/observability.md): each
// reconcile is a span, each of its phases (probe and restart gate among
// them) a child span, and the Events it emits (crashes, restarts, giving
// up) are span events. Only names, reasons and counts: no spec, no status.

// noTracer starts spans that record nothing: a reconciler without a Tracer.
var noTracer = noop.NewTracerProvider().Tracer("")

func (r *MCPServerReconciler) tracer() trace.Tracer {
	if r.Tracer == nil {
		return noTracer
	}
	return r.Tracer
}

// startReconcile starts the span of one reconcile of s.
func (r *MCPServerReconciler) startReconcile(ctx context.Context, s *mcpv1alpha1.MCPServer) (context.Context, trace.Span) {
	return r.tracer().Start(ctx, "reconcile MCPServer", trace.WithAttributes(
		attribute.String("k8s.namespace.name", s.Namespace),
		attribute.String("mcp_operator.server", s.Name),
		attribute.Int64("mcp_operator.generation", s.Generation),
	))
}

// endPhase ends a phase's span: a waiting or stalled server names its
// reason (ProbeFailed, ImagePullFailed, …), another error is the span's.
func endPhase(span trace.Span, res phaseResult, err error) {
	if span.IsRecording() {
		var waiting *waitingError
		var stalled *stalledError
		switch {
		case errors.As(err, &waiting):
			span.SetAttributes(attribute.String("mcp_operator.reason", waiting.reason))
		case errors.As(err, &stalled):
			span.SetAttributes(attribute.String("mcp_operator.reason", stalled.reason))
		case err != nil:
			// The API server's reason, not its message: a validation error
			// quotes the spec's values.
			reason := string(apierrors.ReasonForError(err))
			if reason == "" {
				reason = "error"
			}
			span.SetStatus(codes.Error, reason)
		}
		if res.requeueAfter > 0 {
			span.SetAttributes(attribute.String("mcp_operator.requeue_after", res.requeueAfter.String()))
		}
	}
	span.End()
}

// traceEvents records the Events a reconcile emitted on its span.
func traceEvents(ctx context.Context, events []serverEvent) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	for _, e := range events {
		span.AddEvent(e.reason, trace.WithAttributes(attribute.String("k8s.event.type", e.typ)))
	}
}
