package otlp

import (
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// What a collector answers, decoded with protowire as far as the exporter
// reads it: ExportTraceServiceResponse's partial_success, and a
// google.rpc.Status (an HTTP error's body, gRPC's grpc-status-details-bin)
// with the delay of a RetryInfo among its details.
const (
	responsePartialSuccess protowire.Number = 1
	partialRejectedSpans   protowire.Number = 1
	partialErrorMessage    protowire.Number = 2

	rpcStatusMessage protowire.Number = 2
	rpcStatusDetails protowire.Number = 3
	anyTypeURL       protowire.Number = 1
	anyValue         protowire.Number = 2
	retryInfoDelay   protowire.Number = 1
	durationSeconds  protowire.Number = 1
	durationNanos    protowire.Number = 2

	retryInfoType = "type.googleapis.com/google.rpc.RetryInfo"
)

// fields calls field for each field of the message b, with its value: the
// varint or fixed value, or the bytes of a length-delimited one. It stops
// at the first malformed field; what was read up to there stands.
func fields(b []byte, field func(num protowire.Number, v uint64, bytes []byte)) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return
		}
		b = b[n:]
		var v uint64
		var bytes []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var v32 uint32
			v32, n = protowire.ConsumeFixed32(b)
			v = uint64(v32)
		case protowire.BytesType:
			bytes, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return
		}
		b = b[n:]
		field(num, v, bytes)
	}
}

// fieldsIn walks the fields of every field num of b (a message field that
// appears more than once is merged, as protobuf does).
func fieldsIn(b []byte, num protowire.Number, field func(num protowire.Number, v uint64, b []byte)) {
	fields(b, func(n protowire.Number, _ uint64, v []byte) {
		if n == num {
			fields(v, field)
		}
	})
}

// partialSuccess is the collector's word that it refused some of the spans
// of an export it accepted; nil when it refused none.
func partialSuccess(response []byte) error {
	var rejected int64
	var message string
	fieldsIn(response, responsePartialSuccess, func(num protowire.Number, v uint64, b []byte) {
		switch num {
		case partialRejectedSpans:
			rejected = int64(v)
		case partialErrorMessage:
			message = string(b)
		}
	})
	switch {
	case rejected == 0 && message == "":
		return nil
	case rejected == 0: // the spec's warning: all spans were accepted
		return fmt.Errorf("the OTLP collector accepted the spans with a warning: %s", message)
	case message == "":
		return fmt.Errorf("the OTLP collector refused %d spans", rejected)
	}
	return fmt.Errorf("the OTLP collector refused %d spans: %s", rejected, message)
}

// rpcStatus reads a google.rpc.Status: its message, and the delay its
// RetryInfo asks for (0 without one).
func rpcStatus(b []byte) (message string, retryDelay time.Duration) {
	fields(b, func(num protowire.Number, _ uint64, b []byte) {
		switch num {
		case rpcStatusMessage:
			message = string(b)
		case rpcStatusDetails:
			if d := retryInfo(b); d > 0 {
				retryDelay = d
			}
		}
	})
	return message, retryDelay
}

// retryInfo is the delay of a google.protobuf.Any holding a
// google.rpc.RetryInfo, 0 for any other detail.
func retryInfo(anyDetail []byte) time.Duration {
	var typeURL string
	var value []byte
	fields(anyDetail, func(num protowire.Number, _ uint64, b []byte) {
		switch num {
		case anyTypeURL:
			typeURL = string(b)
		case anyValue:
			value = b
		}
	})
	if typeURL != retryInfoType {
		return 0
	}
	var seconds int64
	var nanos int32
	fieldsIn(value, retryInfoDelay, func(num protowire.Number, v uint64, _ []byte) {
		switch num {
		case durationSeconds:
			seconds = int64(v)
		case durationNanos:
			nanos = int32(v)
		}
	})
	return duration(seconds, nanos)
}

// duration is a google.protobuf.Duration as a delay: 0 when negative, and
// the longest time.Duration when longer (past any export's timeout, so not
// waited for), rather than the wrapped product.
func duration(seconds int64, nanos int32) time.Duration {
	if seconds < 0 || nanos < 0 {
		return 0
	}
	if seconds > (math.MaxInt64-int64(nanos))/int64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(seconds)*time.Second + time.Duration(nanos)
}
