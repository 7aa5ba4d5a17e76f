package approval

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// The controller's rights for the Reaper (collected into config/rbac/role.yaml).
// +kubebuilder:rbac:groups=mcp-operator.dev,resources=toolapprovals,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=mcp-operator.dev,resources=toolapprovals/status,verbs=get;update;patch

// DefaultRetention is how long a finished ToolApproval is kept.
const DefaultRetention = 24 * time.Hour

// abandonGrace is how long past its expiry a Pending approval waits for the
// bridge replica that holds its request to record the outcome; after it,
// that replica is taken to be gone.
const abandonGrace = time.Minute

// conflictRetry is when a reconcile that lost a race to another writer runs
// again: soon, as the object it read is merely stale.
const conflictRetry = 100 * time.Millisecond

// Reaper is the reconciler that removes finished ToolApprovals a retention
// period after they finished, and ends those whose bridge replica went away
// (still Pending a while after their expiry). It runs in the controller,
// which is leader-elected, so only one replica deletes.
//
// +kubebuilder:rbac:groups=mcp-operator.dev,resources=toolapprovals,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=mcp-operator.dev,resources=toolapprovals/status,verbs=get;update;patch
type Reaper struct {
	Client client.Client
	// Retention after finishedAt (DefaultRetention when zero).
	Retention time.Duration
	Recorder  EventRecorder
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// SetupWithManager runs the reaper on mgr.
func (r *Reaper) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&v1alpha1.ToolApproval{}).Named("toolapproval-retention").Complete(r)
}

func (r *Reaper) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reaper) retention() time.Duration {
	if r.Retention > 0 {
		return r.Retention
	}
	return DefaultRetention
}

// Reconcile deletes a finished approval whose retention is over, ends an
// abandoned one, and otherwise comes back when one of those is due.
func (r *Reaper) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var a v1alpha1.ToolApproval
	if err := r.Client.Get(ctx, req.NamespacedName, &a); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := r.now()
	if finished(a.Status.Phase) {
		since := a.CreationTimestamp.Time
		if a.Status.FinishedAt != nil {
			since = a.Status.FinishedAt.Time
		}
		if due := since.Add(r.retention()); now.Before(due) {
			return ctrl.Result{RequeueAfter: due.Sub(now)}, nil
		}
		if err := r.Client.Delete(ctx, &a, client.Preconditions{UID: &a.UID}); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("while deleting a finished ToolApproval: %w", err)
		}
		return ctrl.Result{}, nil
	}
	abandoned := a.Spec.Request.ExpiresAt.Add(abandonGrace)
	if now.Before(abandoned) {
		return ctrl.Result{RequeueAfter: abandoned.Sub(now)}, nil
	}
	phase, msg := v1alpha1.ApprovalExpired, "nobody decided before the expiry, and no bridge replica holds the request any more"
	if a.Spec.Decision != nil {
		phase, msg = v1alpha1.ApprovalCancelled, "decided by "+a.Spec.Decision.Decider+", but no bridge replica held the request any more: it did not run"
	}
	a.Status = v1alpha1.ToolApprovalStatus{Phase: phase, Message: msg, FinishedAt: &metav1.Time{Time: now}}
	if err := r.Client.Status().Update(ctx, &a); err != nil {
		if apierrors.IsConflict(err) {
			// Worked from a stale object: nothing was written; run again.
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		return ctrl.Result{}, fmt.Errorf("while ending an abandoned ToolApproval: %w", err)
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(&a, nil, "Warning", string(phase), "Reap", "%s", msg)
	}
	return ctrl.Result{RequeueAfter: r.retention()}, nil
}

func finished(p v1alpha1.ApprovalPhase) bool {
	switch p {
	case v1alpha1.ApprovalApproved, v1alpha1.ApprovalDenied, v1alpha1.ApprovalExpired, v1alpha1.ApprovalCancelled:
		return true
	}
	return false
}
