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
	"cmp"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
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

	// mu guards stopped, so that no export starts once Shutdown waits for
	// running ones.
	mu      sync.Mutex
	stopped bool
	running sync.WaitGroup
	// waits is cancelled by Shutdown at once: the running exports make no
	// new attempt and end their wait between attempts (which may be long: a
	// collector's Retry-After).
	waits    context.Context
	endWaits context.CancelCauseFunc
	// attempts is cancelled when Shutdown's context ends before the running
	// exports did: their attempt in flight is given up.
	attempts    context.Context
	endAttempts context.CancelCauseFunc
}

// errShutdown is the cause of an export ended by Shutdown.
var errShutdown = errors.New("the OTLP exporter is shut down")

// userAgent names the exporter to the collector, as the OTLP specification
// asks: mcp-operator-otlp/<version>.
const userAgent = "mcp-operator-otlp"

var _ sdktrace.SpanExporter = (*Exporter)(nil)

// maxAttempts bounds the attempts to export one batch, within its timeout.
const maxAttempts = 5

// New is the exporter of c; it dials nothing until the first export.
func New(c Config) (*Exporter, error) {
	if c.URL == nil || c.Timeout <= 0 {
		return nil, errors.New("the OTLP exporter needs a URL and a timeout")
	}
	client := &http.Client{
		Transport: transport(c),
		// A redirect is a failure, not followed: Go would turn the POST into
		// a GET without the spans (whose 2xx would count as sent), and carry
		// the configured headers, secrets often, to another host.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	headers := c.Headers.Clone()
	if headers == nil {
		headers = http.Header{}
	}
	if headers.Get("User-Agent") == "" {
		headers.Set("User-Agent", userAgent+"/"+cmp.Or(c.Version, "unknown"))
	}
	e := &Exporter{timeout: c.Timeout, gzip: c.Gzip, client: client, firstBackoff: 500 * time.Millisecond}
	switch c.Protocol {
	case ProtocolHTTP:
		e.send = (&httpSender{client: client, url: c.URL, headers: headers, gzip: c.Gzip}).send
	case ProtocolGRPC:
		e.send = (&grpcSender{client: client, url: c.URL, headers: headers, gzip: c.Gzip}).send
	default:
		return nil, fmt.Errorf("OTLP protocol %q is not supported: use %s or %s", c.Protocol, ProtocolGRPC, ProtocolHTTP)
	}
	e.waits, e.endWaits = context.WithCancelCause(context.Background())
	e.attempts, e.endAttempts = context.WithCancelCause(context.Background())
	return e, nil
}

// transport is the exporter's own connection pool. gRPC needs HTTP/2:
// over TLS, or in clear text (h2c) for http:// URLs. OTLP/HTTP takes what
// the collector offers. Both go through the environment's proxy
// (HTTPS_PROXY, NO_PROXY) like any HTTP client, but for gRPC in clear text:
// net/http would speak h2c to the proxy itself, which HTTP proxies do not
// forward, so h2c goes straight to the collector.
func transport(c Config) *http.Transport {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		DialContext:         dialer.DialContext,
		TLSClientConfig:     c.TLS,
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	t.Proxy = http.ProxyFromEnvironment
	if c.Protocol == ProtocolGRPC {
		t.Protocols = new(http.Protocols)
		if c.URL.Scheme == "http" {
			t.Protocols.SetUnencryptedHTTP2(true)
			t.Proxy = nil
		} else {
			// Through a proxy: a CONNECT tunnel, then TLS and HTTP/2.
			t.Protocols.SetHTTP2(true)
		}
	}
	return t
}

// ExportSpans sends spans as one request, trying again within the
// configured timeout when the collector (or the connection to it) fails in
// a way the OTLP specification calls retryable. A partial success (the
// collector kept some spans) is reported to OpenTelemetry's error handler,
// not returned: sending the batch again would not change it. Shutdown ends
// a running export (see Shutdown for when).
func (e *Exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return errShutdown
	}
	e.running.Add(1)
	e.mu.Unlock()
	defer e.running.Done()
	if len(spans) == 0 {
		return nil
	}
	body := appendRequest(nil, spans)
	if e.gzip {
		body = gzipped(body)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(e.attempts, func() { cancel(errShutdown) })()
	ctx, cancelTimeout := context.WithTimeout(ctx, e.timeout)
	defer cancelTimeout()
	err := e.retry(ctx, body)
	var partial *partialError
	if errors.As(err, &partial) {
		otel.Handle(partial.err)
		return nil
	}
	return err
}

// retry sends body until it is accepted, refused for good, maxAttempts
// attempts failed, the next wait would pass ctx's deadline, or the exporter
// is shut down.
func (e *Exporter) retry(ctx context.Context, body []byte) error {
	backoff := e.firstBackoff
	for attempt := 1; ; attempt++ {
		err := e.send(ctx, body)
		var again *retryable
		if err == nil || !errors.As(err, &again) || attempt == maxAttempts {
			return err
		}
		if e.waits.Err() != nil {
			if errors.Is(err, errShutdown) {
				return err // the attempt was cancelled by Shutdown: it says so
			}
			return fmt.Errorf("%w (not tried again: %w)", err, errShutdown)
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
		case <-e.waits.Done():
			timer.Stop()
			return fmt.Errorf("%w (not tried again: %w)", err, errShutdown)
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

// Shutdown stops the exporter: exports after it fail, the running ones
// make no new attempt and end their wait between attempts at once, and it
// waits for them to return, closing the exporter's idle connections. An
// attempt in flight is let finish (a batch about to be accepted is not
// lost) until ctx ends, when it is cancelled and Shutdown returns.
//
// The SDK's BatchSpanProcessor calls Shutdown only once its last export
// (the drain of its queue) has returned, within the same ctx: there is no
// attempt in flight then. A direct caller may have one, as the otel
// exporters let it finish until ctx ends, so does this one.
func (e *Exporter) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	e.stopped = true
	e.mu.Unlock()
	e.endWaits(errShutdown)
	returned := make(chan struct{})
	go func() {
		e.running.Wait()
		close(returned)
	}()
	defer e.client.CloseIdleConnections()
	select {
	case <-returned:
		return nil
	case <-ctx.Done():
		e.endAttempts(errShutdown)
		return fmt.Errorf("while waiting for the running OTLP exports to end: %w", context.Cause(ctx))
	}
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	// Writes to a bytes.Buffer do not fail.
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}
