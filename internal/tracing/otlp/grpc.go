package otlp

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/textcut"
)

// grpcSender makes the unary gRPC call TraceService/Export over HTTP/2 with
// net/http: a POST whose body is the request as one length-prefixed
// message, answered by the response message and a grpc-status in the
// trailers (or in the headers, for an answer without a body).
type grpcSender struct {
	client  *http.Client
	url     *url.URL
	headers http.Header
	gzip    bool
}

// gRPC status codes the exporter tells apart.
const (
	codeOK                = 0
	codeCancelled         = 1
	codeUnknown           = 2
	codeDeadlineExceeded  = 4
	codePermissionDenied  = 7
	codeResourceExhausted = 8
	codeAborted           = 10
	codeOutOfRange        = 11
	codeUnimplemented     = 12
	codeInternal          = 13
	codeUnavailable       = 14
	codeDataLoss          = 15
	codeUnauthenticated   = 16
)

func (g *grpcSender) send(ctx context.Context, message []byte) error {
	// The length-prefixed message: a compressed flag and a 4-byte length.
	body := make([]byte, 5, 5+len(message))
	if g.gzip {
		body[0] = 1
	}
	binary.BigEndian.PutUint32(body[1:], uint32(len(message)))
	body = append(body, message...)
	header := http.Header{"Content-Type": {"application/grpc"}, "Te": {"trailers"}}
	if g.gzip {
		header.Set("Grpc-Encoding", "gzip")
	}
	if deadline, ok := ctx.Deadline(); ok {
		header.Set("Grpc-Timeout", grpcTimeout(time.Until(deadline)))
	}
	resp, answer, err := post(ctx, g.client, g.url, body, g.headers, header)
	if err != nil {
		return err
	}
	// A trailers-only answer carries the status in its headers.
	trailer := resp.Trailer
	if trailer.Get("Grpc-Status") == "" {
		trailer = resp.Header
	}
	status := trailer.Get("Grpc-Status")
	if resp.StatusCode != http.StatusOK && (status == "" || status == "0") {
		// Not a gRPC answer (a proxy's, say), or one claiming success with a
		// failed HTTP status: gRPC's mapping of HTTP statuses decides, and
		// the proxy's Retry-After when it says one.
		message := cmp.Or(redirected(resp), http.StatusText(resp.StatusCode), "not a gRPC answer")
		return g.failed(httpStatusCode(resp.StatusCode), resp.Status, message, retryAfter(resp.Header.Get("Retry-After")))
	}
	code, err := strconv.Atoi(status)
	if err != nil {
		return fmt.Errorf("the OTLP collector at %s answered without a gRPC status (grpc-status %q)", safeURL(g.url), status)
	}
	if code != codeOK {
		// Percent-encoded by the server; shown as it came when it is not.
		raw := trailer.Get("Grpc-Message")
		message, err := url.PathUnescape(raw)
		if err != nil {
			message = raw
		}
		message = textcut.Cut(message, maxMessage)
		var delay time.Duration
		if details := trailer.Get("Grpc-Status-Details-Bin"); details != "" {
			if b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(details, "=")); err == nil {
				_, delay = rpcStatus(b)
			}
		}
		return g.failed(code, "", message, delay)
	}
	response, err := grpcMessage(answer, resp.Header.Get("Grpc-Encoding"))
	if err != nil {
		// The spans were accepted; only the report of a partial success is
		// lost.
		return &partialError{fmt.Errorf("the OTLP collector at %s accepted the spans, but its answer is unreadable: %w", safeURL(g.url), err)}
	}
	if err := partialSuccess(response); err != nil {
		return &partialError{err}
	}
	return nil
}

// failed is the error of a call that ended with code: retryable for the
// codes the OTLP specification names, RESOURCE_EXHAUSTED only when the
// collector said when to come back (delay).
func (g *grpcSender) failed(code int, httpStatus, message string, delay time.Duration) error {
	what := "gRPC status " + strconv.Itoa(code)
	if httpStatus != "" {
		what = "HTTP " + httpStatus + " (" + what + ")"
	}
	err := fmt.Errorf("the OTLP collector at %s answered %s: %s", safeURL(g.url), what, message)
	switch code {
	case codeCancelled, codeDeadlineExceeded, codeAborted, codeOutOfRange, codeUnavailable, codeDataLoss:
		return &retryable{err: err, after: delay}
	case codeResourceExhausted:
		if delay > 0 {
			return &retryable{err: err, after: delay}
		}
	}
	return err
}

// httpStatusCode is gRPC's code for an HTTP status that is not 200.
func httpStatusCode(status int) int {
	switch status {
	case http.StatusBadRequest:
		return codeInternal
	case http.StatusUnauthorized:
		return codeUnauthenticated
	case http.StatusForbidden:
		return codePermissionDenied
	case http.StatusNotFound:
		return codeUnimplemented
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return codeUnavailable
	}
	return codeUnknown
}

// grpcMessage is the message of a length-prefixed answer, uncompressed;
// nothing for an empty body.
func grpcMessage(body []byte, encoding string) ([]byte, error) {
	if len(body) == 0 {
		return nil, nil
	}
	if len(body) < 5 || uint64(len(body)-5) < uint64(binary.BigEndian.Uint32(body[1:5])) {
		return nil, fmt.Errorf("a gRPC message of %d bytes is cut short", len(body))
	}
	message := body[5 : 5+binary.BigEndian.Uint32(body[1:5])]
	if body[0] == 0 {
		return message, nil
	}
	switch encoding {
	case "gzip":
	case "":
		return nil, errors.New("the answer is flagged compressed but names no grpc-encoding")
	default:
		return nil, fmt.Errorf("the answer is compressed with %q, not gzip", encoding)
	}
	r, err := gzip.NewReader(bytes.NewReader(message))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(r, maxResponse))
}

// grpcTimeout is d as a grpc-timeout header: at most 8 digits and a unit.
func grpcTimeout(d time.Duration) string {
	if ms := d.Milliseconds(); ms < 1e8 {
		return strconv.FormatInt(max(ms, 1), 10) + "m"
	}
	if s := int64(d / time.Second); s < 1e8 {
		return strconv.FormatInt(s, 10) + "S"
	}
	// The longest OTEL_EXPORTER_OTLP_TIMEOUT is some 2.6 million hours.
	return strconv.FormatInt(int64(d/time.Hour), 10) + "H"
}
