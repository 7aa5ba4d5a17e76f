package routes

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/toolname"
)

// Ready reasons of a server put to sleep and of one being woken. The
// controller sets them (spec.workload.idle); the bridge only reads them.
const (
	ReasonSleeping = "Sleeping"
	ReasonWaking   = "Waking"
)

// Away is a server of the bridge's scope that has a published catalog but is
// not served now (not Ready, or no endpoint). Its Ready reason says why and
// whether it is expected back: agents are told so instead of "unknown tool".
type Away struct {
	// Server is the server as its status describes it, without endpoint.
	Server *Server
	// Reason and Message are its Ready condition's.
	Reason, Message string
	// Since is when Ready took its reason: one sleep is told from the next
	// by it.
	Since time.Time
	// RetryAt is status.restarts.nextRestartTime while a restart is
	// scheduled; zero otherwise.
	RetryAt time.Time
}

// Expected reports whether the server is expected back on its own: its
// catalog stays listed meanwhile. A permanently failed server is not (it
// needs a spec change), nor is one that cannot start (an image that cannot
// be pulled, a bad config): their catalogs go until they are Ready again.
func (a *Away) Expected() bool {
	switch a.Reason {
	case v1alpha1.ReasonRestarting, v1alpha1.ReasonStarting, v1alpha1.ReasonProbeFailed, ReasonSleeping, ReasonWaking:
		return true
	}
	return false
}

// Asleep reports whether a call should wake the server and wait for it:
// it sleeps, or a wake is under way.
func (a *Away) Asleep() bool { return a.Reason == ReasonSleeping || a.Reason == ReasonWaking }

// Retryable reports whether the same call may succeed later without anyone
// changing the server: everything but a server that gave up.
func (a *Away) Retryable() bool { return a.Reason != v1alpha1.ReasonPermanentlyFailed }

// away finds the servers of list with a published catalog that Build did
// not serve (listed), and those without one that are down all the same
// (down: a server that cannot start has its catalog withdrawn in the same
// status write that says why); suspended and deleted servers are gone at
// once, and a name conflict has no tools to offer.
func away(list []v1alpha1.MCPServer, served map[string]*Server) (listed, down map[string]*Away) {
	var cands, downCands []*v1alpha1.MCPServer
	for i := range list {
		s := &list[i]
		if _, ok := served[s.Name]; ok || s.DeletionTimestamp != nil || s.Spec.Suspend ||
			meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionNameConflict) {
			continue
		}
		if s.Status.CatalogDigest == "" && len(s.Status.Tools) == 0 {
			downCands = append(downCands, s)
			continue
		}
		cands = append(cands, s)
	}
	listed = awayByName(cands, nil)
	return listed, awayByName(downCands, listed)
}

// awayByName is each name's server of cands, the oldest where two share a
// name (as the controller decides), ties broken by namespace; names in
// taken are left out.
func awayByName(cands []*v1alpha1.MCPServer, taken map[string]*Away) map[string]*Away {
	slices.SortFunc(cands, func(a, b *v1alpha1.MCPServer) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace, b.Namespace)
	})
	out := map[string]*Away{}
	for _, s := range cands {
		if _, ok := out[s.Name]; ok {
			continue
		}
		if _, ok := taken[s.Name]; ok {
			continue
		}
		a := &Away{Server: serverOf(s), Reason: v1alpha1.ReasonStarting}
		if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady); c != nil {
			if c.Status == "True" {
				// Ready but no endpoint: the controller is between pods.
				a.Reason, a.Since = v1alpha1.ReasonStarting, c.LastTransitionTime.Time
			} else {
				a.Reason, a.Message, a.Since = c.Reason, c.Message, c.LastTransitionTime.Time
			}
		}
		if t := s.Status.Restarts.NextRestartTime; t != nil && a.Reason == v1alpha1.ReasonRestarting {
			a.RetryAt = t.Time
		}
		out[s.Name] = a
	}
	return out
}

// statusCatalog is what can be listed of a server that is away when this
// replica never listed it live: the published tools, named, described and
// annotated as status has them. Status does not hold input schemas, so each
// takes any object; the call is checked against the live catalog once the
// server is back (pinning), before it goes upstream.
func statusCatalog(s *Server) *Catalog {
	c := &Catalog{ByName: map[string]*Tool{}}
	for _, ts := range s.Tools {
		def := map[string]any{"name": ts.UpstreamName, "inputSchema": map[string]any{"type": "object"}}
		if ts.Title != "" {
			def["title"] = ts.Title
		}
		if ts.Description != "" {
			def["description"] = ts.Description
		}
		if ts.Annotations != nil {
			def["annotations"] = ts.Annotations
		}
		raw, _ := json.Marshal(def)
		c.add(s, ts.Name, ts.UpstreamName, ts, raw)
	}
	c.sort()
	return c
}

// rebound is c with its tools moved to server s (an away server's catalog
// is the one it had when served).
func rebound(c *Catalog, s *Server) *Catalog {
	out := &Catalog{ByName: map[string]*Tool{}}
	for _, t := range c.Tools {
		published, ok := s.Tools[t.Upstream]
		if !ok {
			continue
		}
		out.add(s, t.Name, t.Upstream, published, t.Definition)
	}
	out.sort()
	return out
}

func (c *Catalog) add(s *Server, name, upstreamName string, published v1alpha1.ToolStatus, def json.RawMessage) {
	t := &Tool{
		Server: s, Name: name, Underscore: toolname.Underscore(name), Upstream: upstreamName,
		Risk: published.Risk, Annotations: published.Annotations, Definition: def,
	}
	c.Tools = append(c.Tools, t)
	c.ByName[upstreamName] = t
}

func (c *Catalog) sort() {
	slices.SortFunc(c.Tools, func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) })
}
