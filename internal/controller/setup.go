// Package controller holds the reconcilers of mcp-operator's kinds: one file set
// per kind (mcpserver_*.go, toolpolicy_*.go).
package controller

import (
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
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
}

// reconcilers lists every reconciler the controller runs; each kind's file
// set adds itself here.
var reconcilers []func(ctrl.Manager, Options) error

// SetupWithManager registers every reconciler with the manager.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	for _, setup := range reconcilers {
		if err := setup(mgr, opts); err != nil {
			return fmt.Errorf("while setting up a reconciler: %w", err)
		}
	}
	return nil
}
