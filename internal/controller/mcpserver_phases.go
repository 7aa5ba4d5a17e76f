package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/textcut"
)

// The phases of a server's reconcile, in the order they run (the list is
// MCPServerReconciler.phases). The probe phases are in mcpserver_probe.go,
// the name check in mcpserver_names.go.

// Kubernetes Event reasons; the message starts with the audit event name.
const (
	eventCrashed           = "Crashed"
	eventRestarting        = "Restarting"
	eventPermanentlyFailed = "PermanentlyFailed"
	eventShutdown          = "Shutdown"
	eventCatalogChanged    = "CatalogChanged"
	eventCatalogRefused    = "CatalogRefused"
	eventRecovered         = "Recovered"
	eventPodDeleted        = "PodDeleted"
)

// suspendIfAsked withdraws the catalog and deletes the pod at once, without
// restart, while spec.suspend is true.
func (r *MCPServerReconciler) suspendIfAsked(ctx context.Context, sc *scope) (phaseResult, error) {
	s := sc.server
	if !s.Spec.Suspend {
		return phaseResult{}, nil
	}
	if serverReadyReason(s) != mcpv1alpha1.ReasonSuspended {
		sc.event(corev1.EventTypeNormal, eventShutdown, "mcp.server.shutdown: spec.suspend is true; the server's tools are withdrawn")
	}
	markDown(s, mcpv1alpha1.ReasonSuspended, "spec.suspend is true")
	s.Status.SleepingSince = nil
	s.Status.Restarts.NextRestartTime = nil
	return phaseResult{stop: true}, r.deletePods(ctx, s)
}

// applyOwnedObjects server-side applies the server's Service and
// NetworkPolicy.
func (r *MCPServerReconciler) applyOwnedObjects(ctx context.Context, sc *scope) (phaseResult, error) {
	if sc.early != nil {
		// Applied by the reconcile that began these retries, from the same
		// spec: five retries a second would otherwise each send two
		// PATCHes that change nothing. An object someone else changed
		// meanwhile is put right by the first reconcile after the retries.
		return phaseResult{}, nil
	}
	if err := r.applyOwned(ctx, sc.server, buildService(sc.server)); err != nil {
		return phaseResult{}, fmt.Errorf("while applying the Service: %w", err)
	}
	if err := r.applyOwned(ctx, sc.server, buildNetworkPolicy(sc.server, r.Workload)); err != nil {
		return phaseResult{}, fmt.Errorf("while applying the NetworkPolicy: %w", err)
	}
	return phaseResult{}, nil
}

// applyOwned server-side applies an object the server owns.
func (r *MCPServerReconciler) applyOwned(ctx context.Context, s *mcpv1alpha1.MCPServer, obj client.Object) error {
	if err := controllerutil.SetControllerReference(s, obj, r.Scheme()); err != nil {
		return err
	}
	gvk, err := r.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return r.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldOwner), client.ForceOwnership)
}

// restartGate keeps a permanently failed server down until its spec changes
// or a restart is requested, and a crashed one down until its backoff ends.
func (r *MCPServerReconciler) restartGate(ctx context.Context, sc *scope) (phaseResult, error) {
	s := sc.server
	st := &s.Status.Restarts
	if st.FailedGeneration != 0 {
		if !recoveryRequested(s) {
			if err := r.deletePods(ctx, s); err != nil {
				return phaseResult{}, err
			}
			return phaseResult{}, &stalledError{reason: mcpv1alpha1.ReasonPermanentlyFailed, message: permanentlyFailedMessage(s)}
		}
		st.FailedGeneration = 0
		st.RestartRequest = ""
		st.Consecutive = 0
		st.NextRestartTime = nil
		sc.event(corev1.EventTypeNormal, eventRecovered, "the server is started again after giving up (spec changed or restart requested)")
	}
	if next := st.NextRestartTime; next != nil && sc.now.Before(next.Time) {
		// The crashed pod goes now that its crash is counted; Ready has said
		// Restarting since then.
		if err := r.deletePods(ctx, s); err != nil {
			return phaseResult{}, err
		}
		return phaseResult{requeueAfter: next.Sub(sc.now), stop: true}, nil
	}
	return phaseResult{}, nil
}

// recoveryRequested: a permanently failed server comes back on a spec change
// or a new value of the restart annotation.
func recoveryRequested(s *mcpv1alpha1.MCPServer) bool {
	return s.Generation != s.Status.Restarts.FailedGeneration ||
		s.Annotations[mcpv1alpha1.RestartAnnotation] != s.Status.Restarts.RestartRequest
}

// reconcilePod keeps exactly one pod of the current spec and incarnation and
// reads its state: a crash, a pod that cannot start (and why), or a running
// pod for the probe.
func (r *MCPServerReconciler) reconcilePod(ctx context.Context, sc *scope) (phaseResult, error) {
	s := sc.server
	desired := buildPod(s, r.Workload)
	desired.Name = podNameFor(s, desired)
	current, err := r.prunePods(ctx, s, desired.Name)
	if err != nil {
		return phaseResult{}, err
	}
	if current == nil {
		sayPodGone(sc, desired.Name)
		if err := controllerutil.SetControllerReference(s, desired, r.Scheme()); err != nil {
			return phaseResult{}, err
		}
		if err := r.Create(ctx, desired, client.FieldOwner(fieldOwner)); err != nil && !apierrors.IsAlreadyExists(err) {
			return phaseResult{}, fmt.Errorf("while creating the server's pod: %w", err)
		}
		s.Status.Restarts.NextRestartTime = nil
		s.Status.Restarts.ProbeFailures = 0
		return phaseResult{}, &waitingError{reason: mcpv1alpha1.ReasonStarting, message: "the server's pod is starting"}
	}
	if sc.early != nil && sc.early.pod != current.UID {
		// The retries were of a pod that is gone, perhaps replaced by one
		// of the same name.
		sc.early = nil
	}
	state := readPod(current, r.deletions.first(current.UID))
	if state.phase == podStarting || state.phase == podUp && !state.readinessLost {
		// Probe failures count only against a pod the kubelet found Ready:
		// any counted now were another pod's, of the same name or not (its
		// replacement's creation resets them too, but that status write may
		// have been lost to a conflict).
		s.Status.Restarts.ProbeFailures = 0
	}
	switch state.phase {
	case podRemoved:
		return r.podRemoved(ctx, sc, current, state.message)
	case podTerminated:
		return r.crash(sc, state.reason, state.message)
	case podStuck:
		return phaseResult{}, &stalledError{reason: state.reason, message: state.message}
	case podStarting:
		return phaseResult{}, &waitingError{reason: state.reason, message: state.message}
	case podUp:
		if servesFrom(s, current) && state.readinessLost {
			// Served from this pod, which the kubelet found Ready and then
			// not: its readiness decides again.
			return phaseResult{}, &waitingError{reason: state.reason, message: state.message}
		}
		// A pod never Ready yet is probed without waiting for the kubelet's
		// readiness, even when an earlier probe already serves from it: the
		// probe is the better test, and a failed one only says the server
		// is still starting (probeWorkload).
		sc.beforeReady = true
	}
	sc.pod, sc.upSince = current, state.upSince
	return phaseResult{}, nil
}

// podRemoved waits for a pod someone else deleted or evicted to be gone, then
// the pod phase starts a new one of the same name: no crash is counted, so
// restarts.consecutive stays and the server never gives up over it. An
// evicted pod that the kubelet left Failed is deleted here to free its name.
func (r *MCPServerReconciler) podRemoved(ctx context.Context, sc *scope, pod *corev1.Pod, how string) (phaseResult, error) {
	s := sc.server
	// Its failed probes, if any, were its removal's.
	s.Status.Restarts.ProbeFailures = 0
	if pod.DeletionTimestamp.IsZero() {
		if err := r.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
			return phaseResult{}, fmt.Errorf("while deleting the evicted pod %s: %w", pod.Name, err)
		}
	}
	if sc.waking || deletesPodsItself(s) {
		// The controller's own deletion (the server slept, was suspended or
		// gave up) that has not finished yet.
		return phaseResult{}, &waitingError{reason: mcpv1alpha1.ReasonStarting, message: "the server's previous pod is still stopping"}
	}
	msg := "the server's pod was " + how + " by someone else; a new one starts when it is gone (not counted as a crash)"
	if c := meta.FindStatusCondition(s.Status.Conditions, mcpv1alpha1.ConditionReady); c == nil || c.Message != msg {
		sc.event(corev1.EventTypeNormal, eventPodDeleted, fmt.Sprintf("pod %s was %s; a new one is started (not counted as a crash)", pod.Name, how))
	}
	return phaseResult{}, &waitingError{reason: mcpv1alpha1.ReasonRestarting, message: msg}
}

// podGone: the pod a reconcile read was deleted outright (no grace period,
// or its deletion ended before the cache showed it) by someone else. The
// pod phase of the next reconcile starts a new one; nothing is counted.
func (r *MCPServerReconciler) podGone(sc *scope, name string) error {
	sayPodGone(sc, name)
	if sc.waking || deletesPodsItself(sc.server) {
		return &waitingError{reason: mcpv1alpha1.ReasonStarting, message: "the server's pod is starting", after: requeueSoon}
	}
	return &waitingError{reason: mcpv1alpha1.ReasonRestarting, message: "the server's pod was deleted by someone else; a new one is started (not counted as a crash)", after: requeueSoon}
}

// sayPodGone emits PodDeleted when the pod the server was served from is
// gone and the controller did not delete it.
func sayPodGone(sc *scope, name string) {
	if ep := sc.server.Status.Endpoint; ep != nil && ep.PodName == name && !deletesPodsItself(sc.server) {
		sc.event(corev1.EventTypeNormal, eventPodDeleted, "the server's pod "+name+" was deleted by someone else; a new one is started (not counted as a crash)")
	}
}

// servesFrom: status.endpoint is this pod, not an earlier one of the same
// name (a replacement gets the name of the pod it replaces). An endpoint
// written without the pod's UID (by an older controller) is matched by name
// and URL, which holds the pod's IP.
func servesFrom(s *mcpv1alpha1.MCPServer, pod *corev1.Pod) bool {
	ep := s.Status.Endpoint
	switch {
	case ep == nil:
		return false
	case ep.PodUID != "":
		return ep.PodUID == string(pod.UID)
	}
	return ep.PodName == pod.Name && ep.URL == workloadURL(s, pod)
}

// deletesPodsItself: the server's last Ready reason is one where the
// controller deleted its pod, so a pod going away is no one else's doing.
func deletesPodsItself(s *mcpv1alpha1.MCPServer) bool {
	switch serverReadyReason(s) {
	case mcpv1alpha1.ReasonSuspended, mcpv1alpha1.ReasonSleeping, mcpv1alpha1.ReasonWaking, mcpv1alpha1.ReasonPermanentlyFailed:
		return true
	}
	return false
}

// podNameFor names a pod by server, incarnation and spec: a restart or a spec
// change is a new pod, never a race with the deletion of the old one.
func podNameFor(s *mcpv1alpha1.MCPServer, pod *corev1.Pod) string {
	spec, _ := json.Marshal(pod.Spec)
	sum := sha256.Sum256(spec)
	return fmt.Sprintf("%s-%d-%s", s.Name, s.Status.Restarts.Total, hex.EncodeToString(sum[:])[:6])
}

// crash counts a crash in status and decides: restart after backoff, or give
// up. The crashed pod is deleted by the next reconcile's restart gate, right
// after the count is written: the status write is optimistically locked, so
// a reconcile working from a stale cache can't count the same crash twice.
// detail, when set, says more than reason (an OOM kill's memory limit).
func (r *MCPServerReconciler) crash(sc *scope, reason, detail string) (phaseResult, error) {
	s := sc.server
	out := recordCrash(&s.Status.Restarts, sc.restart, reason, sc.now)
	s.Status.Restarts.ProbeFailures = 0
	what := reason
	if detail != "" {
		what += ": " + detail
	}
	sc.event(corev1.EventTypeWarning, eventCrashed, fmt.Sprintf("mcp.server.crashed: %s (crash %d in a row)", what, s.Status.Restarts.Consecutive))
	sc.wakeFailed("crashed: " + what)
	if out.giveUp {
		s.Status.Restarts.FailedGeneration = s.Generation
		s.Status.Restarts.RestartRequest = s.Annotations[mcpv1alpha1.RestartAnnotation]
		markDown(s, mcpv1alpha1.ReasonPermanentlyFailed, permanentlyFailedMessage(s))
		sc.event(corev1.EventTypeWarning, eventPermanentlyFailed, "mcp.server.permanently_failed: "+permanentlyFailedMessage(s))
		return phaseResult{requeueAfter: requeueSoon, stop: true}, nil
	}
	wait := out.restartAt.Sub(sc.now)
	markAway(s, mcpv1alpha1.ReasonRestarting, fmt.Sprintf("crashed (%s); restart %d of %d after backoff", what, s.Status.Restarts.Consecutive, sc.restart.maxRestarts))
	sc.event(corev1.EventTypeNormal, eventRestarting, fmt.Sprintf("mcp.server.restarting: restart %d of %d in %s", s.Status.Restarts.Consecutive, sc.restart.maxRestarts, wait))
	// Come back as soon as the count is written: the restart gate deletes
	// the crashed pod and waits out the rest of the backoff.
	return phaseResult{requeueAfter: requeueSoon, stop: true}, nil
}

func permanentlyFailedMessage(s *mcpv1alpha1.MCPServer) string {
	return fmt.Sprintf("gave up after %d crashes in a row (last: %s); change the spec or set the annotation %s to a new value to start it again",
		s.Status.Restarts.Consecutive, s.Status.Restarts.LastExitReason, mcpv1alpha1.RestartAnnotation)
}

// publish writes the probed catalog into status, as catalogPinning allows,
// and schedules the next probe.
func (r *MCPServerReconciler) publish(ctx context.Context, sc *scope) (phaseResult, error) {
	s := sc.server
	sc.probed = true
	wasRefused := meta.IsStatusConditionTrue(s.Status.Conditions, mcpv1alpha1.ConditionDegraded) &&
		meta.FindStatusCondition(s.Status.Conditions, mcpv1alpha1.ConditionDegraded).Reason == mcpv1alpha1.ReasonCatalogNotApproved
	res := publishCatalog(s, sc.catalog, sc.endpoint)
	if res.changed != nil && !res.changed.empty() {
		sc.event(corev1.EventTypeNormal, eventCatalogChanged, "catalog changed: "+textcut.Cut(res.changed.String(), 1024))
	}
	if res.refused && !wasRefused {
		sc.event(corev1.EventTypeWarning, eventCatalogRefused, "catalog refused: its digest differs from spec.tools.approvedDigest")
	}
	if sc.waking && !meta.IsStatusConditionTrue(s.Status.Conditions, mcpv1alpha1.ConditionReady) {
		c := meta.FindStatusCondition(s.Status.Conditions, mcpv1alpha1.ConditionReady)
		sc.wakeFailed(c.Reason + ": " + c.Message)
	} else if sc.waking {
		msg := "the server is Ready again after a wake"
		if !sc.wakeRequest.IsZero() {
			msg += fmt.Sprintf(", %s after the wake request", sc.now.Sub(sc.wakeRequest).Round(time.Millisecond))
		}
		sc.event(corev1.EventTypeNormal, eventWoke, msg)
	}
	log.FromContext(ctx).V(1).Info("catalog probed", "digest", sc.catalog.Digest, "tools", len(sc.catalog.Tools))

	next := nextProbe(s.Spec.Probe.Interval.Duration, s.UID, sc.now)
	if sc.pod != nil && !markStable(&s.Status.Restarts, sc.restart, sc.upSince, sc.now) && s.Status.Restarts.Consecutive > 0 {
		// Come back when the server has been up long enough to be stable.
		next = min(next, sc.upSince.Add(sc.restart.stableAfter).Sub(sc.now)+stableSlack)
	}
	return phaseResult{requeueAfter: next}, nil
}
