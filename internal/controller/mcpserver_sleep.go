package controller

import (
	"context"
	"fmt"
	"math"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// Sleeping servers. A workload server with spec.workload.idle loses its pod
// after that long without activity and gets it back on the next call; its
// catalog stays published meanwhile. Activity is recorded in a Lease per
// server (<server>-activity) whose spec.renewTime the bridge replicas write
// at a bounded rate while the server is used, and at once to wake it. A
// Lease, not a field or an annotation of the MCPServer: every write to the
// MCPServer would reach every watcher of MCPServers (the bridge included),
// while the Lease is watched by the controller alone. Status changes only
// when the server falls asleep or wakes.

// Kubernetes Event reasons of sleeping and waking.
const (
	eventSlept      = "Slept"
	eventWoke       = "Woke"
	eventWakeFailed = "WakeFailed"
)

// activityLeaseName is the name of a server's activity Lease.
func activityLeaseName(s *mcpv1alpha1.MCPServer) string {
	return s.Name + mcpv1alpha1.ActivityLeaseSuffix
}

// sleeps: the server has an activity Lease, because it sleeps when idle or
// was put to sleep by hand.
func sleeps(s *mcpv1alpha1.MCPServer) bool {
	return s.Spec.Workload != nil && (s.Spec.Workload.Idle != nil || s.Annotations[mcpv1alpha1.SleepAnnotation] != "")
}

// lastActivity is the Lease's renewTime, or its creation when no bridge has
// written it yet (a server starts its idle time when it starts sleeping).
func lastActivity(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime != nil {
		return l.Spec.RenewTime.Time
	}
	return l.CreationTimestamp.Time
}

// sleepAction is what the sleep phase does.
type sleepAction int

const (
	stayAwake sleepAction = iota
	fallAsleep
	stayAsleep
	wakeUp
)

// sleepDecision is the sleep phase's decision and, when awake, when to look
// again.
type sleepDecision struct {
	action sleepAction
	after  time.Duration
	// byHand: the sleep was asked for with the sleep annotation.
	byHand bool
}

// decideSleep decides from the server's state, its last activity and the
// sleep annotation (zero: none) at now. Activity newer than the time it fell
// asleep wakes a sleeping server; a sleep request newer than the last
// activity, or idle elapsed since it, puts an awake one to sleep.
func decideSleep(s *mcpv1alpha1.MCPServer, activity, asked, now time.Time) sleepDecision {
	if since := s.Status.SleepingSince; since != nil {
		if wakes(activity, since.Time, asked) {
			return sleepDecision{action: wakeUp}
		}
		return sleepDecision{action: stayAsleep}
	}
	if !asked.IsZero() && asked.After(activity) {
		return sleepDecision{action: fallAsleep, byHand: true}
	}
	idle := s.Spec.Workload.Idle
	if idle == nil {
		return sleepDecision{action: stayAwake}
	}
	at := activity.Add(idle.Duration)
	if !now.Before(at) {
		return sleepDecision{action: fallAsleep}
	}
	return sleepDecision{action: stayAwake, after: at.Sub(now)}
}

// wakes: activity after the server fell asleep wakes it. sleepingSince is
// in whole seconds, so activity within the second the server fell asleep
// may be from before the sleep: activity that a standing sleep request is
// newer than (a server put to sleep by hand, or created asleep) is not a
// wake.
func wakes(activity, since, asked time.Time) bool {
	return activity.After(since) && activity.After(asked)
}

// sleepRequest is the time of the sleep annotation; zero when there is
// none. A value that is not an RFC 3339 time is an error.
func sleepRequest(s *mcpv1alpha1.MCPServer) (time.Time, error) {
	v := s.Annotations[mcpv1alpha1.SleepAnnotation]
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("annotation %s is %q, not an RFC 3339 time such as 2026-01-02T15:04:05Z", mcpv1alpha1.SleepAnnotation, v)
	}
	return t, nil
}

// sleepOrWake keeps the activity Lease and puts the server to sleep or wakes
// it. A sleeping server's reconcile stops here: no pod, no probe.
func (r *MCPServerReconciler) sleepOrWake(ctx context.Context, sc *scope) (phaseResult, error) {
	s := sc.server
	sc.waking = serverReadyReason(s) == mcpv1alpha1.ReasonWaking
	if !sleeps(s) {
		if err := r.deleteActivityLease(ctx, s); err != nil {
			return phaseResult{}, err
		}
		if s.Status.SleepingSince != nil {
			// idle was unset while asleep: the server runs again.
			r.wake(sc, time.Time{}, "spec.workload.idle was unset")
		}
		return phaseResult{}, nil
	}
	lease, err := r.activityLease(ctx, sc)
	if err != nil {
		return phaseResult{}, err
	}
	activity := lastActivity(lease)
	if sc.waking {
		sc.wakeRequest = activity
	}
	asked, err := sleepRequest(s)
	if err != nil {
		// A bad value is not a request; the server keeps its idle timer.
		log.FromContext(ctx).Info("sleep request ignored", "reason", err.Error())
	}
	d := decideSleep(s, activity, asked, sc.now)
	switch d.action {
	case fallAsleep:
		// By hand, idle may be unset.
		why := "put to sleep by hand"
		if !d.byHand {
			why = fmt.Sprintf("no activity for %s", s.Spec.Workload.Idle.Duration)
		}
		return phaseResult{stop: true}, r.fallAsleep(ctx, sc, why)
	case stayAsleep:
		// A pod someone else started (or one left by a failed delete) goes.
		return phaseResult{stop: true}, r.deletePods(ctx, s)
	case wakeUp:
		r.wake(sc, activity, "activity at "+activity.UTC().Format(time.RFC3339))
	}
	return phaseResult{requeueAfter: d.after}, nil
}

// fallAsleep deletes the pod and says so in status, keeping the catalog: the
// bridge lists the tools and wakes the server on a call.
func (r *MCPServerReconciler) fallAsleep(ctx context.Context, sc *scope, why string) error {
	s := sc.server
	if err := r.deletePods(ctx, s); err != nil {
		return err
	}
	since := metav1.NewTime(sc.now.Truncate(time.Second))
	s.Status.SleepingSince = &since
	// No pod to dial: the bridge wakes the server instead.
	s.Status.Endpoint = nil
	s.Status.Restarts.ProbeFailures = 0
	s.Status.Restarts.NextRestartTime = nil
	msg := fmt.Sprintf("asleep since %s (%s); the next call wakes it", since.UTC().Format(time.RFC3339), why)
	setCondition(s, mcpv1alpha1.ConditionReady, metav1.ConditionFalse, mcpv1alpha1.ReasonSleeping, msg)
	setCondition(s, mcpv1alpha1.ConditionAvailable, metav1.ConditionFalse, mcpv1alpha1.ReasonSleeping, msg)
	sc.event(corev1.EventTypeNormal, eventSlept, "the server's pod is removed: "+why+"; its tools stay listed and the next call wakes it")
	return nil
}

// wake ends the sleep: the pod phase starts a pod and Ready says Waking until
// it answers its probe. requested is the activity that woke it (zero when
// unknown).
func (r *MCPServerReconciler) wake(sc *scope, requested time.Time, why string) {
	s := sc.server
	s.Status.SleepingSince = nil
	sc.waking, sc.wakeStarted, sc.wakeRequest = true, true, requested
	markWaking(s, "woken by "+why+"; the server's pod is starting")
}

// markWaking says the server is waking, keeping its catalog published: the
// bridge holds calls until Ready.
func markWaking(s *mcpv1alpha1.MCPServer, message string) {
	s.Status.Endpoint = nil
	setCondition(s, mcpv1alpha1.ConditionReady, metav1.ConditionFalse, mcpv1alpha1.ReasonWaking, message)
	setCondition(s, mcpv1alpha1.ConditionAvailable, metav1.ConditionFalse, mcpv1alpha1.ReasonWaking, message)
}

// activityLease is the server's activity Lease, created when missing: its
// creation starts the idle time. A sleep request standing when it is created
// (a server without idle put to sleep by hand, or one created asleep) is
// newer than the activity it starts with, so that the request counts.
func (r *MCPServerReconciler) activityLease(ctx context.Context, sc *scope) (*coordinationv1.Lease, error) {
	s := sc.server
	var l coordinationv1.Lease
	err := r.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: activityLeaseName(s)}, &l)
	if err == nil {
		if want := idleSeconds(s); !ptr.Equal(l.Spec.LeaseDurationSeconds, want) {
			patch := client.MergeFrom(l.DeepCopy())
			l.Spec.LeaseDurationSeconds = want
			if err := r.Patch(ctx, &l, patch, client.FieldOwner(fieldOwner)); err != nil {
				return nil, fmt.Errorf("while updating the activity Lease's duration: %w", err)
			}
		}
		return &l, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("while reading the activity Lease: %w", err)
	}
	start := sc.now.Truncate(time.Microsecond)
	if asked, err := sleepRequest(s); err == nil && !asked.IsZero() && !asked.After(start) {
		start = asked.Add(-time.Microsecond)
	}
	now := metav1.NewMicroTime(start)
	holder := operatorName
	l = coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: activityLeaseName(s), Labels: map[string]string{
			labelManagedBy: operatorName, mcpv1alpha1.ServerLabel: s.Name,
		}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &now, LeaseDurationSeconds: idleSeconds(s)},
	}
	if err := controllerutil.SetControllerReference(s, &l, r.Scheme()); err != nil {
		return nil, err
	}
	if err := r.Create(ctx, &l, client.FieldOwner(fieldOwner)); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("while creating the activity Lease: %w", err)
	}
	return &l, nil
}

// idleSeconds is spec.workload.idle in whole seconds, rounded up, as the
// activity Lease's leaseDurationSeconds: the bridge paces its renewals by it
// (a quarter of it, at most a minute) without reading the MCPServer's spec.
// Nil for a server put to sleep by hand with no idle time.
func idleSeconds(s *mcpv1alpha1.MCPServer) *int32 {
	if s.Spec.Workload == nil || s.Spec.Workload.Idle == nil {
		return nil
	}
	secs := math.Ceil(s.Spec.Workload.Idle.Seconds())
	return ptr.To(int32(max(1, min(secs, math.MaxInt32))))
}

// deleteActivityLease deletes the server's activity Lease if it has one.
func (r *MCPServerReconciler) deleteActivityLease(ctx context.Context, s *mcpv1alpha1.MCPServer) error {
	var l coordinationv1.Lease
	err := r.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: activityLeaseName(s)}, &l)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("while reading the activity Lease: %w", err)
	}
	if err := r.Delete(ctx, &l); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("while deleting the activity Lease: %w", err)
	}
	return nil
}

// wakeOnActivity maps an activity Lease to its server when the Lease says to
// wake it. Renewals of an awake server's Lease start no reconcile (and no
// probe): the server's own requeue at the end of its idle time reads the
// Lease then.
func (r *MCPServerReconciler) wakeOnActivity(ctx context.Context, o client.Object) []reconcile.Request {
	l, ok := o.(*coordinationv1.Lease)
	if !ok {
		return nil
	}
	name := l.Labels[mcpv1alpha1.ServerLabel]
	if name == "" {
		return nil
	}
	var s mcpv1alpha1.MCPServer
	if err := r.Get(ctx, types.NamespacedName{Namespace: l.Namespace, Name: name}, &s); err != nil {
		return nil
	}
	asked, _ := sleepRequest(&s) // a bad value is no request
	if since := s.Status.SleepingSince; since == nil || !wakes(lastActivity(l), since.Time, asked) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}}}
}
