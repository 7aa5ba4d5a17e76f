package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
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
	p.Transport = tr
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

// realisticPolicies: several policies, globs, one CEL condition on the
// called tool's rule, a deny, an ask, and a generous rate limit.
func realisticPolicies() []v1alpha1.ToolPolicy {
	mk := func(name string, subjects []v1alpha1.Subject, rules ...v1alpha1.ToolRule) v1alpha1.ToolPolicy {
		var p v1alpha1.ToolPolicy
		p.Namespace, p.Name = "tools", name
		p.Spec.Subjects = subjects
		p.Spec.Rules = rules
		return p
	}
	agents := []v1alpha1.Subject{{Kind: v1alpha1.SubjectGroup, Name: "system:serviceaccounts:agents"}}
	bench := []v1alpha1.Subject{{Kind: v1alpha1.SubjectServiceAccount, Namespace: "agents", Name: "bench"}}
	others := []v1alpha1.Subject{{Kind: v1alpha1.SubjectServiceAccount, Namespace: "other", Name: "x"}}
	a := mk("baseline", agents,
		v1alpha1.ToolRule{Tools: []string{"mcp.everything.test_*"}, Decision: "allow", When: `!has(args.path) || !args.path.startsWith("/etc")`},
		v1alpha1.ToolRule{Tools: []string{"mcp.everything.test_sampling", "mcp.everything.test_elicitation*"}, Decision: "deny"},
		v1alpha1.ToolRule{Risks: []v1alpha1.Risk{"destructive"}, Decision: "ask"},
	)
	a.Spec.RateLimit = &v1alpha1.RateLimit{CallsPerMinute: 10_000_000}
	b := mk("bench", bench, v1alpha1.ToolRule{Tools: []string{"mcp.*.test_simple_text"}, Decision: "allow"})
	c := mk("unrelated", others, v1alpha1.ToolRule{Tools: []string{"mcp.**"}, Decision: "allow"})
	return []v1alpha1.ToolPolicy{a, b, c}
}

// serveBridge runs the bridge in front of the upstream with a table made
// from a probe (as the controller publishes it) instead of an API server.
func serveBridge(listen, upstreamURL string) error {
	ctx := context.Background()
	res, err := probe.Run(ctx, probe.Target{HTTP: &streamhttp.Options{URL: upstreamURL}}, probe.Options{Server: "everything"})
	if err != nil {
		return err
	}
	var s v1alpha1.MCPServer
	s.Namespace, s.Name = "tools", "everything"
	s.Status = v1alpha1.MCPServerStatus{
		Endpoint:      &v1alpha1.Endpoint{URL: upstreamURL, PodName: "pod-1"},
		Capabilities:  mcpstatus.Capabilities(res.Capabilities),
		Tools:         mcpstatus.Tools(res.Catalog, nil),
		CatalogDigest: res.Catalog.Digest,
		Conditions:    []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Serving"}},
	}
	reg := routes.NewRegistry(upstream.Options{}, logr.Discard())
	reg.Update(routes.Build([]v1alpha1.MCPServer{s}), func(s *routes.Server) (upstream.Target, error) {
		return upstream.Target{Namespace: s.Namespace, Name: s.Name, URL: s.URL, Pod: s.Pod}, nil
	})
	dir, err := os.MkdirTemp("", "bench-bridge-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	store, err := artifact.Open(filepath.Join(dir, "artifacts"))
	if err != nil {
		return err
	}
	sink, err := audit.OpenFile(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		return err
	}
	sealer, _ := signed.New(signed.RandomKey())
	engine, errs := policy.Compile(realisticPolicies())
	if len(errs) > 0 {
		return fmt.Errorf("bench policies: %v", errs)
	}
	// Traced as the manager's bridge is: when the OTEL_* environment says
	// so (the bridge+otel child's).
	tp, err := tracing.Setup(ctx, "bench-bridge", "bench")
	if err != nil {
		return err
	}
	// One bench caller opens the 1,000 idle sessions of heapPerSession,
	// past the default cap of sessions per caller.
	b := mcpbridge.New(mcpbridge.Config{
		Registry: reg, Auth: &authn.TokenReview{Reviews: reviewer{}}, Sessions: session.NewManager(sealer, session.Options{MaxPerSubject: 10000}),
		Sealer: sealer, Audit: audit.New(audit.Options{Sink: sink}), Pipeline: &output.Pipeline{Store: store}, Artifacts: store,
		Limiter: policy.NewRateLimiter(nil), Log: logr.Discard(), CallTimeout: 30 * time.Second, Tracer: tp.Tracer("bench"),
	})
	b.SetEngine(engine)
	b.SetReady(true)
	mux := http.NewServeMux()
	mux.Handle("/", b.Handler())
	// Bench only: the heap after a GC, for heap per session.
	mux.HandleFunc("/debug/heap", func(w http.ResponseWriter, _ *http.Request) {
		runtime.GC()
		debug.FreeOSMemory()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		_, _ = io.WriteString(w, strconv.FormatUint(m.HeapAlloc, 10))
	})
	return mcpbridge.NewServer(listen, mux).ListenAndServe()
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
