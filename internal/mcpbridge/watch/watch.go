// Package watch keeps the bridge in step with the cluster: it watches the
// MCPServers and ToolPolicies of the bridge's namespaces, reads the Secrets
// servers were given, installs the routing table (package routes) and turns
// status changes into the servers' lifecycle events. The routing table
// itself neither watches nor writes events.
package watch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/k8s/credentials"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/redact"
)

// Watcher keeps the Registry and the policies in step with the MCPServers
// and ToolPolicies of the bridge's namespaces, through an informer cache. It
// only reads: the bridge never writes status, and needs no leader election.
type Watcher struct {
	// Cache watches MCPServers and ToolPolicies (restricted to the
	// bridge's namespaces by its options).
	Cache cache.Cache
	// Secrets reads the Secrets servers were given (uncached: only the few
	// referenced ones are read, not every Secret watched).
	Secrets  client.Reader
	Registry *routes.Registry
	// Policies receives every ToolPolicy of the namespaces on each change.
	Policies func([]v1alpha1.ToolPolicy)
	Log      logr.Logger

	// Changed receives the previous and the current reading of the
	// servers, by namespace/name, at every reading but the first (what a
	// change means to the audit stream is the bridge's to say).
	Changed func(prev, next map[string]*v1alpha1.MCPServer)
	// Resync is how often the Secrets servers were given are read again
	// (default a minute).
	Resync time.Duration
	// AllSecrets, when set, receives a redactor of the Secret values of
	// every served server each time they change: the audit log holds events
	// of every server, and redacts them all (audit.Writer.SetRedactor).
	AllSecrets func(*redact.Redactor)

	redactors atomic.Pointer[map[string]*redact.Redactor]
	synced    atomic.Bool
	last      map[string]*v1alpha1.MCPServer // the previous reading; nil before the first
	allValues string                         // every served server's values, joined, as AllSecrets last got them
	// secrets is what each served server's Secrets held when last read, by
	// namespace/name. They are read when a server appears or its spec
	// changes, and every Resync — not at every MCPServer update: each probe
	// writes status, and re-reading every server's Secrets then cost N
	// servers N² API reads per probe interval.
	secrets map[string]secretReading
}

// secretReading is what one server's Secrets gave.
type secretReading struct {
	uid        types.UID
	generation int64
	// values are the Secret values redacted from the server's output;
	// incomplete when one could not be read.
	values     []string
	incomplete bool
	redactor   *redact.Redactor // nil when the spec references no Secret
	creds      credentials.Credentials
	err        error
}

// Synced reports whether the caches have synced and a table is installed.
func (w *Watcher) Synced() bool { return w.synced.Load() }

// Redactor returns the redactor of a server: the credential shapes and the
// values of the Secrets its spec references.
func (w *Watcher) Redactor(namespace, name string) *redact.Redactor {
	if m := w.redactors.Load(); m != nil {
		if r := (*m)[namespace+"/"+name]; r != nil {
			return r
		}
	}
	return nil
}

func (w *Watcher) resyncEvery() time.Duration {
	if w.Resync > 0 {
		return w.Resync
	}
	return time.Minute
}

// Run watches until ctx ends. Changes are batched: a burst of updates costs
// one rebuild.
func (w *Watcher) Run(ctx context.Context) error {
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}
	for _, obj := range []client.Object{&v1alpha1.MCPServer{}, &v1alpha1.ToolPolicy{}} {
		inf, err := w.Cache.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("while watching %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return fmt.Errorf("while watching %T: %w", obj, err)
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = w.Cache.Start(ctx)
	}()
	defer wg.Wait()
	if !w.Cache.WaitForCacheSync(ctx) {
		return fmt.Errorf("while waiting for the MCPServer and ToolPolicy caches to sync: %w", ctx.Err())
	}
	w.rebuild(ctx, true)
	w.synced.Store(true)
	// Secrets are read, not watched (a bridge need not hold every Secret of
	// its namespaces): a periodic rebuild picks up rotated values.
	resync := time.NewTicker(w.resyncEvery())
	defer resync.Stop()
	reread := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-resync.C:
			reread = true
			poke()
		case <-changed:
			// Let a burst settle.
			select {
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
				return nil
			}
			w.rebuild(ctx, reread)
			reread = false
		}
	}
}

// rebuild installs a new table from the cache; rereadSecrets reads every
// served server's Secrets again (otherwise only new or changed servers').
func (w *Watcher) rebuild(ctx context.Context, rereadSecrets bool) {
	var policies v1alpha1.ToolPolicyList
	if err := w.Cache.List(ctx, &policies); err != nil {
		w.Log.Error(err, "while listing ToolPolicies")
	} else if w.Policies != nil {
		w.Policies(policies.Items)
	}
	var servers v1alpha1.MCPServerList
	if err := w.Cache.List(ctx, &servers); err != nil {
		w.Log.Error(err, "while listing MCPServers")
		return
	}
	t := routes.Build(servers.Items)
	specs := map[string]*v1alpha1.MCPServer{}
	for i := range servers.Items {
		s := &servers.Items[i]
		specs[s.Namespace+"/"+s.Name] = s
	}
	if w.last != nil && w.Changed != nil {
		w.Changed(w.last, specs)
	}
	w.last = specs
	readings := make(map[string]secretReading, len(t.Servers))
	redactors := map[string]*redact.Redactor{}
	for key, s := range specsOf(t, specs) {
		prev, ok := w.secrets[key]
		r := prev
		if rereadSecrets || !ok || prev.uid != s.UID || prev.generation != s.Generation {
			r = w.readSecrets(ctx, s)
			if r.incomplete && ok && prev.uid == s.UID {
				// A Secret that could not be read now is still redacted
				// with the values read before: redaction fails closed.
				r.values = append(r.values, prev.values...)
				r.redactor = redact.New(r.values...)
			}
		}
		readings[key] = r
		if r.redactor != nil {
			redactors[key] = r.redactor
		}
	}
	w.secrets = readings
	w.redactors.Store(&redactors)
	w.publishAllSecrets(readings)
	w.Registry.Update(t, func(s *routes.Server) (upstream.Target, error) {
		r := readings[s.Key()]
		return upstream.Target{
			Namespace: s.Namespace, Name: s.Name, URL: s.URL, Pod: s.Pod,
			BearerToken: r.creds.BearerToken, Header: r.creds.Header, TLS: r.creds.TLS, Credentials: r.creds.Digest,
		}, r.err
	})
}

// publishAllSecrets hands AllSecrets a redactor of every server's values
// when they changed since the last call.
func (w *Watcher) publishAllSecrets(readings map[string]secretReading) {
	if w.AllSecrets == nil {
		return
	}
	var all []string
	for _, r := range readings {
		all = append(all, r.values...)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	joined := strings.Join(all, "\x00")
	if joined == w.allValues {
		return
	}
	w.allValues = joined
	w.AllSecrets(redact.New(all...))
}

// specsOf are the MCPServers of the served servers, by namespace/name.
func specsOf(t *routes.Table, specs map[string]*v1alpha1.MCPServer) map[string]*v1alpha1.MCPServer {
	out := make(map[string]*v1alpha1.MCPServer, len(t.Servers))
	for _, s := range t.Servers {
		out[s.Key()] = specs[s.Key()]
	}
	return out
}

// readSecrets reads what a server's spec takes from Secrets: the values to
// redact from its output and a remote server's credentials (bearer token,
// headers, TLS), the way the controller's probe reads them. A Secret that
// can't be read is logged; a new server is then dialled without it and
// answers for itself, and a served one keeps the connection it has.
func (w *Watcher) readSecrets(ctx context.Context, s *v1alpha1.MCPServer) secretReading {
	r := secretReading{uid: s.UID, generation: s.Generation}
	r.values, r.incomplete = w.secretValues(ctx, s)
	if len(r.values) > 0 {
		r.redactor = redact.New(r.values...)
	}
	if s.Spec.Remote == nil || w.Secrets == nil {
		return r
	}
	r.creds, r.err = credentials.Read(ctx, w.Secrets, s)
	if r.err != nil {
		w.Log.Info("the credentials of a remote server could not be read", "server", s.Namespace+"/"+s.Name, "error", r.err.Error())
	}
	return r
}

// secretValues are the values of every Secret key the server's spec
// references (credentials.Values); incomplete when one could not be read.
func (w *Watcher) secretValues(ctx context.Context, s *v1alpha1.MCPServer) (values []string, incomplete bool) {
	if s == nil || w.Secrets == nil {
		return nil, false
	}
	values, err := credentials.Values(ctx, w.Secrets, s)
	if err != nil {
		w.Log.Info("a Secret a server needs could not be read", "server", s.Namespace+"/"+s.Name, "error", err.Error())
	}
	return values, err != nil
}
