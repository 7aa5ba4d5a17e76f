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

// Away is a server of the bridge's scope that has a published catalog but is
// not served now (not Ready, or no endpoint). Its Ready reason says why and
// whether it is expected back: agents are told so instead of "unknown tool".
type Away struct {
	// Server is the server as its status describes it, without endpoint.
	Server *Server
	// Reason and Message are its Ready condition's.
	Reason, Message string
	// Since is when Ready took its reason: one sleep is told from the next
	// by it. For a sleeping server it is status.sleepingSince, the time the
	// controller compares a wake with (Ready's lastTransitionTime may be
	// older: Ready was already False when the server fell asleep).
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
	case v1alpha1.ReasonRestarting, v1alpha1.ReasonStarting, v1alpha1.ReasonProbeFailed, v1alpha1.ReasonSleeping, v1alpha1.ReasonWaking:
		return true
	}
	return false
}

// Asleep reports whether a call should wake the server and wait for it:
// it sleeps, or a wake is under way.
func (a *Away) Asleep() bool {
	return a.Reason == v1alpha1.ReasonSleeping || a.Reason == v1alpha1.ReasonWaking
}

// Retryable reports whether the same call may succeed later without anyone
// changing the server: everything but a server that gave up.
func (a *Away) Retryable() bool { return a.Reason != v1alpha1.ReasonPermanentlyFailed }

// away finds the servers of list that Build did not serve: those with a
// published catalog (away), and those without (down: a server that gave up
// or whose catalog was refused, kept only so that a request already routed
// to it, such as one waiting for its wake, is told why). Suspended and
// deleted servers are gone at once, and a name conflict has no tools to
// offer.
func away(list []v1alpha1.MCPServer, served map[string]*Server) (out, down map[string]*Away) {
	out, down = map[string]*Away{}, map[string]*Away{}
	var cands []*v1alpha1.MCPServer
	for i := range list {
		s := &list[i]
		if _, ok := served[s.Name]; ok || s.DeletionTimestamp != nil || s.Spec.Suspend ||
			meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionNameConflict) {
			continue
		}
		cands = append(cands, s)
	}
	slices.SortFunc(cands, func(a, b *v1alpha1.MCPServer) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace, b.Namespace)
	})
	for _, s := range cands {
		if out[s.Name] != nil || down[s.Name] != nil {
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
		if t := s.Status.SleepingSince; t != nil && a.Reason == v1alpha1.ReasonSleeping {
			a.Since = t.Time
		}
		if t := s.Status.Restarts.NextRestartTime; t != nil && a.Reason == v1alpha1.ReasonRestarting {
			a.RetryAt = t.Time
		}
		if s.Status.CatalogDigest == "" && len(s.Status.Tools) == 0 {
			down[s.Name] = a
		} else {
			out[s.Name] = a
		}
	}
	return out, down
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
