// Package controller holds the reconcilers of mcp-operator's kinds: one file set
// per kind (mcpserver_*.go, toolpolicy_*.go). cmd/manager registers each one
// with the manager explicitly, so its wiring shows which controllers run.
package controller

import (
	"time"

	"go.opentelemetry.io/otel/trace"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options are the settings every reconciler may need.
type Options struct {
	// MaxConcurrentReconciles per controller; probes never block a worker for
	// longer than their timeout, and several workers keep one slow server
	// from holding up the others.
	MaxConcurrentReconciles int
	// Workload configures the pods of workload servers.
	Workload WorkloadOptions
	// BridgeNamespaces is the bridge's scope, for name conflicts between
	// MCPServers (see MCPServerReconciler.BridgeNamespaces).
	BridgeNamespaces []string
	// Prober reads servers' catalogs; nil means the MCP prober.
	Prober Prober
	// ApprovalRetention is how long finished ToolApprovals are kept
	// (approval.DefaultRetention when zero).
	ApprovalRetention time.Duration
	// Tracer makes spans of reconciles (nil: no tracing).
	Tracer trace.Tracer
}

// The API client's rate limits of `manager controller` (its
// --kube-api-qps and --kube-api-burst defaults). client-go's own, 20 and 30,
// make a status write per server the bottleneck: 1,000 servers created
// together took 50 s of writes alone, twice the API server's own time for
// the same objects (make bench-controller).
const (
	DefaultAPIQPS   = 100
	DefaultAPIBurst = 200
)

// CacheByObject narrows what the manager's cache holds for the reconcilers:
// only the Leases mcp-operator creates (servers' activity Leases), not the
// nodes' heartbeats and every component's leader election, which are
// renewed every few seconds.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&coordinationv1.Lease{}: {Label: labels.SelectorFromSet(labels.Set{labelManagedBy: operatorName})},
	}
}
