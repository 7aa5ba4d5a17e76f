// Command upstreamcreds measures what a caller's own credential upstream
// costs a call through the bridge, side by side in one run, in alternating
// chunks of sequential tools/calls by the same callers to two servers that
// are one upstream (mcp-go's Streamable HTTP server, an echo tool), one of
// each kind:
//
//	static     spec.remote.auth.bearerTokenSecretRef: one shared token, on
//	           the server's own connection;
//	exchanged  spec.remote.auth.tokenExchange: each caller's token
//	           exchanged (RFC 8693) at a token endpoint on loopback, the
//	           result cached, sent on a connection of the caller's own.
//
// It runs two phases with the servers' kinds swapped, so that what one
// server name costs more than the other falls on both kinds alike. With
// the cache warm, the exchanged calls' p50 must be within 1.05x of the
// static calls'. It also reports a first call's added latency: fresh
// callers' first call of each kind (the exchange and the caller's own
// connection and upstream session, against an upstream session alone).
// The exchange client's Secret is read from a real API server (envtest). Run it with `make bench-upstream-creds`; it
// exits 1 on a missed target.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/bench/internal/benchutil"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/identity"
	"github.com/mcp-operator/mcp-operator/internal/k8s/mcpstatus"
	mcpclient "github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/probe"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/signed"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstreamcred"
	"github.com/mcp-operator/mcp-operator/internal/policy"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

const (
	namespace = "tools"
	// maxRatio is the target: exchanged p50 / static p50 with a warm cache.
	maxRatio = 1.05
)

func main() {
	rounds := flag.Int("rounds", 5, "alternating rounds")
	calls := flag.Int("calls", 2000, "sequential calls per server per round, spread over the callers")
	chunk := flag.Int("chunk", 10, "sequential calls to one server in a turn")
	callers := flag.Int("callers", 8, "warm callers, each in a session of its own")
	firsts := flag.Int("firsts", 40, "fresh callers whose first call is timed, per server")
	flag.Parse()
	if err := run(*rounds, *calls, *chunk, *callers, *firsts); err != nil {
		fmt.Fprintln(os.Stderr, "upstreamcreds:", err)
		os.Exit(1)
	}
}

func run(rounds, calls, chunk, callers, firsts int) error {
	ctx := context.Background()
	env, err := testenv.New()
	if err != nil {
		return err
	}
	cfg, err := env.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	k, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		return err
	}
	if err := k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}
	te := newTokenEndpoint()
	defer te.srv.Close()
	if err := k.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "bridge-client"},
		StringData: map[string]string{"client_id": clientID, "client_secret": clientSecret}}); err != nil {
		return err
	}
	up := httptest.NewServer(mcpgoserver.NewStreamableHTTPServer(echoServer()))
	defer up.Close()

	// Two phases, the two servers' kinds swapped between them: whatever
	// one server name costs more than the other (where it sorts, which
	// connection was made first) falls on both kinds alike.
	var m measured
	for phase, exchangedName := range []string{"beta", "alpha"} {
		if err := measure(ctx, &m, k, up.URL+"/mcp", te.srv.URL+"/token", exchangedName, phase, rounds, calls, chunk, callers, firsts); err != nil {
			return err
		}
	}
	static, exchanged, firstStatic, firstExchanged := m.static, m.exchanged, m.firstStatic, m.firstExchanged
	exchangesWarm := te.exchanges.Load()
	callers *= 2 // a bridge's callers per phase
	ps, px := benchutil.Pct(static, 50), benchutil.Pct(exchanged, 50)
	ratio := float64(px) / float64(ps)
	ok := ratio <= maxRatio && exchangesWarm == int64(callers)
	fmt.Printf("upstream credentials, %d sequential tools/calls per kind by %d callers (session era), interleaved in chunks of %d, in two phases with the servers' kinds swapped\n", len(static), callers, chunk)
	fmt.Printf("  %-10s p50 %8s  p99 %8s\n", "static", ps.Round(time.Microsecond), benchutil.Pct(static, 99).Round(time.Microsecond))
	fmt.Printf("  %-10s p50 %8s  p99 %8s  (%d exchanges for %d callers)\n", "exchanged", px.Round(time.Microsecond), benchutil.Pct(exchanged, 99).Round(time.Microsecond), exchangesWarm, callers)
	fmt.Printf("  exchanged/static p50 %.3fx (target <= %.2fx) %s\n", ratio, maxRatio, benchutil.Verdict(ratio <= maxRatio))
	fs, fx := benchutil.Pct(firstStatic, 50), benchutil.Pct(firstExchanged, 50)
	fmt.Printf("first call of a fresh caller (%d of each kind): static p50 %s, exchanged p50 %s: the exchange and the caller's own connection add %s (token endpoint on loopback)\n",
		len(firstStatic), fs.Round(time.Microsecond), fx.Round(time.Microsecond), (fx - fs).Round(time.Microsecond))
	if !ok {
		return fmt.Errorf("MISSED: exchanged/static %.3fx, %d exchanges for %d warm callers", ratio, exchangesWarm, callers)
	}
	return nil
}

// measured are the call times of both phases, by kind.
type measured struct {
	static, exchanged, firstStatic, firstExchanged []time.Duration
}

// measure runs one phase: a bridge whose server exchangedName takes
// exchanged tokens and whose other server takes the shared one, warm
// callers' calls to both in alternating chunks, then fresh callers' first
// calls.
func measure(ctx context.Context, m *measured, k client.Client, upURL, tokenURL, exchangedName string, phase, rounds, calls, chunk, callers, firsts int) error {
	bridgeURL, stop, err := newBridge(ctx, k, upURL, tokenURL, exchangedName)
	if err != nil {
		return err
	}
	defer stop()
	kindOf := func(name string) *[]time.Duration {
		if name == exchangedName {
			return &m.exchanged
		}
		return &m.static
	}
	agents := make([]*mcpclient.Client, callers)
	for i := range agents {
		if agents[i], err = connect(ctx, bridgeURL, fmt.Sprintf("caller-%d-%d", phase, i)); err != nil {
			return err
		}
		defer agents[i].Close()
		for _, s := range serverNames { // warm: sessions, the cache
			if _, err := call(ctx, agents[i], s); err != nil {
				return err
			}
		}
	}
	if path := os.Getenv("BENCH_CPUPROFILE"); path != "" && phase == 0 {
		// Where the time goes, for finding the exchanged path's cost.
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	n, turn := 0, 0
	for range rounds {
		for done := 0; done < calls; done += chunk {
			// Which goes first alternates, so neither always follows the
			// other's garbage.
			order := slices.Clone(serverNames)
			if turn++; turn%2 == 0 {
				slices.Reverse(order)
			}
			for _, name := range order {
				out := kindOf(name)
				for range chunk {
					d, err := call(ctx, agents[n%callers], name)
					if err != nil {
						return err
					}
					*out = append(*out, d)
					n++
				}
			}
		}
	}
	// First calls of fresh callers, alternating which server is first.
	for i := range firsts {
		order := slices.Clone(serverNames)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, name := range order {
			a, err := connect(ctx, bridgeURL, fmt.Sprintf("fresh-%d-%s-%d", phase, name, i))
			if err != nil {
				return err
			}
			d, err := call(ctx, a, name)
			a.Close()
			if err != nil {
				return err
			}
			if name == exchangedName {
				m.firstExchanged = append(m.firstExchanged, d)
			} else {
				m.firstStatic = append(m.firstStatic, d)
			}
		}
	}
	return nil
}

// serverNames are the bench's two servers, one upstream.
var serverNames = []string{"alpha", "beta"}

// call times one tools/call of echo on server.
func call(ctx context.Context, a *mcpclient.Client, server string) (time.Duration, error) {
	start := time.Now()
	res, err := a.CallTool(ctx, "mcp."+server+".echo", json.RawMessage(`{"message":"hello"}`))
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("calling %s: %w", server, err)
	}
	if !strings.Contains(string(res), "hello") {
		return 0, fmt.Errorf("calling %s: answer %s", server, res)
	}
	return d, nil
}

func connect(ctx context.Context, url, token string) (*mcpclient.Client, error) {
	conn, err := streamhttp.New(streamhttp.Options{URL: url + "/mcp", BearerToken: token, MaxIdleConns: 4})
	if err != nil {
		return nil, err
	}
	return mcpclient.Connect(ctx, conn, mcpclient.Options{Era: mcpclient.EraSession, ClientName: "bench-agent"})
}

// echoServer is mcp-go's server with one tool that answers at once.
func echoServer() *mcpgoserver.MCPServer {
	s := mcpgoserver.NewMCPServer("echo", "1")
	s.AddTool(mcpgo.NewTool("echo", mcpgo.WithString("message", mcpgo.Required()), mcpgo.WithReadOnlyHintAnnotation(true), mcpgo.WithDestructiveHintAnnotation(false)),
		func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return mcpgo.NewToolResultText(req.GetString("message", "")), nil
		})
	return s
}

// callers authenticates every bench token as a ServiceAccount of
// namespace agents.
type callers struct{}

func (callers) Authenticate(_ context.Context, token string) (identity.Identity, error) {
	if token == "" {
		return identity.Identity{}, authn.ErrUnauthenticated
	}
	return identity.FromUserInfo("system:serviceaccount:agents:"+token, []string{"system:serviceaccounts", "system:serviceaccounts:agents"}), nil
}

// newBridge is a bridge in front of the upstream as two servers, one
// taking each caller's token exchanged (exchangedName), the other a shared
// token, published as the controller would from a probe.
func newBridge(ctx context.Context, k client.Client, upURL, tokenURL, exchangedName string) (string, func(), error) {
	res, err := probe.Run(ctx, probe.Target{HTTP: &streamhttp.Options{URL: upURL}}, probe.Options{Server: "echo"})
	if err != nil {
		return "", nil, err
	}
	var servers []v1alpha1.MCPServer
	for _, name := range serverNames {
		var s v1alpha1.MCPServer
		s.Namespace, s.Name, s.CreationTimestamp = namespace, name, metav1.Now()
		s.Spec.Remote = &v1alpha1.Remote{URL: upURL, Auth: &v1alpha1.RemoteAuth{BearerTokenSecretRef: &v1alpha1.SecretKeySelector{Name: "shared", Key: "token"}}}
		if name == exchangedName {
			s.Spec.Remote.Auth = &v1alpha1.RemoteAuth{TokenExchange: &v1alpha1.TokenExchange{
				TokenURL: tokenURL, Audience: "echo", ClientSecretRef: v1alpha1.LocalSecretReference{Name: "bridge-client"},
			}}
		}
		s.Status = v1alpha1.MCPServerStatus{
			Endpoint:      &v1alpha1.Endpoint{URL: upURL, PodName: "pod-1"},
			Capabilities:  mcpstatus.Capabilities(res.Capabilities),
			Tools:         mcpstatus.Tools(res.Catalog, nil),
			CatalogDigest: res.Catalog.Digest,
			Conditions:    []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Serving", LastTransitionTime: metav1.Now()}},
		}
		servers = append(servers, s)
	}
	reg := routes.NewRegistry(upstream.Options{}, logr.Discard())
	reg.Update(routes.Build(servers), func(s *routes.Server) (upstream.Target, error) {
		return upstream.Target{Namespace: s.Namespace, Name: s.Name, URL: s.URL, Pod: s.Pod, BearerToken: "shared-static-token"}, nil
	})
	var p v1alpha1.ToolPolicy
	p.Namespace, p.Name = namespace, "bench"
	p.Spec.Subjects = []v1alpha1.Subject{{Kind: v1alpha1.SubjectGroup, Name: "system:serviceaccounts:agents"}}
	p.Spec.Rules = []v1alpha1.ToolRule{{Tools: []string{"mcp.alpha.echo", "mcp.beta.echo"}, Decision: "allow"}}
	engine, errs := policy.Compile([]v1alpha1.ToolPolicy{p})
	if len(errs) > 0 {
		return "", nil, fmt.Errorf("bench policy: %v", errs)
	}
	sealer, _ := signed.New(signed.RandomKey())
	aw := audit.New(audit.Options{Sink: discard{}})
	b := mcpbridge.New(mcpbridge.Config{
		Registry: reg, Auth: callers{}, Sessions: session.NewManager(sealer, session.Options{}), Sealer: sealer, Audit: aw,
		Pipeline: &output.Pipeline{}, Limiter: policy.NewRateLimiter(nil), Log: logr.Discard(), CallTimeout: 30 * time.Second,
		Credentials: upstreamcred.New(upstreamcred.Options{Secrets: k, TokenEndpoints: []string{tokenURL}}),
	})
	b.SetEngine(engine)
	b.SetReady(true)
	srv := httptest.NewServer(b.Handler())
	return srv.URL, func() {
		srv.Close()
		reg.Update(routes.Build(nil), nil)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = aw.Close(ctx)
	}, nil
}

// discard is an audit sink that keeps nothing: the events are encoded and
// written as in production, to nowhere.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

const (
	clientID     = "mcp-bridge"
	clientSecret = "bench-client-secret-0123456789"
)

// tokenEndpoint answers RFC 8693 exchanges of the bench's tokens: a form
// POST, the client in HTTP Basic, the token-exchange grant. It counts
// them.
type tokenEndpoint struct {
	srv       *httptest.Server
	exchanges atomic.Int64
	issued    atomic.Int64
}

func newTokenEndpoint() *tokenEndpoint {
	te := &tokenEndpoint{}
	te.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if r.Method != http.MethodPost || r.ParseForm() != nil || !ok || id != clientID || secret != clientSecret ||
			r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" || r.PostForm.Get("subject_token") == "" ||
			!slices.Contains([]string{"echo"}, r.PostForm.Get("audience")) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_request"}`))
			return
		}
		if !strings.HasPrefix(r.PostForm.Get("subject_token"), "fresh-") {
			te.exchanges.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"access_token": fmt.Sprintf("exchanged-%d", te.issued.Add(1)), "token_type": "Bearer", "expires_in": 3600,
			"issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
		})
	}))
	return te
}
