package routes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/catalog"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// Tool is one tool the bridge serves: published in status and listed live
// with the same schema digest.
type Tool struct {
	Server *Server
	// Name is the canonical namespaced name mcp.<server>.<tool>;
	// Underscore its rendering for clients that reject dots.
	Name, Underscore, Upstream string
	Risk                       v1alpha1.Risk
	Annotations                *v1alpha1.ToolAnnotations
	// Definition is the tool as the server lists it.
	Definition json.RawMessage

	renderOnce sync.Once
	dotted     json.RawMessage
	underscore json.RawMessage
}

// Rendered is the definition with its name as the agent sees it: dotted or
// underscore-style namespaced, or (upstream) as the server has it, made
// once at the first call. It is the server's text as the server sent it:
// the bridge runs every rendering through its output pipeline, with the
// server's own redactor, each time it shows one.
func (t *Tool) Rendered(style string) json.RawMessage {
	t.renderOnce.Do(func() {
		t.dotted = renameMember(t.Definition, t.Name)
		t.underscore = renameMember(t.Definition, t.Underscore)
	})
	switch style {
	case "upstream":
		return t.Definition
	case "underscore":
		return t.underscore
	}
	return t.dotted
}

// renameMember replaces the "name" member of an object, keeping the rest
// byte for byte.
func renameMember(obj json.RawMessage, name string) json.RawMessage {
	ms, err := rawjson.Members(obj)
	if err != nil {
		return obj
	}
	for i := range ms {
		if ms[i].Key == "name" {
			ms[i].Value = rawjson.AppendString(nil, name)
		}
	}
	return rawjson.AppendObject(nil, ms)
}

// Catalog is what a server serves now.
type Catalog struct {
	// Tools by upstream name and sorted by name.
	Tools    []*Tool
	ByName   map[string]*Tool
	Refused  []string
	fetchErr error
	// server is the Server the catalog was listed for.
	server *Server
	// expires is when the server's ttlMs says the list is stale, in Unix
	// nanoseconds; 0 when it gave none (a list_changed notification or a
	// change of status makes it stale then). Set again when a new listing
	// finds the same tools, so the Catalog, and what is built from it,
	// stays the same.
	expires atomic.Int64
	// listed is when the last listing that found these tools began.
	listed atomic.Int64
	// retryAt is when a re-listing that failed may be tried again, in Unix
	// nanoseconds: until then these tools are used as they are.
	retryAt atomic.Int64
}

// Expires is when the server said its list is stale; ok is false when it
// said nothing.
func (c *Catalog) Expires() (at time.Time, ok bool) {
	ns := c.expires.Load()
	return time.Unix(0, ns), ns != 0
}

// minRelist is the least time between two listings of a server's tools
// for agents' lists: a ttlMs of 0 (the default of some SDKs) would
// otherwise cost one listing per list, search or card. The bridge's own
// answers still say no more than the server did (Expires).
const minRelist = time.Second

// failedRelistBackoff is the least time between a re-listing that failed
// and the next: a server that cannot list now is not asked again at every
// list, search or card, while its last good tools are served.
const failedRelistBackoff = 5 * time.Second

// DefaultListTimeout bounds one listing of a server's tools when
// Registry.ListTimeout is zero.
const DefaultListTimeout = 60 * time.Second

// fresh says whether the list may still be used at now.
func (c *Catalog) fresh(now time.Time) bool {
	at, ok := c.Expires()
	return !ok || now.Before(at) || now.Before(time.Unix(0, c.listed.Load()).Add(minRelist)) ||
		now.Before(time.Unix(0, c.retryAt.Load()))
}

// sameAs says whether c lists exactly what o lists, for the same Server
// (whose status gives the tools' risks and annotations).
func (c *Catalog) sameAs(o *Catalog) bool {
	if o == nil || c.server != o.server || len(c.Tools) != len(o.Tools) || !slices.Equal(c.Refused, o.Refused) {
		return false
	}
	for i, t := range c.Tools {
		if t.Name != o.Tools[i].Name || !bytes.Equal(t.Definition, o.Tools[i].Definition) {
			return false
		}
	}
	return true
}

// Registry keeps the served servers, a connection to each, and their live
// catalogs. Safe for concurrent use.
type Registry struct {
	// Options are given to every upstream connection.
	Options upstream.Options
	// Log gets refusals and connection changes.
	Log logr.Logger
	// ListTimeout bounds one listing of a server's tools
	// (DefaultListTimeout when zero).
	ListTimeout time.Duration
	// CallerIdle is how long a caller's own connection to a server is kept
	// idle (DefaultCallerIdle when zero).
	CallerIdle time.Duration

	mu      sync.RWMutex
	table   *Table
	entries map[string]*entry
	away    map[string]*awayEntry
	// changed is closed at the next Update: callers waiting for a server
	// to come back wait on it.
	changed chan struct{}
	subs    Subscriptions
	// closed: the replica is stopping (Close); tables are no longer taken.
	closed bool
}

// Subscriptions is who wants servers' resource updates (the bridge's
// subscription hub): the URIs agents are subscribed to on a server, and
// where the server's updates go.
type Subscriptions interface {
	URIs(server string) []string
	Updated(server string, params json.RawMessage)
}

// SetSubscriptions installs the subscription hub. Connections made before
// and after both use it.
func (r *Registry) SetSubscriptions(s Subscriptions) {
	r.mu.Lock()
	r.subs = s
	r.mu.Unlock()
}

func (r *Registry) subscriptions() Subscriptions {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.subs
}

type entry struct {
	server *Server
	conn   *upstream.Conn
	// callers are the callers' own connections, by caller (callers.go),
	// under mu; callerSweep closes the idle ones while there are any.
	callers     map[string]*CallerConn
	callerSweep *time.Timer
	// sessions counts the agents' upstream sessions of the server's own
	// connection and its callers': --max-upstream-sessions bounds them
	// together.
	sessions *upstream.SessionCount

	mu       sync.Mutex
	catalog  *Catalog
	fetching chan struct{}
}

// awayEntry is a server that is away and what is listed of it: the live
// catalog this replica last had of it while the published catalog is the
// same, else what status publishes (statusCatalog).
type awayEntry struct {
	away    *Away
	catalog *Catalog
	// live and liveDigest are the last live catalog and the published
	// digest it was checked against.
	live       *Catalog
	liveDigest string
}

// NewRegistry returns an empty registry.
func NewRegistry(opts upstream.Options, log logr.Logger) *Registry {
	return &Registry{Options: opts, Log: log, table: &Table{Servers: map[string]*Server{}}, entries: map[string]*entry{},
		away: map[string]*awayEntry{}, changed: make(chan struct{})}
}

// Update installs a new table. target resolves how to reach a server
// (credentials of remote servers); it is called for every server, outside
// the registry's lock, as it may read Secrets. A server whose endpoint
// changed gets a new connection and the old one is retired: its calls in
// flight fail with mcp_server_restarted, or mcp_server_unstable once the
// server has crashed twice in a row. A server that left the table is closed
// the same way. A server whose credentials changed (a rotated Secret) gets a
// new connection and the old one is drained: its calls in flight finish.
// When target fails for a served server, its connection is kept as it is.
func (r *Registry) Update(t *Table, target func(*Server) (upstream.Target, error)) {
	type resolved struct {
		target upstream.Target
		err    error
	}
	targets := make(map[string]resolved, len(t.Servers))
	for name, s := range t.Servers {
		tg, err := target(s)
		targets[name] = resolved{tg, err}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	next := map[string]*entry{}
	for name, s := range t.Servers {
		old := r.entries[name]
		tg := targets[name]
		switch {
		case old == nil:
		case old.server.Namespace != s.Namespace || old.server.URL != s.URL || old.server.Pod != s.Pod ||
			s.Restarts.Total > old.server.Restarts.Total:
			// A restart counted means the process ended; a new pod or URL
			// alone (a rollout) may leave the old server serving its
			// sessions.
			// Counted on the old server's own object: the name may have
			// moved to another namespace's server.
			rs, seen := t.Restarts[old.server.Key()]
			crashed := seen && rs.Total > old.server.Restarts.Total
			reason := upstream.ReasonRestarted
			if crashed {
				reason = retireReason(rs)
			}
			r.Log.Info("server changed: calls in flight end", "server", s.Key(), "pod", s.Pod, "reason", reason)
			old.retire(reason, crashed)
			old = nil
		case !sameRelays(old.server.ServerRequests, s.ServerRequests):
			// What the connection declared to the server changed: calls
			// under way finish on the old connection, new ones use a new one.
			r.Log.Info("server requests relayed changed: reconnecting", "server", s.Key())
			old.drain()
			old = nil
		default:
			old.mu.Lock()
			if old.server.CatalogDigest != s.CatalogDigest || !equalTools(old.server.Tools, s.Tools) {
				old.catalog = nil
			}
			old.server = s
			if tg.err == nil && tg.target.Credentials != old.conn.Target().Credentials {
				// The tools are the same server's: the catalog stays.
				r.Log.Info("credentials changed: new connections use them, calls in flight finish", "server", s.Key())
				old.conn.Drain()
				for _, c := range old.takeCallersLocked() {
					c.Drain()
				}
				old.conn = upstream.New(tg.target, r.optionsFor(old))
				r.resubscribe(name, old.conn)
			}
			old.mu.Unlock()
			next[name] = old
			continue
		}
		e := &entry{server: s, sessions: &upstream.SessionCount{}}
		e.conn = upstream.New(tg.target, r.optionsFor(e))
		r.resubscribe(name, e.conn)
		next[name] = e
	}
	for name, old := range r.entries {
		if _, kept := next[name]; !kept {
			// A crash takes a server out of the table (not Ready) in the
			// same status write that counts it: then its sessions went
			// with the process.
			rs, seen := t.Restarts[old.server.Key()]
			crashed := seen && rs.Total > old.server.Restarts.Total
			reason := upstream.ReasonUnavailable
			switch {
			case crashed:
				reason = retireReason(rs)
			case t.Servers[name] == nil && old.server.Restarts.Consecutive > 0:
				reason = retireReason(old.server.Restarts)
			}
			old.retire(reason, crashed)
		}
	}
	r.away = r.awayEntries(t)
	r.table, r.entries = t, next
	close(r.changed)
	r.changed = make(chan struct{})
}

// awayEntries are t's away servers with what is listed of them; called with
// r.mu held, before the entries are replaced.
func (r *Registry) awayEntries(t *Table) map[string]*awayEntry {
	out := make(map[string]*awayEntry, len(t.Away))
	for name, a := range t.Away {
		ae := &awayEntry{away: a}
		if e := r.entries[name]; e != nil && e.server.Namespace == a.Server.Namespace {
			e.mu.Lock()
			if e.catalog != nil && e.catalog.fetchErr == nil {
				ae.live, ae.liveDigest = e.catalog, e.server.CatalogDigest
			}
			e.mu.Unlock()
		} else if prev := r.away[name]; prev != nil && prev.away.Server.Namespace == a.Server.Namespace {
			ae.live, ae.liveDigest = prev.live, prev.liveDigest
		}
		if ae.live != nil && ae.liveDigest == a.Server.CatalogDigest {
			ae.catalog = rebound(ae.live, a.Server)
		} else {
			ae.live, ae.catalog = nil, statusCatalog(a.Server)
		}
		out[name] = ae
	}
	return out
}

// InUse are the served servers an agent holds without calling: an open
// upstream agent session or a resource subscription. They count as
// activity (a server that sleeps would end them).
func (r *Registry) InUse() []*Server {
	r.mu.RLock()
	entries := make(map[string]*entry, len(r.entries))
	for name, e := range r.entries {
		entries[name] = e
	}
	subs := r.subs
	r.mu.RUnlock()
	// The hub and the connections are asked without r.mu held: they have
	// locks of their own.
	var out []*Server
	for name, e := range entries {
		e.mu.Lock()
		s, conn := e.server, e.conn
		e.mu.Unlock()
		if conn.AgentSessions() > 0 || e.callerSessions() > 0 || subs != nil && len(subs.URIs(name)) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// Away returns a server of the bridge's scope that is away (not served,
// with a published catalog), and why.
func (r *Registry) Away(name string) (*Away, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if ae := r.away[name]; ae != nil {
		return ae.away, true
	}
	return nil, false
}

// Down returns a server of the bridge's scope that is neither served nor
// away (it has no published catalog), and why: only to answer a request
// that was routed to it before its catalog went.
func (r *Registry) Down(name string) (*Away, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	a, ok := r.table.Down[name]
	return a, ok
}

// Changed is closed at the next table installed: a caller waiting for a
// server to come back takes it, then reads Server or Away again.
func (r *Registry) Changed() <-chan struct{} {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.changed
}

// Listed are the names whose tools are listed, sorted: the served servers
// and those away but expected back (restarting, starting, asleep).
func (r *Registry) Listed() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := slices.Clone(r.table.Names)
	for name, ae := range r.away {
		if ae.away.Expected() {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Close ends every server's connection, for a stopping replica: calls
// still in flight fail (mcp_server_unavailable), and each agent's upstream
// session is ended with a DELETE, as when its agent session ends: left
// open, each would hold what the server keeps per session (a browser, a
// working directory) until the server expired it. It returns once the
// DELETEs of the connections it closes are answered, or when ctx ends (the
// replica's shutdown grace); tables given to Update later are ignored.
// Connections an earlier Update retired or drained (a rollout, rotated
// credentials just before the stop) end their sessions in the background
// and are not waited for: their DELETEs may be cut short by the exit.
func (r *Registry) Close(ctx context.Context) error {
	r.mu.Lock()
	entries := r.entries
	r.closed, r.table, r.entries, r.away = true, &Table{Servers: map[string]*Server{}}, map[string]*entry{}, map[string]*awayEntry{}
	// Requests waiting for a server to wake see it gone, and are answered.
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	conns := make([]*upstream.Conn, 0, len(entries))
	for _, e := range entries {
		callers := e.takeCallers()
		e.mu.Lock()
		conns = append(conns, e.conn)
		e.mu.Unlock()
		conns = append(conns, callers...)
	}
	for _, c := range conns {
		c.Close()
	}
	var errs []error
	for _, c := range conns {
		if err := c.WaitClosed(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// resubscribe has a new connection establish the agents' subscriptions to
// its server at once rather than at the next call: they outlive pods and
// connections. Called with r.mu held.
func (r *Registry) resubscribe(name string, conn *upstream.Conn) {
	if r.subs != nil && len(r.subs.URIs(name)) > 0 {
		conn.Resubscribe()
	}
}

// retireReason: in-flight calls at a restart fail mcp_server_restarted; from
// the second crash in a row on, mcp_server_unstable. Neither is replayed.
func retireReason(rs v1alpha1.RestartStatus) string {
	if rs.Consecutive >= 2 {
		return upstream.ReasonUnstable
	}
	return upstream.ReasonRestarted
}

func equalTools(a, b map[string]v1alpha1.ToolStatus) bool {
	if len(a) != len(b) {
		return false
	}
	for k, t := range a {
		if u, ok := b[k]; !ok || u.SchemaDigest != t.SchemaDigest || u.Risk != t.Risk {
			return false
		}
	}
	return true
}

func sameRelays(a, b v1alpha1.ServerRequests) bool {
	for _, m := range []string{"elicitation/create", "sampling/createMessage"} {
		if a.Relays(m) != b.Relays(m) {
			return false
		}
	}
	return true
}

func (r *Registry) optionsFor(e *entry) upstream.Options {
	o := r.Options
	name := e.server.Name
	o.Log = r.Log.WithName("upstream")
	o.Sessions = e.sessions
	o.Subscribed = func() []string {
		if s := r.subscriptions(); s != nil {
			return s.URIs(name)
		}
		return nil
	}
	o.OnResourceUpdated = func(params json.RawMessage) {
		if s := r.subscriptions(); s != nil {
			s.Updated(name, params)
		}
	}
	o.ClientCapabilities = e.server.ServerRequests.ClientCapabilities()
	o.OnListChanged = func(method string) {
		if method == "notifications/tools/list_changed" {
			e.mu.Lock()
			e.catalog = nil
			e.mu.Unlock()
		}
	}
	return o
}

// Names are the served server names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.table.Names
}

// Server returns a served server and its connection.
func (r *Registry) Server(name string) (*Server, *upstream.Conn, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e := r.entries[name]
	if e == nil {
		return nil, nil, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.server, e.conn, true
}

// Catalog returns the tools a server serves now, listing them live when
// the cached list is stale; for a server away, what it served (awayEntry),
// without asking it. A tool whose live definition differs from the
// published digest, or that status does not publish, is refused (and
// logged) until the controller publishes it.
func (r *Registry) Catalog(ctx context.Context, name string) (*Catalog, error) {
	return r.catalog(ctx, name, false)
}

// FreshCatalog is Catalog, listed again where the server's ttlMs says the
// kept list is stale: what an agent's list is built from. A call is
// resolved in the kept catalog (Catalog): it is pinned to the published
// digests either way, and a list per call is not what a ttlMs asks for.
func (r *Registry) FreshCatalog(ctx context.Context, name string) (*Catalog, error) {
	return r.catalog(ctx, name, true)
}

func (r *Registry) catalog(ctx context.Context, name string, fresh bool) (*Catalog, error) {
	r.mu.RLock()
	e, ae := r.entries[name], r.away[name]
	r.mu.RUnlock()
	if e == nil && ae != nil {
		// Away: what it served, for the agent to be told when it is back.
		return ae.catalog, nil
	}
	if e == nil {
		return nil, fmt.Errorf("server %q is not served", name)
	}
	for {
		e.mu.Lock()
		if c := e.catalog; c != nil && c.fetchErr == nil && (!fresh || c.fresh(time.Now())) {
			e.mu.Unlock()
			return c, nil
		}
		if wait := e.fetching; wait != nil {
			e.mu.Unlock()
			select {
			case <-wait:
				e.mu.Lock()
				c := e.catalog
				e.mu.Unlock()
				if c != nil && c.fetchErr != nil {
					return nil, c.fetchErr
				}
				if c != nil {
					// The listing waited for is fresh enough for this
					// request, even where its ttlMs was 0.
					return c, nil
				}
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		e.fetching = done
		server, conn, prev := e.server, e.conn, e.catalog
		e.mu.Unlock()

		c := r.listFor(ctx, server, conn, prev)
		e.mu.Lock()
		e.fetching = nil
		if e.server == server && e.conn == conn {
			e.catalog = c
		}
		e.mu.Unlock()
		close(done)
		if c.fetchErr != nil {
			return nil, c.fetchErr
		}
		return c, nil
	}
}

// listFor lists s's tools for every caller waiting on it, so apart from
// the requesting caller's context: a caller that goes away does not fail
// the listing for the others. A re-listing that fails keeps the tools
// listed before (still pinned to the published digests), tried again
// after failedRelistBackoff: one failure does not take a working catalog
// from every caller.
func (r *Registry) listFor(ctx context.Context, s *Server, conn *upstream.Conn, prev *Catalog) *Catalog {
	timeout := r.ListTimeout
	if timeout <= 0 {
		timeout = DefaultListTimeout
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	c := r.fetch(lctx, s, conn, prev)
	if c.fetchErr == nil || prev == nil || prev.fetchErr != nil || prev.server != s {
		return c
	}
	// The reason only: the error may quote the server's answer, which is
	// redacted with the server's Secret values above the registry.
	reason := "error"
	if ue := (*upstream.Error)(nil); errors.As(c.fetchErr, &ue) {
		reason = ue.Reason
	}
	r.Log.Info("re-listing a server's tools failed: the tools listed before are served until a retry", "server", s.Key(), "reason", reason, "retryIn", failedRelistBackoff.String())
	prev.retryAt.Store(time.Now().Add(failedRelistBackoff).UnixNano())
	return prev
}

// fetch lists s's tools; where they are prev's, prev is kept (with the new
// expiry).
func (r *Registry) fetch(ctx context.Context, s *Server, conn *upstream.Conn, prev *Catalog) *Catalog {
	started := time.Now()
	items, fresh, err := conn.ListAllFresh(ctx, "tools/list", "tools")
	if err != nil {
		return &Catalog{fetchErr: fmt.Errorf("while listing the tools of server %s: %w", s.Key(), err)}
	}
	built, err := catalog.Build(s.Name, items, s.ToolsSpec)
	if err != nil {
		return &Catalog{fetchErr: err}
	}
	c := &Catalog{ByName: map[string]*Tool{}, server: s}
	for _, t := range built.Tools {
		published, ok := s.Tools[t.UpstreamName]
		switch {
		case !ok:
			c.Refused = append(c.Refused, fmt.Sprintf("%s: not in the published catalog", t.Name))
			continue
		case published.SchemaDigest != t.SchemaDigest:
			c.Refused = append(c.Refused, fmt.Sprintf("%s: live schema digest %s differs from the published %s", t.Name, t.SchemaDigest, published.SchemaDigest))
			continue
		}
		tool := &Tool{
			Server: s, Name: t.Name, Underscore: t.UnderscoreName, Upstream: t.UpstreamName,
			Risk: published.Risk, Annotations: published.Annotations, Definition: t.Definition,
		}
		c.Tools = append(c.Tools, tool)
		c.ByName[t.UpstreamName] = tool
	}
	slices.SortFunc(c.Tools, func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) })
	var expires int64
	if fresh.Given {
		// Counted from when the listing began: a slow list is not fresh
		// for longer than the server meant.
		expires = started.Add(fresh.TTL).UnixNano()
	}
	if c.sameAs(prev) {
		prev.expires.Store(expires)
		prev.listed.Store(started.UnixNano())
		return prev
	}
	c.expires.Store(expires)
	c.listed.Store(started.UnixNano())
	if len(c.Refused) > 0 {
		r.Log.Info("tools refused until the controller publishes them again (catalog pinning)", "server", s.Key(), "refused", c.Refused)
	}
	return c
}
