package testpeers

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// Jaeger is a Jaeger v2 all-in-one (an OpenTelemetry collector with
// Jaeger's in-memory storage and query API), built from the Go module
// pinned in hack/jaeger into bin/jaeger by 'make peers', listening on
// loopback ports of its own.
type Jaeger struct {
	*Process
	// OTLPHTTP and OTLPGRPC are its OTLP receivers, as
	// OTEL_EXPORTER_OTLP_ENDPOINT values (http/protobuf and grpc).
	OTLPHTTP, OTLPGRPC string
	// Query is the base URL of its query API (/api/v3/...).
	Query string
}

// jaegerConfig receives OTLP, keeps traces in memory and serves the query
// API; Jaeger's own metrics are off (they would listen on a fixed port); its
// logs say info, where it tells that it is ready.
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: info
extensions:
  jaeger_query:
    enable_tracing: false
    storage:
      traces: memory
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      memory:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%d
      http:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memory
`

// JaegerBinary is bin/jaeger.
func JaegerBinary() (string, error) { return find("bin", "jaeger") }

// JaegerConfig is the configuration of a Jaeger whose query API listens on
// the loopback ports query (HTTP) and queryGRPC, and its OTLP receivers on
// otlpGRPC and otlpHTTP.
func JaegerConfig(query, queryGRPC, otlpGRPC, otlpHTTP int) string {
	return fmt.Sprintf(jaegerConfig, query, queryGRPC, otlpGRPC, otlpHTTP)
}

// jaegerReady is what the collector logs once every extension, receiver
// and exporter has started: each of its ports is bound by then.
const jaegerReady = "Everything is ready"

// StartJaeger runs Jaeger until the test ends. Its four ports are picked
// free but could be taken by another process before Jaeger binds them
// (packages' tests run in parallel): a start that fails to bind is tried
// again on other ports, and Jaeger counts as up only once it says it has
// bound them all, not when a port merely answers (it could be another
// process's).
func StartJaeger(t testkit.TB) *Jaeger {
	t.Helper()
	return startJaeger(t, jaegerPorts)
}

// startJaeger is StartJaeger with the ports from pick: a test hands out a
// taken one.
func startJaeger(t testkit.TB, pick func(testkit.TB) (query, queryGRPC, otlpGRPC, otlpHTTP int)) *Jaeger {
	t.Helper()
	bin, err := JaegerBinary()
	if err != nil {
		t.Fatal(err)
	}
	const attempts = 5
	for attempt := 1; ; attempt++ {
		query, queryGRPC, otlpGRPC, otlpHTTP := pick(t)
		config := filepath.Join(t.TempDir(), "jaeger.yaml")
		if err := os.WriteFile(config, []byte(JaegerConfig(query, queryGRPC, otlpGRPC, otlpHTTP)), 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := start(t, query, nil, bin, "--config", config)
		if err == nil {
			err = waitForLog(p, jaegerReady, 60*time.Second)
		}
		if err == nil {
			return &Jaeger{
				Process:  p,
				OTLPHTTP: fmt.Sprintf("http://127.0.0.1:%d", otlpHTTP),
				OTLPGRPC: fmt.Sprintf("http://127.0.0.1:%d", otlpGRPC),
				Query:    fmt.Sprintf("http://127.0.0.1:%d", query),
			}
		}
		if p != nil {
			p.Kill()
		}
		if attempt == attempts || !strings.Contains(err.Error(), "address already in use") {
			t.Fatalf("jaeger did not start (attempt %d of %d): %v", attempt, attempts, err)
		}
	}
}

// jaegerPorts picks Jaeger's ports, free right now.
func jaegerPorts(t testkit.TB) (query, queryGRPC, otlpGRPC, otlpHTTP int) {
	return testkit.FreePort(t), testkit.FreePort(t), testkit.FreePort(t), testkit.FreePort(t)
}

// waitForLog waits until p's log holds line, or fails when p exits first.
func waitForLog(p *Process, line string, wait time.Duration) error {
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		// Read before looking at the exit: a process that logged and then
		// exited is not up.
		log := p.Log()
		if p.Exited() {
			return fmt.Errorf("exited: %s", log)
		}
		if strings.Contains(log, line) {
			return nil
		}
	}
	return fmt.Errorf("did not log %q within %s: %s", line, wait, p.Log())
}

// JaegerSpan is one span of a trace as Jaeger's query API returns it.
type JaegerSpan struct {
	Service, Name, SpanID, ParentSpanID string
	// Kind is OTLP's: 1 internal, 2 server, 3 client.
	Kind       int
	Attributes map[string]string
}

// Trace is the spans Jaeger holds of the trace with the hex id traceID;
// none (and no error) while it holds none.
func (j *Jaeger) Trace(traceID string) ([]JaegerSpan, error) { return JaegerTrace(j.Query, traceID) }

// JaegerTrace is the spans of the trace traceID that the Jaeger whose
// query API is at query (http://host:port) holds; none (and no error)
// while it holds none.
func JaegerTrace(query, traceID string) ([]JaegerSpan, error) {
	// A stalled collector fails the poll, not the whole package's run.
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(query + "/api/v3/traces/" + traceID)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jaeger's query API answered %d: %s", resp.StatusCode, body)
	}
	var doc struct {
		Result struct {
			ResourceSpans []struct {
				Resource struct {
					Attributes []otlpAttribute `json:"attributes"`
				} `json:"resource"`
				ScopeSpans []struct {
					Spans []struct {
						SpanID       string          `json:"spanId"`
						ParentSpanID string          `json:"parentSpanId"`
						Name         string          `json:"name"`
						Kind         int             `json:"kind"`
						Attributes   []otlpAttribute `json:"attributes"`
					} `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("jaeger's answer is not the OTLP JSON expected: %w: %.300s", err, body)
	}
	var out []JaegerSpan
	for _, rs := range doc.Result.ResourceSpans {
		service := attributes(rs.Resource.Attributes)["service.name"]
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				out = append(out, JaegerSpan{Service: service, Name: s.Name, SpanID: s.SpanID, ParentSpanID: s.ParentSpanID, Kind: s.Kind, Attributes: attributes(s.Attributes)})
			}
		}
	}
	return out, nil
}

type otlpAttribute struct {
	Key   string `json:"key"`
	Value struct {
		StringValue *string `json:"stringValue"`
		IntValue    *string `json:"intValue"`
		BoolValue   *bool   `json:"boolValue"`
	} `json:"value"`
}

func attributes(as []otlpAttribute) map[string]string {
	out := map[string]string{}
	for _, a := range as {
		switch v := a.Value; {
		case v.StringValue != nil:
			out[a.Key] = *v.StringValue
		case v.IntValue != nil:
			out[a.Key] = *v.IntValue
		case v.BoolValue != nil:
			out[a.Key] = strconv.FormatBool(*v.BoolValue)
		}
	}
	return out
}
