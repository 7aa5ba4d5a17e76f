package approval

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// stored creates a ToolApproval as the bridge leaves it: the request, and
// the given status.
func stored(t *testing.T, c client.Client, ns string, expires time.Time, st v1alpha1.ToolApprovalStatus, d *v1alpha1.ApprovalDecision) *v1alpha1.ToolApproval {
	t.Helper()
	r := request(ns, time.Minute)
	a := &v1alpha1.ToolApproval{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "fs-"},
		Spec: v1alpha1.ToolApprovalSpec{Decision: d, Request: v1alpha1.ApprovalRequest{
			Requester: r.Requester, Method: r.Method, Server: r.Server, Target: r.Target, Risk: r.Risk,
			Modes: r.Modes, ExpiresAt: metav1.Time{Time: expires},
		}},
	}
	if err := c.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	a.Status = st
	if err := c.Status().Update(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	return a
}

func reconcile(t *testing.T, r *Reaper, a *v1alpha1.ToolApproval) ctrl.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(a)})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestReaperRemovesFinishedApprovalsAfterTheRetention(t *testing.T) {
	c, ns := setup(t)
	now := time.Now()
	r := &Reaper{Client: c, Retention: time.Hour, Now: func() time.Time { return now }}
	for _, phase := range []v1alpha1.ApprovalPhase{v1alpha1.ApprovalApproved, v1alpha1.ApprovalDenied, v1alpha1.ApprovalExpired, v1alpha1.ApprovalCancelled} {
		old := stored(t, c, ns, now.Add(-2*time.Hour), v1alpha1.ToolApprovalStatus{Phase: phase, FinishedAt: &metav1.Time{Time: now.Add(-61 * time.Minute)}}, nil)
		recent := stored(t, c, ns, now.Add(-time.Hour), v1alpha1.ToolApprovalStatus{Phase: phase, FinishedAt: &metav1.Time{Time: now.Add(-10 * time.Minute)}}, nil)

		reconcile(t, r, old)
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(old), old); !apierrors.IsNotFound(err) {
			t.Errorf("%s finished 61 minutes ago with a 1h retention: still there (%v)", phase, err)
		}
		res := reconcile(t, r, recent)
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(recent), recent); err != nil {
			t.Errorf("%s finished 10 minutes ago was removed: %v", phase, err)
		}
		if res.RequeueAfter < 49*time.Minute || res.RequeueAfter > 50*time.Minute {
			t.Errorf("%s: comes back after %s, want when its retention ends (50m)", phase, res.RequeueAfter)
		}
	}
}

func TestReaperEndsApprovalsNoReplicaHolds(t *testing.T) {
	c, ns := setup(t)
	now := time.Now()
	r := &Reaper{Client: c, Retention: time.Hour, Now: func() time.Time { return now }}
	pending := v1alpha1.ToolApprovalStatus{Phase: v1alpha1.ApprovalPending}

	waiting := stored(t, c, ns, now.Add(time.Minute), pending, nil)
	// expiresAt is stored to the second.
	if res := reconcile(t, r, waiting); res.RequeueAfter <= 2*time.Minute-time.Second || res.RequeueAfter > 2*time.Minute {
		t.Errorf("a request that still waits: come back after %s, want at expiry plus the grace (2m)", res.RequeueAfter)
	}
	if get(t, c, ns, waiting.Name).Status.Phase != v1alpha1.ApprovalPending {
		t.Error("a request that still waits was ended")
	}

	abandoned := stored(t, c, ns, now.Add(-2*time.Minute), pending, nil)
	reconcile(t, r, abandoned)
	if st := get(t, c, ns, abandoned.Name).Status; st.Phase != v1alpha1.ApprovalExpired || st.FinishedAt == nil {
		t.Errorf("abandoned undecided request: status %+v, want Expired", st)
	}

	decidedButGone := stored(t, c, ns, now.Add(-2*time.Minute), pending, &v1alpha1.ApprovalDecision{Verdict: v1alpha1.VerdictAllowOnce, Decider: "alice"})
	reconcile(t, r, decidedButGone)
	if st := get(t, c, ns, decidedButGone.Name).Status; st.Phase != v1alpha1.ApprovalCancelled {
		t.Errorf("approved but no replica held the request: status %+v, want Cancelled (it never ran)", st)
	}
}
