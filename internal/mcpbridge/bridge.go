// Package mcpbridge is the bridge: one authenticated MCP endpoint for
// agents in front of the MCP servers the controller runs. Every request
// goes through one pipeline, whose stages read top to bottom in
// pipeline.go: authenticate → decode and check → establish → resolve the
// target → resume → decide → ask and record the decision → forward →
// output pipeline → record the result → answer (docs/architecture.md).
//
// The agent side is a Streamable HTTP server of our own on net/http rather
// than mcp-go's: mcp-go's server has no body limit, matches JSON keys
// case-insensitively (a policy bypass), answers 200 for unknown sessions,
// keeps sessions in one process's memory (a replica's loss ends them),
// drops notifications silently and re-types results. Here requests are
// checked by rawjson.Check before anything reads them, sessions are sealed
// tokens any replica verifies (package session), results pass through as
// raw JSON, and both protocol eras are spoken: 2026-07-28 (stateless,
// server/discover, input_required) and 2025-11-25 and older (initialize,
// Mcp-Session-Id, server-initiated elicitation on the response stream).
package mcpbridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-operator/mcp-operator/internal/approval"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/activity"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/artifact"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn/oauth"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/idlemem"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/metrics"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/signed"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstreamcred"
	"github.com/mcp-operator/mcp-operator/internal/policy"
	"github.com/mcp-operator/mcp-operator/internal/redact"
)

// Tool name styles (--tool-name-style).
const (
	StyleDotted     = "dotted"
	StyleUnderscore = "underscore"
)

// Defaults of Config.
const (
	DefaultMaxBodyBytes  = 4 << 20
	DefaultMaxConcurrent = 1024
	// DefaultMaxBodyBytesInFlight is 16 bodies of the largest size.
	DefaultMaxBodyBytesInFlight = 16 * DefaultMaxBodyBytes
	DefaultCallTimeout          = 60 * time.Second
	// DefaultRequestReadTimeout is a third of the server's ReadTimeout: a
	// request that has not arrived by then is not coming soon.
	DefaultRequestReadTimeout = 10 * time.Second
)

// Config is everything the bridge needs. Required: Registry, Auth,
// Sessions, Sealer, Audit, Pipeline.
type Config struct {
	Registry *routes.Registry
	// Activity renews the servers' activity Leases and wakes sleeping
	// servers; nil where no server sleeps (a request for a sleeping server
	// is then refused as for any server away).
	Activity *activity.Recorder
	Auth     authn.Authenticator
	Sessions *session.Manager
	// Sealer signs the requestState of 2026-07-28 approvals.
	Sealer   *signed.Sealer
	Audit    *audit.Writer
	Pipeline *output.Pipeline
	// Artifacts serves artifact:// URIs back to the subject that made them
	// (nil: none are served).
	Artifacts *artifact.Store
	// Redactor returns the redactor of a server (its Secret values); nil
	// redacts the credential shapes only.
	Redactor func(namespace, server string) *redact.Redactor
	// Credentials hands out callers' own credentials for remote servers
	// (an exchanged token, the caller's Secret); nil: a call to a server
	// that takes them is refused.
	Credentials *upstreamcred.Store
	// Limiter enforces the policies' rate limits (nil: none).
	Limiter *policy.RateLimiter
	// Approvals puts asked requests to a person through ToolApprovals
	// (nil: the ToolApproval channel is never used).
	Approvals *approval.Broker
	Metrics   *metrics.Metrics
	Log       logr.Logger
	// Idle counts the agents' requests for giving the heap's free pages
	// back while the bridge is idle (nil: nothing counts). It must be the
	// Releaser whose Wrap serves Handler: a listen stream hands back the
	// count of the POST that Wrap took.
	Idle *idlemem.Releaser
	// Tracer makes a span of every request and of its pipeline's stages
	// (spans.go); nil: no tracing, at no cost.
	Tracer trace.Tracer

	// ToolNameStyle is dotted (mcp.<server>.<tool>) or underscore.
	ToolNameStyle string
	// MaxBodyBytes bounds a request body.
	MaxBodyBytes int64
	// MaxBodyBytesInFlight bounds the bytes of the request bodies this
	// replica has read or is reading, together: many slow bodies, each
	// within MaxBodyBytes, must not take unbounded memory (at least
	// MaxBodyBytes).
	MaxBodyBytesInFlight int64
	// MaxConcurrent bounds the requests served at once on this replica.
	MaxConcurrent int
	// MaxSubjectConcurrent bounds the requests of one caller in flight at
	// once, in all its sessions or in none (a session has its own bound
	// too).
	MaxSubjectConcurrent int
	// CallTimeout is the deadline of a forwarded call.
	CallTimeout time.Duration
	// RequestReadTimeout bounds authenticating a request and reading its
	// body, both done before the request takes a shared slot
	// (DefaultRequestReadTimeout when zero).
	RequestReadTimeout time.Duration
	// PublicURL is where agents reach the bridge (scheme and host, as
	// https://bridge.example.com), behind whatever ingress terminates TLS:
	// the only base of the absolute URLs the server cards give. Empty:
	// the cards give the endpoint's path alone, as a request's Host and
	// scheme behind an ingress say nothing reliable.
	PublicURL string
	// OAuth, when set, makes the bridge an OAuth protected resource: it
	// serves RFC 9728 metadata and its refusals say where to get a token
	// (Auth must then accept the issuers' tokens: oauth.Authenticator).
	// Nil: ServiceAccount tokens only, and no metadata.
	OAuth *oauth.Resource
	// AllowedHosts, when set, are the only Host values accepted (host, or
	// host:port). Empty: any Host, except that a bridge listening on a
	// loopback address accepts only loopback names (DNS rebinding).
	AllowedHosts []string
	// AllowedOrigins are the Origin values accepted; a request with any
	// other Origin is refused (403). Requests without Origin (not from a
	// browser) pass.
	AllowedOrigins []string
	// LoopbackOnly makes Host checking accept only localhost names.
	LoopbackOnly bool
	// UpdateQueue bounds the resource updates waiting for one agent's
	// stream (DefaultUpdateQueue when zero); past it they are dropped.
	UpdateQueue int
	// BlockInjection withholds every tool result, prompt expansion and
	// resource with injection findings: a floor under the policies, whose
	// rules can ask for blocking per tool and prompt (injection: Block) but
	// never turn it off.
	BlockInjection bool
	// Version is the bridge's version in serverInfo.
	Version string
	// Once, when set, makes single use of sealed states hold across the
	// replicas (state.go); without it, each replica remembers its own.
	Once OnceLedger
	// Clock and NewCallID are fixed in tests (time.Now and random ids by default).
	Clock     func() time.Time
	NewCallID func() string
}

// Bridge serves agents. Build it with New.
type Bridge struct {
	cfg    Config
	engine atomic.Pointer[policy.Engine]
	limits limits
	ready  atomic.Bool
	// stop ends the work of a stopping replica (shutdown.go).
	stop *stopper
	subs *hub
	// parked are the calls waiting here for their agent's answer to the
	// server's question, by id (parked.go).
	parked sync.Map
	// parkedRan are the parked calls that ended upstream with a result
	// before their agent resumed them, by id, until their deadline: a
	// resume of one is told the call ran (parked.go).
	parkedRan sync.Map
	// credSessions are the sessions whose end forgets the credentials
	// handed out in them (credential.go), by session id.
	credSessions sync.Map
	// spent are the sealed requestStates already used (state.go),
	// until they expire.
	spent signed.Spent
	// callTimedOut is the cause of a forwarded call's end at its deadline
	// (contextWithCallTimeout), built once: CallTimeout is fixed.
	callTimedOut error
	// searches keeps the tool search index (search.go).
	searches searchIndexes
}

// New returns a bridge; it denies everything until SetEngine is called.
func New(cfg Config) *Bridge {
	if cfg.ToolNameStyle == "" {
		cfg.ToolNameStyle = StyleDotted
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxBodyBytesInFlight <= 0 {
		cfg.MaxBodyBytesInFlight = DefaultMaxBodyBytesInFlight
	}
	cfg.MaxBodyBytesInFlight = max(cfg.MaxBodyBytesInFlight, cfg.MaxBodyBytes)
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = DefaultMaxConcurrent
	}
	if cfg.MaxSubjectConcurrent <= 0 {
		cfg.MaxSubjectConcurrent = 4 * session.DefaultMaxConcurrent
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.RequestReadTimeout <= 0 {
		cfg.RequestReadTimeout = DefaultRequestReadTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.NewCallID == nil {
		cfg.NewCallID = randomID
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.UpdateQueue <= 0 {
		cfg.UpdateQueue = DefaultUpdateQueue
	}
	b := &Bridge{cfg: cfg, limits: newLimits(cfg), stop: newStopper(),
		callTimedOut: fmt.Errorf("the call's deadline (%s) passed: %w", cfg.CallTimeout, context.DeadlineExceeded)}
	b.engine.Store(policy.NewEngine())
	if cfg.Approvals != nil {
		// A stopping replica's approvals write their last status in time
		// for the audit stream.
		cfg.Approvals.WriteDeadline = b.stop.handlersDeadline
	}
	b.subs = newHub(b)
	if cfg.Registry != nil {
		// The servers' connections learn from the hub which resources to
		// hold, and hand it their updates.
		cfg.Registry.SetSubscriptions(b.subs)
	}
	return b
}

func randomID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call-" + hex.EncodeToString(b[:])
}

// SetEngine installs the compiled policies (on every ToolPolicy change).
func (b *Bridge) SetEngine(e *policy.Engine) { b.engine.Store(e) }

// SetReady marks the bridge ready (caches synced) for /readyz.
func (b *Bridge) SetReady(ready bool) { b.ready.Store(ready) }

// Handler serves the agents: /mcp, /mcp/search (the same with tool
// search) and /servers/<name>/mcp, each with its server card at
// <endpoint>/server-card, and, when OAuth is configured, the protected
// resource metadata of each (/.well-known/oauth-protected-resource<endpoint>);
// nothing else.
// Metrics and health are on OpsHandler's own listener: /metrics names every
// server and tool with call counts and decisions, and must not answer
// whoever reaches the agents' port (any Host, no token, DNS rebinding).
func (b *Bridge) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) { b.serveMCP(w, r, "") })
	mux.HandleFunc(SearchPath, func(w http.ResponseWriter, r *http.Request) { b.serveMCP(w, r, "") })
	// Server cards (servercard.go).
	mux.HandleFunc("/mcp/server-card", func(w http.ResponseWriter, r *http.Request) { b.serveCard(w, r, "") })
	mux.HandleFunc(SearchPath+"/server-card", func(w http.ResponseWriter, r *http.Request) { b.serveCard(w, r, "") })
	mux.HandleFunc("/servers/{name}/mcp/server-card", func(w http.ResponseWriter, r *http.Request) { b.serveCard(w, r, r.PathValue("name")) })
	mux.HandleFunc("/servers/{name}/mcp", func(w http.ResponseWriter, r *http.Request) { b.serveMCP(w, r, r.PathValue("name")) })
	if b.cfg.OAuth != nil {
		for _, path := range []string{"", "/mcp", SearchPath, "/servers/{name}/mcp"} {
			mux.HandleFunc("GET "+oauth.MetadataPath+path, b.serveResourceMetadata)
		}
	}
	return b.closingWhileStopping(mux)
}

// closingWhileStopping answers every request of a stopping replica with
// Connection: close, so that its agent's client drops the connection after
// that answer instead of sending its next request on a connection the
// replica is about to close (which fails as EOF, sent but unanswered).
func (b *Bridge) closingWhileStopping(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b.stop.stopping.Load() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

// OpsHandler serves /healthz, /readyz and, when metricsHandler is not nil,
// /metrics, for the kubelet and Prometheus on a port agents are not given.
func (b *Bridge) OpsHandler(metricsHandler http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case b.stop.stopping.Load():
			// Failing first takes the replica out of the Service's
			// endpoints before it stops answering.
			http.Error(w, "not ready: this replica is stopping", http.StatusServiceUnavailable)
			return
		case !b.ready.Load():
			http.Error(w, "not ready: the MCPServer and ToolPolicy caches have not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	if metricsHandler != nil {
		mux.Handle("/metrics", metricsHandler)
	}
	return opsHostGuard(b.cfg.AllowedHosts, mux)
}

// NewServer wraps the handler in an http.Server with the timeouts a server
// facing many clients needs. Write has no timeout: response streams last as
// long as their call, which has its own deadline.
func NewServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// hostAllowed implements the Host check (DNS rebinding protection).
func (b *Bridge) hostAllowed(host string) bool {
	if len(b.cfg.AllowedHosts) > 0 {
		name := hostName(host)
		for _, h := range b.cfg.AllowedHosts {
			if strings.EqualFold(h, host) || strings.EqualFold(h, name) {
				return true
			}
		}
		return false
	}
	if b.cfg.LoopbackOnly {
		switch hostName(host) {
		case "localhost", "127.0.0.1", "::1":
			return true
		}
		return false
	}
	return true
}

func (b *Bridge) originAllowed(origin string) bool {
	if origin == "" {
		return true
	}
	for _, o := range b.cfg.AllowedOrigins {
		if strings.EqualFold(o, origin) {
			return true
		}
	}
	if b.cfg.LoopbackOnly && len(b.cfg.AllowedOrigins) == 0 {
		// A loopback bridge accepts pages served from loopback, as the MCP
		// SDKs' localhost protection does.
		for _, p := range []string{"http://localhost", "http://127.0.0.1", "http://[::1]", "https://localhost", "https://127.0.0.1", "https://[::1]"} {
			if origin == p || strings.HasPrefix(origin, p+":") {
				return true
			}
		}
	}
	return false
}

func hostName(host string) string {
	if strings.HasPrefix(host, "[") {
		if i := strings.Index(host, "]"); i > 0 {
			return host[1:i]
		}
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 && strings.Count(host, ":") == 1 {
		return host[:i]
	}
	return host
}

func (b *Bridge) now() time.Time { return b.cfg.Clock() }

// contextWithCallTimeout bounds a forwarded call: what it ends at the
// deadline is told so (context.Cause), with the deadline's length.
func (b *Bridge) contextWithCallTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, b.cfg.CallTimeout, b.callTimedOut)
}
