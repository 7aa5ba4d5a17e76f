package controller

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/mcp-operator/mcp-operator/internal/approval"
)

// ToolApprovals are created and decided outside the controller (the bridge
// asks, people decide); the controller only cleans up after them with the
// approval package's Reaper, which needs leader election (one deleter).
func init() {
	reconcilers = append(reconcilers, func(mgr ctrl.Manager, opts Options) error {
		r := &approval.Reaper{Client: mgr.GetClient(), Retention: opts.ApprovalRetention, Recorder: mgr.GetEventRecorder("mcp-operator")}
		return r.SetupWithManager(mgr)
	})
}
