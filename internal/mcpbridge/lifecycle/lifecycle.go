// Package lifecycle turns what changed in the MCPServers' status into the
// server events of the audit stream. The watcher that sees the changes
// knows no audit stream; the bridge hands each pair of readings here and
// writes what comes back.
package lifecycle

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/audit"
)

// Events turns what changed in MCPServer status between two readings
// into the server events of the audit stream (docs/audit.md): a crash (the
// total of crashes grew), a restart scheduled after it, a server that gave
// up, and a server shut down (suspended or deleted). Each replica writes the
// events it sees into its own stream. The first reading after a start has
// no previous one and yields nothing: only changes are events.
func Events(prev, next map[string]*v1alpha1.MCPServer) []audit.Payload {
	keys := make([]string, 0, len(prev)+len(next))
	for k := range prev {
		keys = append(keys, k)
	}
	for k := range next {
		if _, seen := prev[k]; !seen {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []audit.Payload
	for _, k := range keys {
		old, cur := prev[k], next[k]
		switch {
		case old == nil:
			continue
		case cur == nil || cur.DeletionTimestamp != nil && old.DeletionTimestamp == nil:
			out = append(out, audit.ServerShutdown{Server: old.Name, Namespace: old.Namespace, Reason: "delete"})
			continue
		case cur.Spec.Suspend && !old.Spec.Suspend:
			out = append(out, audit.ServerShutdown{Server: cur.Name, Namespace: cur.Namespace, Reason: "suspend"})
			continue
		}
		rs := cur.Status.Restarts
		if rs.Total > old.Status.Restarts.Total {
			out = append(out, audit.ServerCrashed{Server: cur.Name, Namespace: cur.Namespace, Reason: rs.LastExitReason, Crashes: int(rs.Consecutive)})
			if readyReason(cur) == v1alpha1.ReasonRestarting {
				p := audit.ServerRestarting{Server: cur.Name, Namespace: cur.Namespace, Attempt: int(rs.Consecutive)}
				if rs.NextRestartTime != nil && rs.LastCrashTime != nil {
					p.BackoffMs = audit.Ms(rs.NextRestartTime.Sub(rs.LastCrashTime.Time))
				}
				out = append(out, p)
			}
		}
		if readyReason(cur) == v1alpha1.ReasonPermanentlyFailed && readyReason(old) != v1alpha1.ReasonPermanentlyFailed {
			out = append(out, audit.ServerPermanentlyFailed{Server: cur.Name, Namespace: cur.Namespace, Restarts: int(rs.Total), LastExitReason: rs.LastExitReason})
		}
	}
	return out
}

func readyReason(s *v1alpha1.MCPServer) string {
	if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}
