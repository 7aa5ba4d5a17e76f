package tracing

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"go.opentelemetry.io/otel/trace"
)

// The protocol variables, which the exporter reads.
const (
	envProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
)

// clearEnv unsets every OTEL_* variable of the test's environment, for the
// test.
func clearEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, "")
		}
	}
}

func TestSetupIsOffUnlessConfigured(t *testing.T) {
	cases := map[string]map[string]string{
		"nothing set":           {},
		"SDK disabled":          {envEndpoint: "http://127.0.0.1:4318", envDisabled: "true"},
		"exporter none":         {envEndpoint: "http://127.0.0.1:4318", envExporter: "none"},
		"only a protocol":       {envProtocol: ProtocolGRPC},
		"disabled, any case":    {envExporter: "otlp", envDisabled: "TRUE"},
		"disabled beats traces": {envTracesEndpoint: "http://127.0.0.1:4318", envDisabled: "true"},
	}
	for name, env := range cases {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range env {
				t.Setenv(k, v)
			}
			p, err := Setup(context.Background(), "test", "v0")
			if err != nil {
				t.Fatal(err)
			}
			if p.Enabled() || p.Tracer("x") != nil || p.TracerProvider() != nil {
				t.Fatal("tracing is on")
			}
			if err := p.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestSetupRefusesWhatItCannotHonour(t *testing.T) {
	cases := map[string]struct {
		env  map[string]string
		want string
	}{
		"zipkin exporter": {map[string]string{envExporter: "zipkin"}, `OTEL_TRACES_EXPORTER="zipkin" is not supported`},
		"http/json":       {map[string]string{envEndpoint: "http://127.0.0.1:4318", envProtocol: "http/json"}, `OTLP protocol "http/json" is not supported`},
		"bad header":      {map[string]string{envEndpoint: "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_HEADERS": "Authorization: Bearer s3cret"}, `OTEL_EXPORTER_OTLP_HEADERS, entry 1 is not a key=value pair`},
		"traces protocol": {map[string]string{envTracesEndpoint: "http://127.0.0.1:4318", envProtocol: ProtocolGRPC, envTracesProtocol: "udp"}, `"udp"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			_, err := Setup(context.Background(), "test", "v0")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %s", err, c.want)
			}
			// A header's value is often a secret.
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("error %q shows a header's value", err)
			}
		})
	}
}

// exportOne starts and ends one span with tracing set up from the
// environment, and flushes it.
func exportOne(t *testing.T) {
	t.Helper()
	p, err := Setup(context.Background(), "tracing-test", "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	if !p.Enabled() {
		t.Fatal("tracing is off")
	}
	_, span := p.Tracer("test").Start(context.Background(), "exported-span", trace.WithSpanKind(trace.SpanKindServer))
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestExportOverHTTP: the HTTP exporter posts the span to the configured
// endpoint's /v1/traces, with the service name the environment gives and
// the version in its User-Agent.
func TestExportOverHTTP(t *testing.T) {
	var mu sync.Mutex
	var got []*collectortrace.ExportTraceServiceRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := &collectortrace.ExportTraceServiceRequest{}
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, req) != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		// Setup's version names the exporter.
		if ua := r.Header.Get("User-Agent"); ua != "mcp-operator-otlp/v1.2.3" {
			http.Error(w, "User-Agent "+ua, http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, req)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(nil)
	}))
	defer srv.Close()
	clearEnv(t)
	t.Setenv(envEndpoint, srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "renamed-by-env")
	exportOne(t)
	mu.Lock()
	defer mu.Unlock()
	wantExported(t, got, "renamed-by-env")
}

// TestExportOverGRPC: with protocol grpc the span goes to an OTLP gRPC
// trace service.
func TestExportOverGRPC(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc := &traceService{}
	gs := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(gs, svc)
	go func() { _ = gs.Serve(l) }()
	defer gs.Stop()
	clearEnv(t)
	t.Setenv(envTracesEndpoint, "http://"+l.Addr().String())
	t.Setenv(envProtocol, ProtocolGRPC)
	exportOne(t)
	svc.mu.Lock()
	defer svc.mu.Unlock()
	wantExported(t, svc.got, "tracing-test")
}

type traceService struct {
	collectortrace.UnimplementedTraceServiceServer
	mu  sync.Mutex
	got []*collectortrace.ExportTraceServiceRequest
}

func (s *traceService) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// wantExported fails unless the requests hold the one span, from service.
func wantExported(t *testing.T, got []*collectortrace.ExportTraceServiceRequest, service string) {
	t.Helper()
	var names []string
	for _, req := range got {
		for _, rs := range req.ResourceSpans {
			svc := ""
			for _, kv := range rs.Resource.Attributes {
				if kv.Key == "service.name" {
					svc = kv.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names = append(names, svc+"/"+s.Name)
				}
			}
		}
	}
	if len(names) != 1 || names[0] != service+"/exported-span" {
		t.Fatalf("exported %v, want [%s/exported-span]", names, service)
	}
}
