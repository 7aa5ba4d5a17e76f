// Package otlp exports spans to an OpenTelemetry collector over OTLP, in
// protobuf over HTTP (http/protobuf) or gRPC, as configured by the
// OTEL_EXPORTER_OTLP_* variables. It is the SDK's SpanExporter, written
// here on net/http and protowire rather than taken from the otel exporters:
// theirs link google.golang.org/grpc, whose golang.org/x/net/trace makes
// the linker keep every exported method of every type in the binary
// (docs/bridge.md, "Memory of the real process at idle").
package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Exporter sends batches of spans to the collector of its Config.
type Exporter struct {
	send    func(ctx context.Context, body []byte) error
	timeout time.Duration
	gzip    bool
	client  *http.Client
	// firstBackoff is the wait before the first retry, doubled for each
	// later one; a retry waits what the collector asked for instead when it
	// said.
	firstBackoff time.Duration
	stopped      atomic.Bool
}

var _ sdktrace.SpanExporter = (*Exporter)(nil)

// maxAttempts bounds the attempts to export one batch, within its timeout.
const maxAttempts = 5

// New is the exporter of c; it dials nothing until the first export.
func New(c Config) (*Exporter, error) {
	if c.URL == nil || c.Timeout <= 0 {
		return nil, errors.New("the OTLP exporter needs a URL and a timeout")
	}
	e := &Exporter{timeout: c.Timeout, gzip: c.Gzip, client: &http.Client{Transport: transport(c)}, firstBackoff: 500 * time.Millisecond}
	switch c.Protocol {
	case ProtocolHTTP:
		e.send = (&httpSender{client: e.client, url: c.URL.String(), headers: c.Headers, gzip: c.Gzip}).send
	case ProtocolGRPC:
		e.send = (&grpcSender{client: e.client, url: c.URL.String(), headers: c.Headers, gzip: c.Gzip}).send
	default:
		return nil, fmt.Errorf("OTLP protocol %q is not supported: use %s or %s", c.Protocol, ProtocolGRPC, ProtocolHTTP)
	}
	return e, nil
}

// transport is the exporter's own connection pool. gRPC needs HTTP/2:
// over TLS, or in clear text (h2c) for http:// URLs. OTLP/HTTP takes what
// the collector offers, through the environment's proxy like any HTTP
// client.
func transport(c Config) *http.Transport {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		DialContext:         dialer.DialContext,
		TLSClientConfig:     c.TLS,
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	if c.Protocol == ProtocolGRPC {
		t.Protocols = new(http.Protocols)
		if c.URL.Scheme == "http" {
			t.Protocols.SetUnencryptedHTTP2(true)
		} else {
			t.Protocols.SetHTTP2(true)
		}
	} else {
		t.Proxy = http.ProxyFromEnvironment
	}
	return t
}

// ExportSpans sends spans as one request, trying again within the
// configured timeout when the collector (or the connection to it) fails in
// a way the OTLP specification calls retryable. A partial success (the
// collector kept some spans) is reported to OpenTelemetry's error handler,
// not returned: sending the batch again would not change it.
func (e *Exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.stopped.Load() {
		return errors.New("the OTLP exporter is shut down")
	}
	if len(spans) == 0 {
		return nil
	}
	body := appendRequest(nil, spans)
	if e.gzip {
		body = gzipped(body)
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	err := e.retry(ctx, body)
	var partial *partialError
	if errors.As(err, &partial) {
		otel.Handle(partial.err)
		return nil
	}
	return err
}

// retry sends body until it is accepted, refused for good, maxAttempts
// attempts failed, or the next wait would pass ctx's deadline.
func (e *Exporter) retry(ctx context.Context, body []byte) error {
	backoff := e.firstBackoff
	for attempt := 1; ; attempt++ {
		err := e.send(ctx, body)
		var again *retryable
		if err == nil || !errors.As(err, &again) || attempt == maxAttempts {
			return err
		}
		wait := again.after
		if wait == 0 {
			// Jittered, so that replicas refused together come back apart.
			wait = backoff/2 + rand.N(backoff/2+1)
			backoff *= 2
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return fmt.Errorf("%w (not tried again: the next attempt would be %s from now, past the export's timeout)", err, wait.Round(time.Millisecond))
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("%w (and then: %w)", err, context.Cause(ctx))
		case <-timer.C:
		}
	}
}

// retryable is an attempt's failure that the same request may cure when
// sent again: after the delay the collector asked for, or the exporter's
// backoff when it asked for none (0).
type retryable struct {
	err   error
	after time.Duration
}

func (r *retryable) Error() string { return r.err.Error() }
func (r *retryable) Unwrap() error { return r.err }

// partialError is an accepted export in which the collector refused some
// spans.
type partialError struct{ err error }

func (p *partialError) Error() string { return p.err.Error() }

// Shutdown closes the exporter's idle connections; exports after it fail.
func (e *Exporter) Shutdown(context.Context) error {
	e.stopped.Store(true)
	e.client.CloseIdleConnections()
	return nil
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	// Writes to a bytes.Buffer do not fail.
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}
