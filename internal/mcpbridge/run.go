package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	eventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	clientevents "k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/approval"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/identity"
	"github.com/mcp-operator/mcp-operator/internal/k8s/restmap"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/activity"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/artifact"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn/oauth"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/idlemem"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/lifecycle"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/metrics"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/once"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/signed"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstreamcred"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/watch"
	"github.com/mcp-operator/mcp-operator/internal/policy"
)

// Options assemble a running bridge (Start). Zero values are defaults.
type Options struct {
	// Rest reaches the API server.
	Rest *rest.Config
	// Scheme must know the project's kinds and Secrets (nil: Scheme()).
	Scheme *runtime.Scheme
	// Namespaces the bridge serves (at least one).
	Namespaces []string
	// Auth checks tokens; nil uses TokenReview through Rest.
	Auth authn.Authenticator
	// Authentication, when set, also accepts the access tokens of the
	// issuers it names (in front of Auth, which keeps ServiceAccount
	// tokens), for the resource at Bridge.PublicURL (required then), and
	// RequiredScopes are the scopes each such token must carry.
	Authentication *identity.Config
	RequiredScopes []string
	// OAuthAllowHTTP accepts http:// endpoints in the issuers' discovery
	// documents on hosts that are not loopback (development clusters).
	OAuthAllowHTTP bool
	// TokenExchangeEndpoints are the token endpoints servers' token
	// exchanges may use besides the configured issuers' own (for callers
	// no configured issuer signs, such as ServiceAccounts).
	TokenExchangeEndpoints []string
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
	// OnceNamespace, when set, is the bridge's own namespace, where the
	// replicas record single uses of sealed states for one another
	// (package once); empty: each replica remembers its own.
	OnceNamespace string
	// Identity is the holderIdentity of the activity Leases this replica
	// writes: its pod's name (the host name when empty).
	Identity string
	// ActivityEvery is how often open agent sessions and subscriptions are
	// counted as activity (default 15 s; the writes stay bounded by the
	// Lease's own rate).
	ActivityEvery time.Duration
	Log           logr.Logger
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

// Scheme holds the kinds the bridge reads and writes: the project's
// (MCPServer, ToolPolicy, ToolApproval), core Secrets, the servers'
// activity Leases and the replicas' one-time records (package once). Not client-go's
// scheme of every built-in group: a second registry of those held about
// 0.3 MB of the idle bridge's heap for kinds it never touches.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(coordinationv1.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

// Start builds the bridge, starts watching MCPServers and ToolPolicies and
// returns once the caches have synced (or ctx ends).
func Start(ctx context.Context, o Options) (*Runtime, error) {
	if len(o.Namespaces) == 0 {
		return nil, errors.New("while starting the bridge: no namespaces to serve")
	}
	if o.Scheme == nil {
		o.Scheme = Scheme()
	}
	kc, err := newKubeClients(o)
	if err != nil {
		return nil, err
	}
	auth := o.Auth
	if auth == nil {
		auth = &authn.TokenReview{Reviews: kc.reviews.TokenReviews()}
	}
	var resource *oauth.Resource
	var issuerTokenEndpoint func(context.Context, string) string
	if o.Authentication != nil {
		var people *oauth.Authenticator
		if resource, people, err = oauthAuthenticator(o, auth); err != nil {
			return nil, err
		}
		auth, issuerTokenEndpoint = people, people.TokenEndpoint
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
	var ledger *once.Ledger
	if o.OnceNamespace != "" {
		ledger = &once.Ledger{Client: kc.direct, Namespace: o.OnceNamespace, Now: o.Bridge.Clock}
		ends := &once.Ends{Ledger: ledger, Failed: func(err error) {
			o.Log.Error(err, "a session's end was not recorded for the other replicas: they accept it until its maximum age")
		}}
		o.Session.Ends = ends
		go ledger.Run(ctx, time.Minute, func(err error) { o.Log.Error(err, "expired one-time records were not deleted") })
	}
	sessions := session.NewManager(sealer, o.Session)
	if ends, ok := o.Session.Ends.(*once.Ends); ok {
		// A replica holding a session another one ended ends it at once.
		ends.Heard = sessions.EndRecorded
		if err := watchEnds(ctx, kc, ends); err != nil {
			return nil, err
		}
	}
	m := metrics.New(reg, func() float64 { return float64(sessions.Len()) }, func() float64 { return float64(aw.Stats().Dropped) })
	if store != nil {
		metrics.RegisterArtifacts(reg, func() (int64, int64, int64) { st := store.Stats(); return st.Bytes, st.Count, st.Refused })
		go store.Run(ctx, time.Minute, func(err error) { o.Log.Error(err, "the artifact store could not be swept") })
	}
	registry := routes.NewRegistry(upstream.Options{
		MaxAgentSessions: o.MaxUpstreamSessions,
		SessionClosed:    func(server, reason string) { m.UpstreamSessionsClosed.WithLabelValues(server, reason).Inc() },
	}, o.Log.WithName("routes"))
	// A listing runs for every caller waiting on it: bounded as a call is.
	registry.ListTimeout = o.Bridge.CallTimeout

	cfg := o.Bridge
	cfg.Registry, cfg.Auth, cfg.Sessions, cfg.Sealer, cfg.Audit = registry, auth, sessions, sealer, aw
	cfg.OAuth = resource
	cfg.Pipeline = &output.Pipeline{MaxResultBytes: o.MaxResultBytes}
	if store != nil {
		cfg.Pipeline.Store, cfg.Artifacts = store, store
	}
	cfg.Metrics, cfg.Log = m, o.Log
	if cfg.Credentials == nil {
		cfg.Credentials = upstreamcred.New(upstreamcred.Options{Secrets: kc.direct, TokenEndpoints: o.TokenExchangeEndpoints, IssuerTokenEndpoint: issuerTokenEndpoint})
	}
	idle := &idlemem.Releaser{}
	cfg.Idle = idle
	if cfg.Limiter == nil {
		cfg.Limiter = policy.NewRateLimiter(nil)
	}
	if o.ToolApprovals {
		if cfg.Approvals, err = startApprovals(ctx, o, kc, reg); err != nil {
			return nil, err
		}
	}
	if ledger != nil {
		cfg.Once = ledger
	}
	if cfg.Activity, err = startActivity(ctx, o, kc, m, registry); err != nil {
		return nil, err
	}
	b := New(cfg)
	w := &watch.Watcher{
		Cache: kc.cache, Secrets: kc.direct, Registry: registry, Log: o.Log.WithName("watch"), Resync: o.SecretsResync,
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
	w.Changed = func(prev, next map[string]*v1alpha1.MCPServer) {
		for _, p := range lifecycle.Events(prev, next) {
			if _, err := aw.Write("", "", p); err != nil {
				o.Log.Error(err, "a server event was not recorded", "type", p.EventType())
			}
		}
	}
	rt := &Runtime{Bridge: b, Watcher: w, Registry: registry, Audit: aw, Sessions: sessions, done: make(chan error, 1)}
	// The agents' requests are what make the bridge busy; metrics scrapes
	// and probes are not.
	rt.Handler = idle.Wrap(b.Handler())
	go idle.Run(ctx)
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
	idle.Now()
	return rt, nil
}

// kubeClients are the bridge's ways to the API server. They share one
// HTTP client and one REST mapper, as a controller-runtime manager's
// cache and client do: each built its own before (client-go's transport
// cache already shared the connections; the wrappers and a second mapper
// were extra).
type kubeClients struct {
	// cache watches the bridge's namespaces. The bridge never reads
	// managedFields, and they can be the largest part of an object it
	// caches (an entry per tool an MCPServer's status lists): they stay
	// out of it. Its only writes, ToolApproval status updates, leave
	// metadata as the API server has it.
	cache cache.Cache
	// direct reads Secrets (uncached) and writes ToolApprovals.
	direct client.Client
	// reviews and events are the only two built-in groups the bridge
	// calls: typed clients of those two, not a clientset that sets up a
	// client of every group.
	reviews authenticationv1.AuthenticationV1Interface
	events  eventsv1.EventsV1Interface
}

// leaseCache is which Leases the bridge's cache holds: in the served
// namespaces the servers' activity Leases, in its own namespace the records
// of ended sessions (package once) -- not every Lease there (leader
// elections, node heartbeats, the allow-once records no replica reads
// back). Where the bridge serves its own namespace, one selector takes both
// kinds: everything the operator labels as its own.
func leaseCache(served map[string]cache.Config, onceNamespace string) (cache.ByObject, error) {
	activityLeases, err := labels.Parse(activity.ServerLabel + "," + activity.ManagedByLabel + "=" + activity.ManagedBy)
	if err != nil {
		return cache.ByObject{}, err
	}
	sessionEnds := labels.SelectorFromSet(labels.Set{once.LabelKind: once.KindSessionEnd})
	ours := labels.SelectorFromSet(labels.Set{activity.ManagedByLabel: activity.ManagedBy})
	// served is never empty: Start refuses a bridge with no namespaces.
	ns := map[string]cache.Config{}
	for n := range served {
		ns[n] = cache.Config{LabelSelector: activityLeases}
	}
	if onceNamespace != "" {
		if _, both := ns[onceNamespace]; both {
			ns[onceNamespace] = cache.Config{LabelSelector: ours}
		} else {
			ns[onceNamespace] = cache.Config{LabelSelector: sessionEnds}
		}
	}
	return cache.ByObject{Namespaces: ns}, nil
}

// restMapper maps the few kinds the bridge reads and writes, without
// discovery (restmap).
func restMapper() meta.RESTMapper {
	return restmap.Namespaced(
		v1alpha1.GroupVersion.WithKind("MCPServer"),
		v1alpha1.GroupVersion.WithKind("ToolPolicy"),
		v1alpha1.GroupVersion.WithKind("ToolApproval"),
		corev1.SchemeGroupVersion.WithKind("Secret"),
		coordinationv1.SchemeGroupVersion.WithKind("Lease"),
	)
}

func newKubeClients(o Options) (*kubeClients, error) {
	// The shared HTTP client sends the User-Agent: client-go sets it in
	// the transport built from a config, so the config it is built from
	// carries it (the cache's and client's own defaults would not reach a
	// client passed in).
	cfg := rest.CopyConfig(o.Rest)
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("while creating the Kubernetes HTTP client: %w", err)
	}
	mapper := restMapper()
	nsMap := map[string]cache.Config{}
	for _, ns := range o.Namespaces {
		nsMap[ns] = cache.Config{}
	}
	kc := &kubeClients{}
	leases, err := leaseCache(nsMap, o.OnceNamespace)
	if err != nil {
		return nil, err
	}
	kc.cache, err = cache.New(cfg, cache.Options{HTTPClient: httpClient, Mapper: mapper, Scheme: o.Scheme,
		DefaultNamespaces: nsMap, DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{&coordinationv1.Lease{}: leases}})
	if err != nil {
		return nil, fmt.Errorf("while creating the MCPServer cache: %w", err)
	}
	if kc.direct, err = client.New(cfg, client.Options{HTTPClient: httpClient, Mapper: mapper, Scheme: o.Scheme}); err != nil {
		return nil, fmt.Errorf("while creating the Kubernetes client: %w", err)
	}
	if kc.reviews, err = authenticationv1.NewForConfigAndClient(cfg, httpClient); err != nil {
		return nil, fmt.Errorf("while creating the TokenReview client: %w", err)
	}
	if kc.events, err = eventsv1.NewForConfigAndClient(cfg, httpClient); err != nil {
		return nil, fmt.Errorf("while creating the Events client: %w", err)
	}
	return kc, nil
}

// watchEnds has ends keep the set of ended sessions from the cache's watch
// of their records.
func watchEnds(ctx context.Context, kc *kubeClients, ends *once.Ends) error {
	inf, err := kc.cache.GetInformer(ctx, &coordinationv1.Lease{})
	if err == nil {
		err = ends.Watch(inf)
	}
	if err != nil {
		return fmt.Errorf("while watching the records of ended sessions: %w", err)
	}
	return nil
}

// startApprovals builds the ToolApproval broker: it writes through the
// direct client, watches through the bridge's cache (so it sees the
// decisions in the namespaces it serves) and records Events.
func startApprovals(ctx context.Context, o Options, kc *kubeClients, reg prometheus.Registerer) (*approval.Broker, error) {
	inf, err := kc.cache.GetInformer(ctx, &v1alpha1.ToolApproval{})
	if err != nil {
		return nil, fmt.Errorf("while watching ToolApprovals: %w", err)
	}
	broker := approval.NewBroker(kc.direct, reg)
	broker.Notifier, broker.Log = o.ApprovalNotifier, o.Log.WithName("approvals")
	if err := broker.Watch(inf); err != nil {
		return nil, fmt.Errorf("while watching ToolApprovals: %w", err)
	}
	events := clientevents.NewBroadcaster(&clientevents.EventSinkImpl{Interface: kc.events})
	events.StartRecordingToSink(ctx.Done())
	broker.Recorder = events.NewRecorder(o.Scheme, "mcp-operator-bridge")
	return broker, nil
}

// startActivity watches the servers' activity Leases (through the bridge's
// cache: deciding whether to write reads no API) and returns the recorder
// that renews them and wakes sleeping servers. Open agent sessions and
// subscriptions count as activity every ActivityEvery.
func startActivity(ctx context.Context, o Options, kc *kubeClients, m *metrics.Metrics, reg *routes.Registry) (*activity.Recorder, error) {
	if _, err := kc.cache.GetInformer(ctx, &coordinationv1.Lease{}); err != nil {
		return nil, fmt.Errorf("while watching activity Leases: %w", err)
	}
	id := o.Identity
	if id == "" {
		id, _ = os.Hostname()
	}
	rec := &activity.Recorder{
		Identity: id, Log: o.Log.WithName("activity"), Now: o.Bridge.Clock,
		Wrote: func(kind string) { m.ActivityWrites.WithLabelValues(kind).Inc() },
		Leases: func(namespace, name string) (*coordinationv1.Lease, bool) {
			var l coordinationv1.Lease
			err := kc.cache.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &l)
			return &l, err == nil
		},
		Patch: func(ctx context.Context, namespace, name string, renew time.Time, holder string) error {
			patch, err := json.Marshal(map[string]any{"spec": map[string]any{
				"renewTime": metav1.NewMicroTime(renew), "holderIdentity": holder,
			}})
			if err != nil {
				return err
			}
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
			return kc.direct.Patch(ctx, l, client.RawPatch(types.MergePatchType, patch))
		},
	}
	every := o.ActivityEvery
	if every <= 0 {
		every = 15 * time.Second
	}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				rec.Wait()
				return
			case <-t.C:
				for _, s := range reg.InUse() {
					rec.Touch(s.Namespace, s.Name)
				}
			}
		}
	}()
	return rec, nil
}

// oauthAuthenticator puts the configured issuers in front of serviceAccounts
// (the one authentication stage accepts both) for the resource at the
// bridge's public URL.
func oauthAuthenticator(o Options, serviceAccounts authn.Authenticator) (*oauth.Resource, *oauth.Authenticator, error) {
	if o.Bridge.PublicURL == "" {
		return nil, nil, errors.New("while configuring OAuth: the bridge's public URL (--public-url) is required: it is the resource the tokens must be minted for")
	}
	var servers []string
	for _, j := range o.Authentication.JWT {
		servers = append(servers, j.Issuer.URL)
	}
	res, err := oauth.NewResource(o.Bridge.PublicURL, servers, o.RequiredScopes)
	if err != nil {
		return nil, nil, err
	}
	a, err := oauth.New(o.Authentication, oauth.Options{Resource: res, Fallback: serviceAccounts, AllowHTTP: o.OAuthAllowHTTP, Log: o.Log.WithName("oauth")})
	if err != nil {
		return nil, nil, fmt.Errorf("while configuring OAuth: %w", err)
	}
	return res, a, nil
}
