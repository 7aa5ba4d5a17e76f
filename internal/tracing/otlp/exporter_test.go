package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	_ "google.golang.org/grpc/encoding/gzip" // the test collector reads gzip-compressed messages
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mcp-operator/mcp-operator/internal/mtlstest"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// span is one finished server span of a new trace, with attributes of
// several types, an event and an error status.
func span(t *testing.T) sdktrace.ReadOnlySpan {
	t.Helper()
	var traceID trace.TraceID
	var spanID, parentID trace.SpanID
	for _, b := range [][]byte{traceID[:], spanID[:], parentID[:]} {
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	return tracetest.SpanStub{
		Name:        "exported-span",
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled}),
		Parent:      trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: parentID, TraceFlags: trace.FlagsSampled, Remote: true}),
		SpanKind:    trace.SpanKindServer,
		StartTime:   start, EndTime: start.Add(3 * time.Millisecond),
		Attributes: []attribute.KeyValue{attribute.String("gen_ai.tool.name", "mcp.everything.echo"), attribute.Int("mcp_operator.result_bytes", 1234),
			attribute.Bool("mcp_operator.redacted", true), attribute.Float64("ratio", 0.25)},
		Events:               []sdktrace.Event{{Name: "decided", Time: start.Add(time.Millisecond)}},
		Status:               sdktrace.Status{Code: codes.Error, Description: "mcp_server_unstable"},
		Resource:             resource.NewSchemaless(attribute.String("service.name", "otlp-test")),
		InstrumentationScope: instrumentation.Scope{Name: "otlp-test"},
	}.Snapshot()
}

// exporter is New's exporter of env, with a backoff of a millisecond (the
// waits are not what these tests are about).
func exporter(t *testing.T, env map[string]string) *Exporter {
	t.Helper()
	c, err := ConfigFromEnv(lookup(env))
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	e.firstBackoff = time.Millisecond
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	return e
}

func export(e *Exporter, s sdktrace.ReadOnlySpan) error {
	return e.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{s})
}

// TestExportToJaeger: a real collector receives the span on both of its
// OTLP receivers, and its query API returns it with its attributes.
func TestExportToJaeger(t *testing.T) {
	j := testpeers.StartJaeger(t)
	for protocol, endpoint := range map[string]string{ProtocolHTTP: j.OTLPHTTP, ProtocolGRPC: j.OTLPGRPC} {
		t.Run(protocol, func(t *testing.T) {
			e := exporter(t, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": protocol, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"})
			s := span(t)
			if err := export(e, s); err != nil {
				t.Fatal(err)
			}
			var spans []testpeers.JaegerSpan
			// Jaeger's batch processor stores spans within 100 ms.
			for deadline := time.Now().Add(30 * time.Second); len(spans) == 0; time.Sleep(100 * time.Millisecond) {
				var err error
				if spans, err = j.Trace(s.SpanContext().TraceID().String()); err != nil {
					t.Fatal(err)
				}
				if time.Now().After(deadline) {
					t.Fatal("Jaeger holds no span of the trace after 30 s")
				}
			}
			got := spans[0]
			if len(spans) != 1 || got.Name != "exported-span" || got.Service != "otlp-test" || got.Kind != int(trace.SpanKindServer) ||
				!strings.EqualFold(got.SpanID, s.SpanContext().SpanID().String()) || !strings.EqualFold(got.ParentSpanID, s.Parent().SpanID().String()) {
				t.Fatalf("Jaeger holds %+v", spans)
			}
			for k, v := range map[string]string{"gen_ai.tool.name": "mcp.everything.echo", "mcp_operator.result_bytes": "1234", "mcp_operator.redacted": "true"} {
				if got.Attributes[k] != v {
					t.Errorf("attribute %s is %q in Jaeger, want %q (all: %v)", k, got.Attributes[k], v, got.Attributes)
				}
			}
		})
	}
}

// collector records what the exporter sends and answers each attempt as
// answer says (n counts attempts from 1). It serves OTLP/HTTP, and gRPC
// through grpc-go's own server (its http.Handler), so that the request's
// HTTP/2 headers are seen too.
type collector struct {
	t      *testing.T
	answer func(n int, w http.ResponseWriter)                              // OTLP/HTTP
	rpc    func(n int) (*collectortrace.ExportTraceServiceResponse, error) // gRPC
	grpc   *grpc.Server

	mu       sync.Mutex
	headers  []http.Header
	requests []*collectortrace.ExportTraceServiceRequest
	// deadline says whether the gRPC call's context had one.
	deadline bool
}

func newCollector(t *testing.T) *collector {
	c := &collector{t: t, answer: func(int, http.ResponseWriter) {}, rpc: func(int) (*collectortrace.ExportTraceServiceResponse, error) { return nil, nil }}
	c.grpc = grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(c.grpc, traceService{c: c})
	return c
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.headers = append(c.headers, r.Header.Clone())
	c.mu.Unlock()
	if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
		c.grpc.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err == nil && r.Header.Get("Content-Encoding") == "gzip" {
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(bytes.NewReader(body)); err == nil {
			body, err = io.ReadAll(zr)
		}
	}
	req := &collectortrace.ExportTraceServiceRequest{}
	if err != nil || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(body, req) != nil {
		http.Error(w, "not an OTLP trace export", http.StatusUnsupportedMediaType)
		return
	}
	c.answer(c.record(req), w)
}

func (c *collector) record(req *collectortrace.ExportTraceServiceRequest) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests = append(c.requests, req)
	return len(c.requests)
}

type traceService struct {
	collectortrace.UnimplementedTraceServiceServer
	c *collector
}

func (s traceService) Export(ctx context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	n := s.c.record(req)
	_, ok := ctx.Deadline()
	s.c.mu.Lock()
	s.c.deadline = ok
	s.c.mu.Unlock()
	resp, err := s.c.rpc(n)
	if resp == nil && err == nil {
		resp = &collectortrace.ExportTraceServiceResponse{}
	}
	return resp, err
}

// got is the requests received so far, and the headers of the last.
func (c *collector) got() ([]*collectortrace.ExportTraceServiceRequest, http.Header) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var last http.Header
	if len(c.headers) > 0 {
		last = c.headers[len(c.headers)-1]
	}
	return c.requests, last
}

// serve starts c in clear text, HTTP/1.1 and h2c.
func (c *collector) serve() *httptest.Server {
	return serveClearText(c.t, c)
}

// serveClearText serves h over HTTP/1.1 and h2c, for either protocol's
// exporter.
func serveClearText(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// serveNative serves c's gRPC on grpc-go's own HTTP/2 transport (in clear
// text), which answers an error before any message as trailers-only: the
// status in the response's headers.
func (c *collector) serveNative() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	go func() { _ = c.grpc.Serve(l) }()
	c.t.Cleanup(c.grpc.Stop)
	return "http://" + l.Addr().String()
}

// collectorEnv is the environment of an exporter of protocol sending to srv.
func collectorEnv(protocol, url string, more ...string) map[string]string {
	e := map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": protocol, "OTEL_EXPORTER_OTLP_ENDPOINT": url}
	for i := 0; i+1 < len(more); i += 2 {
		e[more[i]] = more[i+1]
	}
	return e
}

var protocols = []string{ProtocolHTTP, ProtocolGRPC}

// Headers of OTEL_EXPORTER_OTLP_HEADERS reach the collector (as gRPC
// metadata over gRPC), and a gzip-compressed request decodes.
func TestHeadersAndGzip(t *testing.T) {
	for _, protocol := range protocols {
		t.Run(protocol, func(t *testing.T) {
			c := newCollector(t)
			srv := c.serve()
			e := exporter(t, collectorEnv(protocol, srv.URL, "OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20t0ken,x-tenant=blue", "OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"))
			s := span(t)
			if err := export(e, s); err != nil {
				t.Fatal(err)
			}
			requests, h := c.got()
			if len(requests) != 1 || requests[0].ResourceSpans[0].ScopeSpans[0].Spans[0].Name != "exported-span" {
				t.Fatalf("received %v", requests)
			}
			encoding := "Content-Encoding"
			if protocol == ProtocolGRPC {
				encoding = "Grpc-Encoding"
			}
			if h.Get("Authorization") != "Bearer t0ken" || h.Get("X-Tenant") != "blue" || h.Get(encoding) != "gzip" || h.Get("User-Agent") != userAgent+"/unknown" {
				t.Fatalf("received headers %v", h)
			}
		})
	}
}

// A retryable answer, then success: the same spans go again, after the
// wait the collector asked for.
func TestRetryableThenSuccess(t *testing.T) {
	for _, protocol := range protocols {
		t.Run(protocol, func(t *testing.T) {
			c := newCollector(t)
			c.answer = func(n int, w http.ResponseWriter) {
				switch n {
				case 1:
					w.WriteHeader(http.StatusServiceUnavailable)
				case 2:
					w.Header().Set("Retry-After", "1")
					w.WriteHeader(http.StatusTooManyRequests)
				}
			}
			c.rpc = func(n int) (*collectortrace.ExportTraceServiceResponse, error) {
				switch n {
				case 1:
					return nil, status.Error(grpccodes.Unavailable, "starting")
				case 2:
					st, err := status.New(grpccodes.ResourceExhausted, "slow down").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)})
					if err != nil {
						t.Error(err)
					}
					return nil, st.Err()
				}
				return nil, nil
			}
			e := exporter(t, collectorEnv(protocol, c.serve().URL))
			started := time.Now()
			if err := export(e, span(t)); err != nil {
				t.Fatal(err)
			}
			requests, _ := c.got()
			if len(requests) != 3 || !proto.Equal(requests[0], requests[2]) {
				t.Fatalf("%d requests, want 3 of the same spans", len(requests))
			}
			if waited := time.Since(started); waited < time.Second {
				t.Fatalf("retried after %s, before the second the collector asked for", waited)
			}
		})
	}
}

// An answer the specification does not retry is returned at once, with the
// collector's message; RESOURCE_EXHAUSTED is retried only with a delay.
func TestNonRetryableError(t *testing.T) {
	cases := map[string]struct {
		protocol string
		want     string
	}{
		"http 400":            {ProtocolHTTP, "400 Bad Request: spans too old"},
		"grpc invalid":        {ProtocolGRPC, "gRPC status 3: spans too old"},
		"grpc exhausted bare": {ProtocolGRPC, "gRPC status 8: spans too old"},
		"grpc trailers-only":  {ProtocolGRPC, "gRPC status 3: spans too old"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := newCollector(t)
			c.answer = func(_ int, w http.ResponseWriter) {
				b, _ := proto.Marshal(&rpcstatus.Status{Code: 3, Message: "spans too old"})
				w.Header().Set("Content-Type", "application/x-protobuf")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write(b)
			}
			code := grpccodes.InvalidArgument
			if strings.Contains(name, "exhausted") {
				code = grpccodes.ResourceExhausted
			}
			c.rpc = func(int) (*collectortrace.ExportTraceServiceResponse, error) {
				return nil, status.Error(code, "spans too old")
			}
			url := c.serve().URL
			if strings.Contains(name, "trailers-only") {
				url = c.serveNative()
			}
			err := export(exporter(t, collectorEnv(tc.protocol, url)), span(t))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if requests, _ := c.got(); len(requests) != 1 {
				t.Fatalf("%d attempts, want 1", len(requests))
			}
		})
	}
}

// A collector that keeps failing is tried maxAttempts times.
func TestRetriesAreBounded(t *testing.T) {
	for _, protocol := range protocols {
		t.Run(protocol, func(t *testing.T) {
			c := newCollector(t)
			c.answer = func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway) }
			c.rpc = func(int) (*collectortrace.ExportTraceServiceResponse, error) {
				return nil, status.Error(grpccodes.Unavailable, "down")
			}
			err := export(exporter(t, collectorEnv(protocol, c.serve().URL)), span(t))
			if err == nil {
				t.Fatal("exported to a failing collector")
			}
			if requests, _ := c.got(); len(requests) != maxAttempts {
				t.Fatalf("%d attempts, want %d", len(requests), maxAttempts)
			}
		})
	}
}

// OTEL_EXPORTER_OTLP_TIMEOUT ends an export the collector does not answer
// (the gRPC collector learns the deadline from grpc-timeout), and the
// partial success of an accepted export goes to the error handler.
func TestTimeoutAndPartialSuccess(t *testing.T) {
	var mu sync.Mutex
	var handled []error
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		handled = append(handled, err)
	}))
	t.Cleanup(func() { otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {})) })
	for _, protocol := range protocols {
		t.Run(protocol, func(t *testing.T) {
			c := newCollector(t)
			block := make(chan struct{})
			partial := &collectortrace.ExportTraceServiceResponse{PartialSuccess: &collectortrace.ExportTracePartialSuccess{RejectedSpans: 1, ErrorMessage: "too old"}}
			c.answer = func(n int, w http.ResponseWriter) {
				if n == 1 {
					<-block
					return
				}
				b, _ := proto.Marshal(partial)
				w.Header().Set("Content-Type", "application/x-protobuf")
				_, _ = w.Write(b)
			}
			c.rpc = func(n int) (*collectortrace.ExportTraceServiceResponse, error) {
				if n == 1 {
					<-block
				}
				return partial, nil
			}
			srv := c.serve()
			// Before the server's Close, which waits for the handler.
			t.Cleanup(func() { close(block) })
			e := exporter(t, collectorEnv(protocol, srv.URL, "OTEL_EXPORTER_OTLP_TIMEOUT", "300"))
			err := export(e, span(t))
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("error %v, want the deadline", err)
			}
			if protocol == ProtocolGRPC {
				c.mu.Lock()
				deadline := c.deadline
				c.mu.Unlock()
				if !deadline {
					t.Fatal("the gRPC call carried no deadline")
				}
			}
			mu.Lock()
			handled = nil
			mu.Unlock()
			if err := export(e, span(t)); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(handled) != 1 || !strings.Contains(handled[0].Error(), "refused 1 spans: too old") {
				t.Fatalf("the error handler got %v", handled)
			}
		})
	}
}

// TLS with the collector's CA from OTEL_EXPORTER_OTLP_CERTIFICATE and a
// client certificate the collector requires; without the client
// certificate the handshake fails and nothing is received.
func TestTLS(t *testing.T) {
	ca := mtlstest.NewCA(t, "otlp-test-ca")
	dir := certFiles(t, ca)
	for _, protocol := range protocols {
		t.Run(protocol, func(t *testing.T) {
			c := newCollector(t)
			srv := httptest.NewUnstartedServer(c)
			srv.EnableHTTP2 = true
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(t, "collector").TLS(t)}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}
			srv.StartTLS()
			t.Cleanup(srv.Close)
			if !strings.HasPrefix(srv.URL, "https://") {
				t.Fatalf("collector at %s", srv.URL)
			}
			// Quiet the server's log of the refused handshake.
			srv.Config.ErrorLog = nil
			anonymous := exporter(t, collectorEnv(protocol, srv.URL, "OTEL_EXPORTER_OTLP_CERTIFICATE", filepath.Join(dir, "ca.crt")))
			if err := export(anonymous, span(t)); err == nil {
				t.Fatal("exported without the client certificate the collector requires")
			}
			if requests, _ := c.got(); len(requests) != 0 {
				t.Fatalf("received %d requests without a client certificate", len(requests))
			}
			e := exporter(t, collectorEnv(protocol, srv.URL, "OTEL_EXPORTER_OTLP_CERTIFICATE", filepath.Join(dir, "ca.crt"),
				"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", filepath.Join(dir, "tls.crt"), "OTEL_EXPORTER_OTLP_CLIENT_KEY", filepath.Join(dir, "tls.key")))
			if err := export(e, span(t)); err != nil {
				t.Fatal(err)
			}
			if requests, _ := c.got(); len(requests) != 1 {
				t.Fatalf("received %d requests, want 1", len(requests))
			}
			if err := e.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := export(e, span(t)); err == nil {
				t.Fatal("exported after Shutdown")
			}
		})
	}
}
