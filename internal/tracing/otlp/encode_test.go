package otlp

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// The generated OTLP types (test-only imports) decode what appendRequest
// wrote: every field of a span, its resource and its scope comes back as
// set, spans are grouped by resource and scope, and a body over 128 bytes
// (a multi-byte length) and one over 16 KiB survive.
func TestEncodingRoundTrips(t *testing.T) {
	traceID := trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	state, err := trace.ParseTraceState("vendor=abc,other=x")
	if err != nil {
		t.Fatal(err)
	}
	sc := func(span byte, remote bool, ts trace.TraceState) trace.SpanContext {
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: trace.SpanID{span, 1, 2, 3, 4, 5, 6, 7}, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: remote})
	}
	res1 := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.37.0", attribute.String("service.name", "bridge"), attribute.Int("replica", 2))
	res2 := resource.NewSchemaless(attribute.String("service.name", "controller"))
	scope1 := instrumentation.Scope{Name: "mcpbridge", Version: "v1.2.3", SchemaURL: "https://scope/schema", Attributes: attribute.NewSet(attribute.Bool("scope.flag", true))}
	scope2 := instrumentation.Scope{Name: "controller"}
	start := time.Unix(1_700_000_000, 123_456_789)
	long := strings.Repeat("x", 20_000)

	full := tracetest.SpanStub{
		Name:        "tools/call mcp.everything.echo",
		SpanContext: sc(1, false, state),
		Parent:      sc(9, true, trace.TraceState{}),
		SpanKind:    trace.SpanKindServer,
		StartTime:   start,
		EndTime:     start.Add(1500 * time.Microsecond),
		Attributes: []attribute.KeyValue{
			attribute.Bool("b", true), attribute.Bool("b.false", false),
			attribute.Int64("i", -42), attribute.Int64("i.zero", 0),
			attribute.Float64("f", 2.5), attribute.String("s", "text"), attribute.String("s.empty", ""),
			attribute.BoolSlice("bs", []bool{true, false}), attribute.Int64Slice("is", []int64{1, -2}),
			attribute.Float64Slice("fs", []float64{0.5, -1}), attribute.StringSlice("ss", []string{"a", ""}),
			attribute.ByteSlice("bytes", []byte{0, 1, 255}),
			attribute.Slice("mixed", attribute.StringValue("m"), attribute.IntValue(7)),
			{Key: "empty"},
			attribute.String("long", long),
		},
		Events: []sdktrace.Event{
			{Name: "approval.asked", Time: start.Add(time.Millisecond), Attributes: []attribute.KeyValue{attribute.String("who", "alice")}, DroppedAttributeCount: 3},
			{Name: "bare", Time: start.Add(2 * time.Millisecond)},
		},
		Links: []sdktrace.Link{
			{SpanContext: sc(7, true, state), Attributes: []attribute.KeyValue{attribute.Int("n", 1)}, DroppedAttributeCount: 2},
		},
		Status:               sdktrace.Status{Code: codes.Error, Description: "mcp_server_unstable"},
		DroppedAttributes:    4,
		DroppedEvents:        5,
		DroppedLinks:         6,
		Resource:             res1,
		InstrumentationScope: scope1,
	}
	otherScope := tracetest.SpanStub{Name: "reconcile", SpanContext: sc(2, false, trace.TraceState{}), SpanKind: trace.SpanKindInternal, StartTime: start, EndTime: start,
		Status: sdktrace.Status{Code: codes.Ok}, Resource: res1, InstrumentationScope: scope2}
	sameScope := tracetest.SpanStub{Name: "decide", SpanContext: sc(3, false, trace.TraceState{}), Parent: sc(1, false, trace.TraceState{}), SpanKind: trace.SpanKindClient,
		Resource: res1, InstrumentationScope: scope1}
	otherResource := tracetest.SpanStub{Name: "probe", SpanContext: sc(4, false, trace.TraceState{}), Resource: res2}

	b := appendRequest(nil, []sdktrace.ReadOnlySpan{full.Snapshot(), otherScope.Snapshot(), sameScope.Snapshot(), otherResource.Snapshot()})
	got := &collectortrace.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(b, got); err != nil {
		t.Fatalf("the request does not decode: %v", err)
	}

	str := func(s string) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
	}
	i64 := func(i int64) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: i}}
	}
	boolean := func(v bool) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v}}
	}
	double := func(v float64) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v}}
	}
	array := func(vs ...*commonpb.AnyValue) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
	}
	kv := func(k string, v *commonpb.AnyValue) *commonpb.KeyValue { return &commonpb.KeyValue{Key: k, Value: v} }
	id := func(span byte) []byte { return []byte{span, 1, 2, 3, 4, 5, 6, 7} }
	nanos := func(t time.Time) uint64 { return uint64(t.UnixNano()) }
	const sampled, hasIsRemote, isRemote = 1, 0x100, 0x200

	want := &collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{
		{
			Resource:  &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("replica", i64(2)), kv("service.name", str("bridge"))}},
			SchemaUrl: "https://opentelemetry.io/schemas/1.37.0",
			ScopeSpans: []*tracepb.ScopeSpans{
				{
					Scope:     &commonpb.InstrumentationScope{Name: "mcpbridge", Version: "v1.2.3", Attributes: []*commonpb.KeyValue{kv("scope.flag", boolean(true))}},
					SchemaUrl: "https://scope/schema",
					Spans: []*tracepb.Span{
						{
							TraceId: traceID[:], SpanId: id(1), TraceState: "vendor=abc,other=x", ParentSpanId: id(9),
							Flags: sampled | hasIsRemote | isRemote,
							Name:  "tools/call mcp.everything.echo", Kind: tracepb.Span_SPAN_KIND_SERVER,
							StartTimeUnixNano: nanos(start), EndTimeUnixNano: nanos(start.Add(1500 * time.Microsecond)),
							Attributes: []*commonpb.KeyValue{
								kv("b", boolean(true)), kv("b.false", boolean(false)),
								kv("i", i64(-42)), kv("i.zero", i64(0)),
								kv("f", double(2.5)), kv("s", str("text")), kv("s.empty", str("")),
								kv("bs", array(boolean(true), boolean(false))), kv("is", array(i64(1), i64(-2))),
								kv("fs", array(double(0.5), double(-1))), kv("ss", array(str("a"), str(""))),
								kv("bytes", &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{0, 1, 255}}}),
								kv("mixed", array(str("m"), i64(7))),
								kv("empty", &commonpb.AnyValue{}),
								kv("long", str(long)),
							},
							DroppedAttributesCount: 4,
							Events: []*tracepb.Span_Event{
								{TimeUnixNano: nanos(start.Add(time.Millisecond)), Name: "approval.asked", Attributes: []*commonpb.KeyValue{kv("who", str("alice"))}, DroppedAttributesCount: 3},
								{TimeUnixNano: nanos(start.Add(2 * time.Millisecond)), Name: "bare"},
							},
							DroppedEventsCount: 5,
							Links: []*tracepb.Span_Link{
								{TraceId: traceID[:], SpanId: id(7), TraceState: "vendor=abc,other=x", Attributes: []*commonpb.KeyValue{kv("n", i64(1))}, DroppedAttributesCount: 2, Flags: sampled | hasIsRemote | isRemote},
							},
							DroppedLinksCount: 6,
							Status:            &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "mcp_server_unstable"},
						},
						{
							TraceId: traceID[:], SpanId: id(3), ParentSpanId: id(1), Flags: sampled | hasIsRemote,
							Name: "decide", Kind: tracepb.Span_SPAN_KIND_CLIENT,
						},
					},
				},
				{
					Scope: &commonpb.InstrumentationScope{Name: "controller"},
					Spans: []*tracepb.Span{{
						TraceId: traceID[:], SpanId: id(2), Flags: sampled | hasIsRemote,
						Name: "reconcile", Kind: tracepb.Span_SPAN_KIND_INTERNAL,
						StartTimeUnixNano: nanos(start), EndTimeUnixNano: nanos(start),
						Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK},
					}},
				},
			},
		},
		{
			Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", str("controller"))}},
			ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{
				TraceId: traceID[:], SpanId: id(4), Flags: sampled | hasIsRemote, Name: "probe",
			}}}},
		},
	}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Fatalf("decoded request differs (-want +got):\n%s", diff)
	}
}

// No spans, no resource spans: an empty request.
func TestEncodingNoSpans(t *testing.T) {
	if b := appendRequest(nil, nil); len(b) != 0 {
		t.Fatalf("no spans encode as %x", b)
	}
}
