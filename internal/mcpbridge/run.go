package mcpbridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientevents "k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/approval"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/artifact"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/metrics"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/signed"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/watch"
	"github.com/mcp-operator/mcp-operator/internal/policy"
)

// Options assemble a running bridge (Start). Zero values are defaults.
type Options struct {
	// Rest reaches the API server; Scheme must know the project's kinds.
	Rest   *rest.Config
	Scheme *runtime.Scheme
	// Namespaces the bridge serves (at least one).
	Namespaces []string
	// Auth checks tokens; nil uses TokenReview through Rest.
	Auth authn.Authenticator
	// SessionKey is shared by the replicas (nil: a random key, so sessions
	// do not survive this replica).
	SessionKey []byte
	// AuditSink receives the audit events (stdout when nil).
	AuditSink io.Writer
	ArgsMode  audit.ArgsMode
	// ArtifactDir holds results over MaxResultBytes (none when empty or not
	// writable: such results then fail).
	ArtifactDir    string
	MaxResultBytes int
	// ArtifactLimits are the store's retention and quota.
	ArtifactLimits artifact.Limits
	// Registry gets the metrics (a fresh registry when nil).
	Registry *prometheus.Registry
	// Bridge holds the remaining settings (Registry, Auth, Sessions, Sealer,
	// Audit, Pipeline, Artifacts, Redactor, Limiter, Metrics are filled in).
	Bridge Config
	// Session tunes sessions.
	Session session.Options
	// MaxUpstreamSessions bounds the agents' upstream sessions to one
	// server (upstream.Options.MaxAgentSessions; 0: its default).
	MaxUpstreamSessions int
	// SecretsResync is how often the Secrets of remote servers are read
	// again, so that rotated credentials are used (default a minute).
	SecretsResync time.Duration
	// ToolApprovals turns the ToolApproval channel on: the bridge creates
	// ToolApprovals for the requests policies ask about through it, and
	// watches them.
	ToolApprovals bool
	// ApprovalNotifier is told of each ToolApproval (nil: nobody).
	ApprovalNotifier approval.Notifier
	Log              logr.Logger
}

// Runtime is a started bridge.
type Runtime struct {
	Bridge   *Bridge
	Watcher  *watch.Watcher
	Registry *routes.Registry
	Audit    *audit.Writer
	Sessions *session.Manager
	// Handler serves the agents (/mcp, /servers/<name>/mcp).
	Handler http.Handler
	// OpsHandler serves /metrics, /healthz and /readyz, on a listener of
	// their own.
	OpsHandler http.Handler
	done       chan error
}

// Wait returns when the watcher stops (ctx ended, or it failed).
func (r *Runtime) Wait() error { return <-r.done }

// Start builds the bridge, starts watching MCPServers and ToolPolicies and
// returns once the caches have synced (or ctx ends).
func Start(ctx context.Context, o Options) (*Runtime, error) {
	if len(o.Namespaces) == 0 {
		return nil, errors.New("while starting the bridge: no namespaces to serve")
	}
	nsMap := map[string]cache.Config{}
	for _, ns := range o.Namespaces {
		nsMap[ns] = cache.Config{}
	}
	// The bridge never reads managedFields, and they can be the largest part
	// of an object it caches (an entry per tool an MCPServer's status
	// lists): they stay out of the cache. Its only writes, ToolApproval
	// status updates, leave metadata as the API server has it.
	c, err := cache.New(o.Rest, cache.Options{Scheme: o.Scheme, DefaultNamespaces: nsMap, DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return nil, fmt.Errorf("while creating the MCPServer cache: %w", err)
	}
	reader, err := client.New(o.Rest, client.Options{Scheme: o.Scheme})
	if err != nil {
		return nil, fmt.Errorf("while creating the Kubernetes client: %w", err)
	}
	auth := o.Auth
	if auth == nil {
		cs, err := kubernetes.NewForConfig(o.Rest)
		if err != nil {
			return nil, fmt.Errorf("while creating the TokenReview client: %w", err)
		}
		auth = &authn.TokenReview{Reviews: cs.AuthenticationV1().TokenReviews()}
	}
	key := o.SessionKey
	if key == nil {
		key = signed.RandomKey()
	}
	sealer, err := signed.New(key)
	if err != nil {
		return nil, err
	}
	// Without a writable artifact directory the bridge still serves;
	// only results over the cap fail (and say why).
	var store *artifact.Store
	if o.ArtifactDir != "" {
		if store, err = artifact.New(o.ArtifactDir, o.ArtifactLimits); err != nil {
			o.Log.Error(err, "no artifact store: results over the size cap will fail", "dir", o.ArtifactDir)
			store = nil
		}
	}
	aw := audit.New(audit.Options{Sink: o.AuditSink, ArgsMode: o.ArgsMode, Clock: o.Bridge.Clock})
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	sessions := session.NewManager(sealer, o.Session)
	m := metrics.New(reg, func() float64 { return float64(sessions.Len()) }, func() float64 { return float64(aw.Stats().Dropped) })
	if store != nil {
		metrics.RegisterArtifacts(reg, func() (int64, int64, int64) { st := store.Stats(); return st.Bytes, st.Count, st.Refused })
		go store.Run(ctx, time.Minute, func(err error) { o.Log.Error(err, "the artifact store could not be swept") })
	}
	registry := routes.NewRegistry(upstream.Options{
		MaxAgentSessions: o.MaxUpstreamSessions,
		SessionClosed:    func(server, reason string) { m.UpstreamSessionsClosed.WithLabelValues(server, reason).Inc() },
	}, o.Log.WithName("routes"))

	cfg := o.Bridge
	cfg.Registry, cfg.Auth, cfg.Sessions, cfg.Sealer, cfg.Audit = registry, auth, sessions, sealer, aw
	cfg.Pipeline = &output.Pipeline{MaxResultBytes: o.MaxResultBytes}
	if store != nil {
		cfg.Pipeline.Store, cfg.Artifacts = store, store
	}
	cfg.Metrics, cfg.Log = m, o.Log
	if cfg.Limiter == nil {
		cfg.Limiter = policy.NewRateLimiter(nil)
	}
	if o.ToolApprovals {
		if cfg.Approvals, err = startApprovals(ctx, o, c, reader, reg); err != nil {
			return nil, err
		}
	}
	b := New(cfg)
	w := &watch.Watcher{
		Cache: c, Secrets: reader, Registry: registry, Log: o.Log.WithName("watch"), Resync: o.SecretsResync,
		Policies: func(list []v1alpha1.ToolPolicy) {
			e, errs := policy.Compile(list)
			for _, err := range errs {
				o.Log.Info("a ToolPolicy is not in force", "policy", err.Policy, "field", err.Field, "error", err.Message)
			}
			b.SetEngine(e)
		},
	}
	b.cfg.Redactor = w.Redactor
	w.AllSecrets = aw.SetRedactor
	w.Events = func(p audit.Payload) {
		if _, err := aw.Write("", "", p); err != nil {
			o.Log.Error(err, "a server event was not recorded", "type", p.EventType())
		}
	}
	rt := &Runtime{Bridge: b, Watcher: w, Registry: registry, Audit: aw, Sessions: sessions, done: make(chan error, 1)}
	rt.Handler = b.Handler()
	rt.OpsHandler = b.OpsHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	go sessions.Run(ctx, time.Minute)
	go func() { rt.done <- w.Run(ctx) }()
	for !w.Synced() {
		select {
		case err := <-rt.done:
			return nil, err
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	b.SetReady(true)
	return rt, nil
}

// startApprovals builds the ToolApproval broker: it writes through the
// direct client, watches through the bridge's cache (so it sees the
// decisions in the namespaces it serves) and records Events.
func startApprovals(ctx context.Context, o Options, c cache.Cache, writer client.Client, reg prometheus.Registerer) (*approval.Broker, error) {
	inf, err := c.GetInformer(ctx, &v1alpha1.ToolApproval{})
	if err != nil {
		return nil, fmt.Errorf("while watching ToolApprovals: %w", err)
	}
	broker := approval.NewBroker(writer, reg)
	broker.Notifier, broker.Log = o.ApprovalNotifier, o.Log.WithName("approvals")
	if err := broker.Watch(inf); err != nil {
		return nil, fmt.Errorf("while watching ToolApprovals: %w", err)
	}
	cs, err := kubernetes.NewForConfig(o.Rest)
	if err != nil {
		return nil, fmt.Errorf("while creating the Events client: %w", err)
	}
	events := clientevents.NewBroadcaster(&clientevents.EventSinkImpl{Interface: cs.EventsV1()})
	events.StartRecordingToSink(ctx.Done())
	broker.Recorder = events.NewRecorder(o.Scheme, "mcp-operator-bridge")
	return broker, nil
}
