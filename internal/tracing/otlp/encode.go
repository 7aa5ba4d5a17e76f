package otlp

import (
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of the OTLP messages written here, from
// opentelemetry-proto's collector/trace/v1/trace_service.proto,
// trace/v1/trace.proto, resource/v1/resource.proto and
// common/v1/common.proto. The encoding test decodes what is written with
// the generated types of those files.
const (
	requestResourceSpans protowire.Number = 1 // ExportTraceServiceRequest.resource_spans

	resourceSpansResource   protowire.Number = 1
	resourceSpansScopeSpans protowire.Number = 2
	resourceSpansSchemaURL  protowire.Number = 3

	resourceAttributes protowire.Number = 1

	scopeSpansScope     protowire.Number = 1
	scopeSpansSpans     protowire.Number = 2
	scopeSpansSchemaURL protowire.Number = 3

	scopeName       protowire.Number = 1
	scopeVersion    protowire.Number = 2
	scopeAttributes protowire.Number = 3

	spanTraceID           protowire.Number = 1
	spanSpanID            protowire.Number = 2
	spanTraceState        protowire.Number = 3
	spanParentSpanID      protowire.Number = 4
	spanName              protowire.Number = 5
	spanKind              protowire.Number = 6
	spanStartTime         protowire.Number = 7 // fixed64
	spanEndTime           protowire.Number = 8 // fixed64
	spanAttributes        protowire.Number = 9
	spanDroppedAttributes protowire.Number = 10
	spanEvents            protowire.Number = 11
	spanDroppedEvents     protowire.Number = 12
	spanLinks             protowire.Number = 13
	spanDroppedLinks      protowire.Number = 14
	spanStatus            protowire.Number = 15
	spanFlags             protowire.Number = 16 // fixed32

	eventTime              protowire.Number = 1 // fixed64
	eventName              protowire.Number = 2
	eventAttributes        protowire.Number = 3
	eventDroppedAttributes protowire.Number = 4

	linkTraceID           protowire.Number = 1
	linkSpanID            protowire.Number = 2
	linkTraceState        protowire.Number = 3
	linkAttributes        protowire.Number = 4
	linkDroppedAttributes protowire.Number = 5
	linkFlags             protowire.Number = 6 // fixed32

	statusMessage protowire.Number = 2
	statusCode    protowire.Number = 3

	keyValueKey   protowire.Number = 1
	keyValueValue protowire.Number = 2

	// AnyValue's oneof.
	valueString protowire.Number = 1
	valueBool   protowire.Number = 2
	valueInt    protowire.Number = 3
	valueDouble protowire.Number = 4 // fixed64
	valueArray  protowire.Number = 5
	valueBytes  protowire.Number = 7

	arrayValues protowire.Number = 1
)

// OTLP's Status.StatusCode (the SDK numbers Ok and Error the other way).
const (
	statusCodeOK    = 1
	statusCodeError = 2
)

// The high bits of a span's and a link's flags: the low 8 are the W3C trace
// flags, and these say that the exporter knows whether the parent (the
// linked span) is remote, and that it is.
const (
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// appendRequest appends spans as an ExportTraceServiceRequest: grouped by
// resource, then by instrumentation scope, each group in the order its
// first span came.
func appendRequest(b []byte, spans []sdktrace.ReadOnlySpan) []byte {
	for _, r := range group(spans) {
		var at int
		b, at = openMessage(b, requestResourceSpans)
		b = appendResourceSpans(b, r)
		b = closeMessage(b, at)
	}
	return b
}

type resourceGroup struct {
	resource *resource.Resource
	scopes   []*scopeGroup
}

type scopeGroup struct {
	scope instrumentation.Scope
	spans []sdktrace.ReadOnlySpan
}

func group(spans []sdktrace.ReadOnlySpan) []*resourceGroup {
	type scopeKey struct {
		resource attribute.Distinct
		scope    instrumentation.Scope
	}
	var out []*resourceGroup
	resources := map[attribute.Distinct]*resourceGroup{}
	scopes := map[scopeKey]*scopeGroup{}
	for _, s := range spans {
		if s == nil {
			continue
		}
		rk := s.Resource().Equivalent()
		r := resources[rk]
		if r == nil {
			r = &resourceGroup{resource: s.Resource()}
			resources[rk] = r
			out = append(out, r)
		}
		sk := scopeKey{rk, s.InstrumentationScope()}
		sg := scopes[sk]
		if sg == nil {
			sg = &scopeGroup{scope: sk.scope}
			scopes[sk] = sg
			r.scopes = append(r.scopes, sg)
		}
		sg.spans = append(sg.spans, s)
	}
	return out
}

func appendResourceSpans(b []byte, r *resourceGroup) []byte {
	var at int
	b, at = openMessage(b, resourceSpansResource)
	b = appendAttributes(b, resourceAttributes, r.resource.Iter())
	b = closeMessage(b, at)
	for _, sg := range r.scopes {
		b, at = openMessage(b, resourceSpansScopeSpans)
		b = appendScopeSpans(b, sg)
		b = closeMessage(b, at)
	}
	return appendString(b, resourceSpansSchemaURL, r.resource.SchemaURL())
}

func appendScopeSpans(b []byte, sg *scopeGroup) []byte {
	var at int
	if sg.scope != (instrumentation.Scope{}) {
		b, at = openMessage(b, scopeSpansScope)
		b = appendString(b, scopeName, sg.scope.Name)
		b = appendString(b, scopeVersion, sg.scope.Version)
		b = appendAttributes(b, scopeAttributes, sg.scope.Attributes.Iter())
		b = closeMessage(b, at)
	}
	for _, s := range sg.spans {
		b, at = openMessage(b, scopeSpansSpans)
		b = appendSpan(b, s)
		b = closeMessage(b, at)
	}
	return appendString(b, scopeSpansSchemaURL, sg.scope.SchemaURL)
}

func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc, parent := s.SpanContext(), s.Parent()
	traceID, spanID := sc.TraceID(), sc.SpanID()
	b = appendBytes(b, spanTraceID, traceID[:])
	b = appendBytes(b, spanSpanID, spanID[:])
	b = appendString(b, spanTraceState, sc.TraceState().String())
	if parent.HasSpanID() {
		parentID := parent.SpanID()
		b = appendBytes(b, spanParentSpanID, parentID[:])
	}
	b = appendString(b, spanName, s.Name())
	// The SDK's span kinds are numbered as OTLP's.
	b = appendUint(b, spanKind, uint64(s.SpanKind()))
	b = appendFixed64(b, spanStartTime, unixNano(s.StartTime()))
	b = appendFixed64(b, spanEndTime, unixNano(s.EndTime()))
	b = appendKeyValues(b, spanAttributes, s.Attributes())
	b = appendUint(b, spanDroppedAttributes, uint64(s.DroppedAttributes()))
	var at int
	for _, e := range s.Events() {
		b, at = openMessage(b, spanEvents)
		b = appendFixed64(b, eventTime, unixNano(e.Time))
		b = appendString(b, eventName, e.Name)
		b = appendKeyValues(b, eventAttributes, e.Attributes)
		b = appendUint(b, eventDroppedAttributes, uint64(e.DroppedAttributeCount))
		b = closeMessage(b, at)
	}
	b = appendUint(b, spanDroppedEvents, uint64(s.DroppedEvents()))
	for _, l := range s.Links() {
		linkTrace, linkSpan := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		b, at = openMessage(b, spanLinks)
		b = appendBytes(b, linkTraceID, linkTrace[:])
		b = appendBytes(b, linkSpanID, linkSpan[:])
		b = appendString(b, linkTraceState, l.SpanContext.TraceState().String())
		b = appendKeyValues(b, linkAttributes, l.Attributes)
		b = appendUint(b, linkDroppedAttributes, uint64(l.DroppedAttributeCount))
		b = appendFixed32(b, linkFlags, flags(l.SpanContext.TraceFlags(), l.SpanContext.IsRemote()))
		b = closeMessage(b, at)
	}
	b = appendUint(b, spanDroppedLinks, uint64(s.DroppedLinks()))
	if st := s.Status(); st.Code != codes.Unset || st.Description != "" {
		b, at = openMessage(b, spanStatus)
		b = appendString(b, statusMessage, st.Description)
		b = appendUint(b, statusCode, otlpStatusCode(st.Code))
		b = closeMessage(b, at)
	}
	return appendFixed32(b, spanFlags, flags(sc.TraceFlags(), parent.IsRemote()))
}

func otlpStatusCode(c codes.Code) uint64 {
	switch c {
	case codes.Ok:
		return statusCodeOK
	case codes.Error:
		return statusCodeError
	}
	return 0
}

func flags(tf trace.TraceFlags, remote bool) uint32 {
	f := uint32(tf) | flagHasIsRemote
	if remote {
		f |= flagIsRemote
	}
	return f
}

// unixNano is t in nanoseconds since 1970, 0 for a zero or earlier time.
func unixNano(t time.Time) uint64 {
	if t.IsZero() || t.UnixNano() < 0 {
		return 0
	}
	return uint64(t.UnixNano())
}

func appendAttributes(b []byte, num protowire.Number, it attribute.Iterator) []byte {
	for it.Next() {
		b = appendKeyValue(b, num, it.Attribute())
	}
	return b
}

func appendKeyValues(b []byte, num protowire.Number, kvs []attribute.KeyValue) []byte {
	for _, kv := range kvs {
		b = appendKeyValue(b, num, kv)
	}
	return b
}

func appendKeyValue(b []byte, num protowire.Number, kv attribute.KeyValue) []byte {
	var outer, inner int
	b, outer = openMessage(b, num)
	b = appendString(b, keyValueKey, string(kv.Key))
	b, inner = openMessage(b, keyValueValue)
	b = appendValue(b, kv.Value)
	b = closeMessage(b, inner)
	return closeMessage(b, outer)
}

// appendValue appends the fields of an AnyValue. A oneof member is written
// even when it holds its zero value: that is what says which one it is.
func appendValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		return appendBool(b, v.AsBool())
	case attribute.INT64:
		return appendInt(b, v.AsInt64())
	case attribute.FLOAT64:
		return appendDouble(b, v.AsFloat64())
	case attribute.STRING:
		b = protowire.AppendTag(b, valueString, protowire.BytesType)
		return protowire.AppendString(b, v.AsString())
	case attribute.BYTESLICE:
		b = protowire.AppendTag(b, valueBytes, protowire.BytesType)
		return protowire.AppendBytes(b, v.AsByteSlice())
	case attribute.BOOLSLICE:
		return appendArray(b, v.AsBoolSlice(), appendBool)
	case attribute.INT64SLICE:
		return appendArray(b, v.AsInt64Slice(), appendInt)
	case attribute.FLOAT64SLICE:
		return appendArray(b, v.AsFloat64Slice(), appendDouble)
	case attribute.STRINGSLICE:
		return appendArray(b, v.AsStringSlice(), func(b []byte, s string) []byte {
			return appendValue(b, attribute.StringValue(s))
		})
	case attribute.SLICE:
		return appendArray(b, v.AsSlice(), appendValue)
	}
	// EMPTY, and a type this exporter does not know: an AnyValue with none
	// set.
	return b
}

// appendArray appends an ArrayValue of the elements, each an AnyValue
// appended by value.
func appendArray[T any](b []byte, elems []T, value func([]byte, T) []byte) []byte {
	var array, elem int
	b, array = openMessage(b, valueArray)
	for _, e := range elems {
		b, elem = openMessage(b, arrayValues)
		b = value(b, e)
		b = closeMessage(b, elem)
	}
	return closeMessage(b, array)
}

func appendBool(b []byte, v bool) []byte {
	b = protowire.AppendTag(b, valueBool, protowire.VarintType)
	return protowire.AppendVarint(b, protowire.EncodeBool(v))
}

func appendInt(b []byte, v int64) []byte {
	b = protowire.AppendTag(b, valueInt, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(v))
}

func appendDouble(b []byte, v float64) []byte {
	b = protowire.AppendTag(b, valueDouble, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, math.Float64bits(v))
}

// The field writers below leave out a zero value, as proto3 does for
// fields outside a oneof: the decoder reads the zero value then.

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendUint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

func appendFixed32(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, v)
}

// openMessage appends the tag of the embedded message field num and one
// byte for its length, and returns where the message's body starts; once
// the body is appended, closeMessage writes the length. A body's length is
// known only after it is written, so a body of 128 bytes or more is moved
// to make room for a longer length: no message is written twice.
func openMessage(b []byte, num protowire.Number) ([]byte, int) {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = append(b, 0)
	return b, len(b)
}

func closeMessage(b []byte, start int) []byte {
	n := len(b) - start
	size := protowire.SizeVarint(uint64(n))
	if size > 1 {
		b = append(b, make([]byte, size-1)...)
		copy(b[start+size-1:], b[start:start+n])
	}
	protowire.AppendVarint(b[start-1:start-1], uint64(n))
	return b
}
