// Package controller holds the reconcilers of mcp-operator's kinds: one file set
// per kind (mcpserver_*.go, toolpolicy_*.go). cmd/manager registers each one
// with the manager explicitly, so its wiring shows which controllers run.
package controller

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
}
