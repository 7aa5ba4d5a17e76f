package controller

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/textcut"
)

// Status of an MCPServer as pure functions over the object, so every
// transition is table-tested. Messages never hold times or generated names:
// a message that changes on every reconcile would write status forever.

// maxStatusTools caps status.tools far below etcd's object size limit.
const maxStatusTools = 1000

func setCondition(s *mcpv1alpha1.MCPServer, typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: s.Generation,
	})
}

// withdrawCatalog removes everything the bridge would serve.
func withdrawCatalog(s *mcpv1alpha1.MCPServer) {
	s.Status.Tools = nil
	s.Status.Prompts = nil
	s.Status.Skills = nil
	s.Status.ToolCount = 0
	s.Status.ResourceCount = 0
	s.Status.CatalogDigest = ""
	s.Status.Endpoint = nil
	s.Status.Capabilities = nil
	s.Status.ServerInfo = nil
	meta.RemoveStatusCondition(&s.Status.Conditions, mcpv1alpha1.ConditionDegraded)
}

// markDown withdraws the catalog and says why the server is not served: for
// a server not expected back without someone's change (permanently failed,
// suspended, a name another server holds).
func markDown(s *mcpv1alpha1.MCPServer, reason, message string) {
	withdrawCatalog(s)
	setCondition(s, mcpv1alpha1.ConditionReady, metav1.ConditionFalse, reason, message)
	setCondition(s, mcpv1alpha1.ConditionAvailable, metav1.ConditionFalse, reason, message)
	setCondition(s, mcpv1alpha1.ConditionCatalogReady, metav1.ConditionFalse, reason, "no catalog is published: "+message)
}

// markAway says why the server is not served while it is expected back (a
// restart, a new pod, a failed probe, an image or config the kubelet cannot
// use yet): the endpoint goes, so the bridge stops forwarding, but the
// published catalog stays, so the bridge can tell a caller of one of its
// tools why and when to retry instead of "unknown tool".
func markAway(s *mcpv1alpha1.MCPServer, reason, message string) {
	s.Status.Endpoint = nil
	setCondition(s, mcpv1alpha1.ConditionReady, metav1.ConditionFalse, reason, message)
	setCondition(s, mcpv1alpha1.ConditionAvailable, metav1.ConditionFalse, reason, message)
}

// catalogChange lists what differs between two catalogs, by upstream name.
type catalogChange struct {
	added, removed, changed []string
}

func (c catalogChange) empty() bool {
	return len(c.added)+len(c.removed)+len(c.changed) == 0
}

func (c catalogChange) String() string {
	var parts []string
	for _, p := range []struct {
		what  string
		names []string
	}{{"added", c.added}, {"removed", c.removed}, {"changed", c.changed}} {
		if len(p.names) > 0 {
			parts = append(parts, fmt.Sprintf("%s: %s", p.what, strings.Join(p.names, ", ")))
		}
	}
	return strings.Join(parts, "; ")
}

func diffCatalogs(old, updated []mcpv1alpha1.ToolStatus) catalogChange {
	before := map[string]string{}
	for _, t := range old {
		before[t.UpstreamName] = t.SchemaDigest
	}
	var c catalogChange
	for _, t := range updated {
		digest, ok := before[t.UpstreamName]
		switch {
		case !ok:
			c.added = append(c.added, t.UpstreamName)
		case digest != t.SchemaDigest:
			c.changed = append(c.changed, t.UpstreamName)
		}
		delete(before, t.UpstreamName)
	}
	for name := range before {
		c.removed = append(c.removed, name)
	}
	sort.Strings(c.added)
	sort.Strings(c.removed)
	sort.Strings(c.changed)
	return c
}

// publishResult says which event publishing a catalog calls for.
type publishResult struct {
	// changed is set when an Auto catalog replaced a different one.
	changed *catalogChange
	// refused is set when a Locked server offered a catalog other than the
	// approved one.
	refused bool
}

// publishCatalog writes a probed catalog into status, as catalogPinning
// allows, and sets CatalogReady, Degraded and, when published, Ready.
func publishCatalog(s *mcpv1alpha1.MCPServer, cat *Catalog, endpoint *mcpv1alpha1.Endpoint) publishResult {
	var res publishResult
	tools := s.Spec.Tools
	setCondition(s, mcpv1alpha1.ConditionAvailable, metav1.ConditionTrue, mcpv1alpha1.ReasonServing, "the server answers the probe")

	if tools.CatalogPinning == mcpv1alpha1.CatalogPinningLocked && cat.Digest != tools.ApprovedDigest {
		res.refused = true
		msg := fmt.Sprintf("the server's catalog %s differs from approvedDigest %s; review it with 'manager probe' and update approvedDigest to accept it", cat.Digest, tools.ApprovedDigest)
		if s.Status.CatalogDigest == tools.ApprovedDigest && s.Status.CatalogDigest != "" && meta.IsStatusConditionTrue(s.Status.Conditions, mcpv1alpha1.ConditionReady) {
			// Keep serving the approved catalog; the bridge refuses tools whose
			// live schema no longer matches it. A server coming back (a
			// restart, a wake: not Ready, whether or not its catalog stayed
			// listed) is refused instead.
			setCondition(s, mcpv1alpha1.ConditionDegraded, metav1.ConditionTrue, mcpv1alpha1.ReasonCatalogNotApproved, msg)
			return res
		}
		withdrawCatalog(s)
		setCondition(s, mcpv1alpha1.ConditionCatalogReady, metav1.ConditionFalse, mcpv1alpha1.ReasonCatalogNotApproved, msg)
		setCondition(s, mcpv1alpha1.ConditionReady, metav1.ConditionFalse, mcpv1alpha1.ReasonCatalogNotApproved, msg)
		return res
	}

	if s.Status.CatalogDigest != "" && s.Status.CatalogDigest != cat.Digest {
		change := diffCatalogs(s.Status.Tools, cat.Tools)
		res.changed = &change
	}
	s.Status.Endpoint = endpoint
	info, caps := cat.ServerInfo, cat.Capabilities
	s.Status.ServerInfo = &info
	s.Status.Capabilities = &caps
	s.Status.ToolCount = int32(len(cat.Tools))
	s.Status.Tools = cat.Tools
	if len(s.Status.Tools) > maxStatusTools {
		s.Status.Tools = s.Status.Tools[:maxStatusTools]
	}
	s.Status.Prompts = cat.Prompts
	if len(s.Status.Prompts) > maxStatusTools {
		s.Status.Prompts = s.Status.Prompts[:maxStatusTools]
	}
	s.Status.Skills = cat.Skills
	if len(s.Status.Skills) > maxStatusTools {
		s.Status.Skills = s.Status.Skills[:maxStatusTools]
	}
	s.Status.ResourceCount = cat.ResourceCount
	s.Status.CatalogDigest = cat.Digest
	setCondition(s, mcpv1alpha1.ConditionCatalogReady, metav1.ConditionTrue, mcpv1alpha1.ReasonServing,
		fmt.Sprintf("%d tools published", len(cat.Tools)))
	setCondition(s, mcpv1alpha1.ConditionReady, metav1.ConditionTrue, mcpv1alpha1.ReasonServing, "the catalog is published")

	switch {
	case len(cat.Invalid) > 0:
		setCondition(s, mcpv1alpha1.ConditionDegraded, metav1.ConditionTrue, mcpv1alpha1.ReasonInvalidTools,
			fmt.Sprintf("%d tools left out: %s", len(cat.Invalid), textcut.Cut(strings.Join(cat.Invalid, "; "), 2048)))
	case len(cat.Tools) > maxStatusTools:
		setCondition(s, mcpv1alpha1.ConditionDegraded, metav1.ConditionTrue, mcpv1alpha1.ReasonCatalogTruncated,
			fmt.Sprintf("status lists the first %d of %d tools; all of them are served", maxStatusTools, len(cat.Tools)))
	default:
		meta.RemoveStatusCondition(&s.Status.Conditions, mcpv1alpha1.ConditionDegraded)
	}
	return res
}
