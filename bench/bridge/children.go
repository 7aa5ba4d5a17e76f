package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	_ "net/http/pprof" // BENCH_BRIDGE_PPROF
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/k8s/mcpstatus"
	"github.com/mcp-operator/mcp-operator/internal/mcp/probe"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/artifact"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/signed"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/policy"
	"github.com/mcp-operator/mcp-operator/internal/tracing"
)

// benchToken is the agent's bearer token.
const benchToken = "bench-agent-token"

// serveProxy is the bare hop: a reverse proxy and nothing else.
func serveProxy(listen, upstreamURL string) error {
	u, err := url.Parse(upstreamURL)
	if err != nil {
		return err
	}
	p := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	p.FlushInterval = -1
	// The same pool of idle upstream connections as the bridge's, so that
	// the hop's cost is the hop's, not re-dialling (the default keeps 2).
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = upstream.IdleConns
	p.Transport = keepConns{tr}             // proxykeep.go
	p.ErrorLog = log.New(io.Discard, "", 0) // clients closing idle connections is not news
	return http.ListenAndServe(listen, p)
}

// reviewer answers TokenReviews as the API server would for the bench's
// ServiceAccount. The bridge asks it once per token per minute at most, so
// at steady state what is measured is the bridge's cache, as in production.
type reviewer struct{}

func (reviewer) Create(_ context.Context, tr *authv1.TokenReview, _ metav1.CreateOptions) (*authv1.TokenReview, error) {
	out := tr.DeepCopy()
	if tr.Spec.Token == benchToken {
		out.Status = authv1.TokenReviewStatus{
			Authenticated: true, Audiences: []string{authn.Audience},
			User: authv1.UserInfo{Username: "system:serviceaccount:agents:bench", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:agents"}},
		}
	}
	return out, nil
}

// benchPolicy is one ToolPolicy with one allow rule for the bench's
// ServiceAccount: the two tools the bench calls.
func benchPolicy() []v1alpha1.ToolPolicy {
	var p v1alpha1.ToolPolicy
	p.Namespace, p.Name = "tools", "bench"
	p.Spec.Subjects = []v1alpha1.Subject{{Kind: v1alpha1.SubjectServiceAccount, Namespace: "agents", Name: "bench"}}
	p.Spec.Rules = []v1alpha1.ToolRule{{Tools: []string{"mcp.everything.test_simple_text", "mcp.fast.echo"}, Decision: "allow"}}
	return []v1alpha1.ToolPolicy{p}
}

// serverFromProbe is the MCPServer the controller would publish for an
// upstream: its catalog from a real probe.
func serverFromProbe(ctx context.Context, name, addr string) (v1alpha1.MCPServer, error) {
	var s v1alpha1.MCPServer
	res, err := probe.Run(ctx, probe.Target{HTTP: &streamhttp.Options{URL: addr}}, probe.Options{Server: name})
	if err != nil {
		return s, fmt.Errorf("probing %s: %w", name, err)
	}
	s.Namespace, s.Name = "tools", name
	s.Status = v1alpha1.MCPServerStatus{
		Endpoint:      &v1alpha1.Endpoint{URL: addr, PodName: "pod-1"},
		Capabilities:  mcpstatus.Capabilities(res.Capabilities),
		Tools:         mcpstatus.Tools(res.Catalog, nil),
		CatalogDigest: res.Catalog.Digest,
		Conditions:    []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Serving", LastTransitionTime: metav1.Now()}},
	}
	return s, nil
}

// serveBridge runs the bridge in front of the upstreams (name=URL,...) with
// a table made from probes (as the controller publishes it) instead of an
// API server: what is measured is the request path. The real process, with
// its informers, is measured for memory in manager.go.
func serveBridge(listen, upstreams string) error {
	b, stop, err := newBridge(context.Background(), upstreams)
	if err != nil {
		return err
	}
	defer stop()
	mux := http.NewServeMux()
	mux.Handle("/", b.Handler())
	// Bench only: the heap and goroutine stacks after a GC, for the memory
	// an idle session holds.
	mux.HandleFunc("/debug/heap", func(w http.ResponseWriter, _ *http.Request) {
		runtime.GC()
		debug.FreeOSMemory()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		_, _ = io.WriteString(w, strconv.FormatUint(m.HeapAlloc+m.StackInuse, 10))
	})
	if os.Getenv("BENCH_BRIDGE_PPROF") != "" {
		// Profiles under load, for finding where the bridge's time goes.
		mux.Handle("/debug/pprof/", http.DefaultServeMux)
	}
	return mcpbridge.NewServer(listen, mux).ListenAndServe()
}

// newBridge is the bench's bridge in front of the upstreams (name=URL,...),
// ready to serve; stop closes its audit log and removes its files.
func newBridge(ctx context.Context, upstreams string) (_ *mcpbridge.Bridge, stop func(), err error) {
	var servers []v1alpha1.MCPServer
	for _, kv := range strings.Split(upstreams, ",") {
		name, addr, _ := strings.Cut(kv, "=")
		s, err := serverFromProbe(ctx, name, addr)
		if err != nil {
			return nil, nil, err
		}
		servers = append(servers, s)
	}
	reg := routes.NewRegistry(upstream.Options{}, logr.Discard())
	reg.Update(routes.Build(servers), func(s *routes.Server) (upstream.Target, error) {
		return upstream.Target{Namespace: s.Namespace, Name: s.Name, URL: s.URL, Pod: s.Pod}, nil
	})
	dir, err := os.MkdirTemp("", "bench-bridge-")
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	store, err := artifact.Open(filepath.Join(dir, "artifacts"))
	if err != nil {
		return nil, nil, err
	}
	sink, err := audit.OpenFile(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		return nil, nil, err
	}
	sealer, _ := signed.New(signed.RandomKey())
	engine, errs := policy.Compile(benchPolicy())
	if len(errs) > 0 {
		return nil, nil, fmt.Errorf("bench policy: %v", errs)
	}
	// Traced as the manager's bridge is: when the OTEL_* environment says
	// so (the bridge+otel child's).
	tp, err := tracing.Setup(ctx, "bench-bridge", "bench")
	if err != nil {
		return nil, nil, err
	}
	aw := audit.New(audit.Options{Sink: sink})
	b := mcpbridge.New(mcpbridge.Config{
		Registry: reg, Auth: &authn.TokenReview{Reviews: reviewer{}}, Sessions: session.NewManager(sealer, session.Options{MaxPerSubject: 4000}), // one identity opens the idle sessions
		Sealer: sealer, Audit: aw, Pipeline: &output.Pipeline{Store: store}, Artifacts: store,
		Limiter: policy.NewRateLimiter(nil), Log: logr.Discard(), CallTimeout: 30 * time.Second, Tracer: tp.Tracer("bench"),
	})
	b.SetEngine(engine)
	b.SetReady(true)
	return b, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = aw.Close(ctx)
		_ = os.RemoveAll(dir)
	}, nil
}

// heapOf asks a bridge child for its heap.
func heapOf(base string) (uint64, error) {
	resp, err := http.Get(base + "/debug/heap")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var n uint64
	err = json.NewDecoder(resp.Body).Decode(&n)
	return n, err
}
