package controller

import (
	"context"
	"fmt"
	"math"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
// MCPServer would reach every watcher of MCPServers, while the Lease reaches
// only the controller and the bridge replicas, which act on it. Status
// changes only when the server falls asleep or wakes.

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
// activity, or idle elapsed since it while Ready, puts an awake one to
// sleep.
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
	ready := meta.FindStatusCondition(s.Status.Conditions, mcpv1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue {
		// Starting, waking or restarting: a pod slower to start than idle is
		// not idle, and deleting it would start the wait over. Looked at
		// again once Ready, or after idle at the latest.
		return sleepDecision{action: stayAwake, after: idle.Duration}
	}
	// Idle counts from the last activity or from when the server became
	// Ready, whichever is later: a call that woke it is older than its pod.
	from := activity
	if t := ready.LastTransitionTime.Time; t.After(from) {
		from = t
	}
	at := from.Add(idle.Duration)
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
	asked, err := sleepRequest(s)
	if err != nil {
		// A bad value is not a request; the server keeps its idle timer.
		log.FromContext(ctx).Info("sleep request ignored", "reason", err.Error())
	}
	lease, err := r.activityLease(ctx, sc, asked)
	if err != nil {
		return phaseResult{}, err
	}
	activity := lastActivity(lease)
	if t, ok := r.wakeRequests.Load(s.UID); ok && sc.waking {
		sc.wakeRequest = t.(time.Time)
	}
	d := decideSleep(s, activity, asked, sc.now)
	since := metav1.NewTime(sc.now.Truncate(time.Second))
	if t := heldForSleep(lease); t != nil && s.Status.SleepingSince == nil {
		// An earlier reconcile held the Lease for a sleep, but its status
		// write did not happen: that sleep goes on, from its time.
		d, since, activity = sleepDecision{action: fallAsleep, byHand: s.Spec.Workload.Idle == nil}, metav1.NewTime(t.Time), t.Time
	}
	switch d.action {
	case fallAsleep:
		why := "put to sleep by hand"
		if !d.byHand {
			why = fmt.Sprintf("no activity for %s", s.Spec.Workload.Idle.Duration)
		}
		held, err := r.holdForSleep(ctx, s, activity, since)
		if err != nil || !held {
			// Used since this reconcile read the Lease: awake, look again.
			return phaseResult{requeueAfter: requeueSoon}, err
		}
		return phaseResult{stop: true}, r.fallAsleep(ctx, sc, since, why)
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
func (r *MCPServerReconciler) fallAsleep(ctx context.Context, sc *scope, since metav1.Time, why string) error {
	s := sc.server
	if err := r.deletePods(ctx, s); err != nil {
		return err
	}
	// A wake under way ends here, unmeasured.
	r.wakeRequests.Delete(s.UID)
	s.Status.SleepingSince = &since
	// No pod to dial: the bridge wakes the server instead.
	s.Status.Endpoint = nil
	s.Status.Restarts.ProbeFailures = 0
	s.Status.Restarts.NextRestartTime = nil
	msg := fmt.Sprintf("asleep since %s (%s); the next call wakes it", since.UTC().Format(time.RFC3339), why)
	// Both conditions say when the sleep began even when they were False
	// already (falling asleep while Waking or Starting): a wake is judged
	// against that time, and an older one would take a wake written before
	// this sleep for one written after it.
	for _, typ := range []string{mcpv1alpha1.ConditionReady, mcpv1alpha1.ConditionAvailable} {
		setCondition(s, typ, metav1.ConditionFalse, mcpv1alpha1.ReasonSleeping, msg)
		meta.FindStatusCondition(s.Status.Conditions, typ).LastTransitionTime = since
	}
	sc.event(corev1.EventTypeNormal, eventSlept, "the server's pod is removed: "+why+"; its tools stay listed and the next call wakes it")
	return nil
}

// wake ends the sleep: the pod phase starts a pod and Ready says Waking until
// it answers its probe. requested is the activity that woke it (zero when
// unknown).
func (r *MCPServerReconciler) wake(sc *scope, requested time.Time, why string) {
	s := sc.server
	s.Status.SleepingSince = nil
	if !requested.IsZero() {
		// The first request stays when this reconcile's status write
		// conflicts and the next one wakes the server again.
		t, _ := r.wakeRequests.LoadOrStore(s.UID, requested)
		requested = t.(time.Time)
	}
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
// creation starts the idle time. asked is the sleep request (zero: none).
func (r *MCPServerReconciler) activityLease(ctx context.Context, sc *scope, asked time.Time) (*coordinationv1.Lease, error) {
	s := sc.server
	var l coordinationv1.Lease
	err := r.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: activityLeaseName(s)}, &l)
	if err == nil {
		if want := idleSeconds(s); !ptr.Equal(l.Spec.LeaseDurationSeconds, want) {
			// An update, with the cached resourceVersion: a renewal written
			// since makes it conflict and the reconcile retries.
			l.Spec.LeaseDurationSeconds = want
			if err := r.Update(ctx, &l, client.FieldOwner(fieldOwner)); err != nil {
				return nil, fmt.Errorf("while updating the activity Lease's duration: %w", err)
			}
		}
		return &l, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("while reading the activity Lease: %w", err)
	}
	start := sc.now
	if !asked.IsZero() && !asked.After(start) {
		// Created for a sleep request (a server without idle): no activity
		// since the request, which would otherwise look older than the
		// Lease's own creation and never be honoured.
		start = asked.Add(-time.Microsecond)
	}
	now := metav1.NewMicroTime(start.Truncate(time.Microsecond))
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
	err = r.Create(ctx, &l, client.FieldOwner(fieldOwner))
	if apierrors.IsAlreadyExists(err) {
		// Created since the cache was read, or someone else's Lease of the
		// same name, which the cache does not hold.
		return r.existingActivityLease(ctx, s)
	}
	if err != nil {
		return nil, fmt.Errorf("while creating the activity Lease: %w", err)
	}
	return &l, nil
}

// existingActivityLease reads the activity Lease uncached; one this server
// does not control is a conflict, not its activity.
func (r *MCPServerReconciler) existingActivityLease(ctx context.Context, s *mcpv1alpha1.MCPServer) (*coordinationv1.Lease, error) {
	var l coordinationv1.Lease
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: activityLeaseName(s)}, &l); err != nil {
		return nil, fmt.Errorf("while reading the activity Lease: %w", err)
	}
	if !metav1.IsControlledBy(&l, s) {
		return nil, fmt.Errorf("the Lease %s/%s exists and is not this server's activity Lease (not controlled by it): delete or rename it", l.Namespace, l.Name)
	}
	return &l, nil
}

// holdForSleep writes the activity Lease as the server falls asleep:
// holder mcp-operator, renewTime the time it sleeps since. Any later write
// by someone else is then a wake, whenever the cache shows it. The Lease is
// read uncached and updated with that resourceVersion: a renewal newer than
// the activity the decision was made on, or one written meanwhile (a
// conflict), keeps the server awake (false).
func (r *MCPServerReconciler) holdForSleep(ctx context.Context, s *mcpv1alpha1.MCPServer, activity time.Time, since metav1.Time) (bool, error) {
	var l coordinationv1.Lease
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: activityLeaseName(s)}, &l)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("while reading the activity Lease: %w", err)
	}
	if lastActivity(&l).After(activity) {
		return false, nil
	}
	holder, renew := operatorName, metav1.NewMicroTime(since.Time)
	l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.AcquireTime = &holder, &renew, &renew
	err = r.Update(ctx, &l, client.FieldOwner(fieldOwner))
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("while writing the activity Lease: %w", err)
	}
	return true, nil
}

// heldForSleep is the time the operator held the Lease for a sleep at
// (holdForSleep: its acquireTime), while no one else has written it since;
// nil otherwise (a Lease the operator just created has no acquireTime).
func heldForSleep(l *coordinationv1.Lease) *metav1.MicroTime {
	if ptr.Deref(l.Spec.HolderIdentity, "") != operatorName {
		return nil
	}
	return l.Spec.AcquireTime
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

// wakeOnActivity maps an activity Lease someone other than mcp-operator
// wrote last to its server. After a server falls asleep the Lease is the
// operator's (holdForSleep), so such a write is a wake or a renewal; it is
// not judged against the cached server, which may not show the sleep yet
// (a wake dropped then would never come again: the bridge writes once per
// sleep). A renewal of an awake server costs a reconcile at the bridges'
// bounded rate.
func (r *MCPServerReconciler) wakeOnActivity(_ context.Context, o client.Object) []reconcile.Request {
	l, ok := o.(*coordinationv1.Lease)
	if !ok {
		return nil
	}
	name := l.Labels[mcpv1alpha1.ServerLabel]
	if name == "" || ptr.Deref(l.Spec.HolderIdentity, "") == operatorName {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: l.Namespace, Name: name}}}
}
