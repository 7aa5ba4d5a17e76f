package controller

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// Reading a server's pod as the kubelet and the scheduler report it: pure
// functions, so every state a user can meet is table-tested.

type podPhase int

const (
	podStarting podPhase = iota
	// podStuck: the pod cannot start until someone fixes something.
	podStuck
	podRunning
	// podUp: the server's container runs and the pod has its IP, but the
	// kubelet's readiness probe has not passed yet. The kubelet probes at
	// most once a second, so a server that listens within milliseconds of
	// its start is usually reported Ready most of a second later: the
	// controller may probe it before that (reconcilePod says when).
	podUp
	podTerminated
	// podRemoved: someone else deleted or evicted the pod (kubectl delete
	// pod, a node drain, an eviction). Not a crash: whatever its containers
	// exited with, the server did not end on its own.
	podRemoved
)

// podState is what the controller needs to know of a pod.
type podState struct {
	phase podPhase
	// reason: for a terminated pod, how it ended (status.restarts.lastExitReason:
	// OOMKilled, Error (exit code 1), ...); for a stuck pod, the Ready reason.
	reason string
	// message says what happened in words a user can act on.
	message string
	// upSince is when a running pod's server started.
	upSince time.Time
	// readinessLost: a podUp pod was Ready since its server started and the
	// kubelet's readiness probe failed since, as opposed to one not Ready
	// yet.
	readinessLost bool
}

// Waiting reasons of the kubelet that need a user's fix, by the Ready reason
// they become.
var stuckWaitingReasons = map[string]string{
	"ErrImagePull":               mcpv1alpha1.ReasonImagePullFailed,
	"ImagePullBackOff":           mcpv1alpha1.ReasonImagePullFailed,
	"InvalidImageName":           mcpv1alpha1.ReasonImagePullFailed,
	"ErrImageNeverPull":          mcpv1alpha1.ReasonImagePullFailed,
	"CreateContainerConfigError": mcpv1alpha1.ReasonContainerConfigError,
	"CreateContainerError":       mcpv1alpha1.ReasonContainerConfigError,
}

// readPod reads a pod: removed by someone else, terminated (a crash), stuck
// (cannot start), starting, or running (ready to probe). firstAsked is the
// earliest moment a deletion of it was asked for that the controller saw
// (zero: none), which its fields may no longer say.
func readPod(pod *corev1.Pod, firstAsked time.Time) podState {
	if how, ok := ownLimitEviction(pod); ok {
		return podState{phase: podTerminated, reason: "Evicted", message: how}
	}
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	if how, ok := removal(pod); ok && !crashedBeforeDeletion(pod, statuses, firstAsked) {
		return podState{phase: podRemoved, reason: "PodDeleted", message: how}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		// The server's end comes first: the kubelet then stops the
		// adapter's container too.
		if t := cs.State.Terminated; t != nil && cs.Name == serverContainer {
			return podState{phase: podTerminated, reason: exitReason(t), message: exitDetail(pod, cs.Name, t)}
		}
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		// The adapter's container (a sidecar) never ends on its own while
		// its pod lives; the kubelet restarts it when it does, but the
		// adapter could not be installed, or was lost: the pod is replaced,
		// as after a crash.
		if cs.Name != adapterContainer {
			continue
		}
		t := cs.State.Terminated
		if t == nil {
			t = cs.LastTerminationState.Terminated
		}
		if t != nil {
			return adapterEnded(pod, t)
		}
	}
	for _, cs := range statuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return podState{phase: podTerminated, reason: exitReason(t), message: exitDetail(pod, cs.Name, t)}
		}
	}
	switch pod.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		reason := pod.Status.Reason
		if reason == "" {
			reason = string(pod.Status.Phase)
		}
		return podState{phase: podTerminated, reason: reason, message: pod.Status.Message}
	case corev1.PodRunning:
		if up, ok := runningSince(pod); ok {
			return podState{phase: podRunning, upSince: up}
		}
		if up, ok := serverStarted(pod); ok {
			return podState{phase: podUp, reason: mcpv1alpha1.ReasonStarting, message: "the server's pod is starting", upSince: up,
				readinessLost: notReadySince(pod, up)}
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return podState{phase: podStuck, reason: mcpv1alpha1.ReasonUnschedulable,
				message: "no node can run the server's pod: " + c.Message}
		}
	}
	for _, cs := range statuses {
		w := cs.State.Waiting
		if w == nil {
			continue
		}
		switch reason := stuckWaitingReasons[w.Reason]; reason {
		case mcpv1alpha1.ReasonImagePullFailed:
			return podState{phase: podStuck, reason: reason,
				message: fmt.Sprintf("image %q of container %s cannot be pulled: %s", containerImage(pod, cs), cs.Name, pullError(w))}
		case mcpv1alpha1.ReasonContainerConfigError:
			return podState{phase: podStuck, reason: reason,
				message: fmt.Sprintf("container %s cannot be created: %s", cs.Name, w.Message)}
		}
	}
	return podState{phase: podStarting, reason: mcpv1alpha1.ReasonStarting, message: "the server's pod is starting"}
}

// ownLimitEviction says why the kubelet evicted the pod for going over a
// limit of its own (its ephemeral storage, an emptyDir's sizeLimit): the
// server's doing, like an OOM kill, so a crash rather than a removal. The
// kubelet says so in the pod's status message, and in the DisruptionTarget
// condition it adds.
func ownLimitEviction(pod *corev1.Pod) (string, bool) {
	overLimit := func(msg string) bool { return strings.Contains(msg, "exceed") && strings.Contains(msg, "limit") }
	if pod.Status.Reason == "Evicted" && overLimit(pod.Status.Message) {
		return "evicted by the kubelet for going over its own limit: " + pod.Status.Message, true
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "TerminationByKubelet" && overLimit(c.Message) {
			return "evicted by the kubelet for going over its own limit: " + c.Message, true
		}
	}
	return "", false
}

// crashedBeforeDeletion: a container of a deleted pod had exited non-zero
// before the deletion was asked for: it crashed and was deleted after, so
// the crash counts. The moment asked is the earliest of firstAsked and the
// pod's deletionTimestamp less its grace period.
//
// That difference is when the deletion was asked for only while the pod
// keeps the grace period of its first deletion. The kubelet ends every
// graceful deletion by deleting the pod again with none once its containers
// have stopped, and the API server then moves deletionTimestamp to that
// moment rather than into the past; a graceful deletion asked again after
// the deadline (kubectl delete of a pod stuck Terminating) gets a grace
// period of 1 and a deletionTimestamp of its own moment. Either dates the
// deletion after a server's exit on the kubelet's SIGTERM: a grace period
// of 0 says nothing of when the deletion was asked for, and firstAsked, from
// the pod's earlier states, says more than a later deletion's fields.
func crashedBeforeDeletion(pod *corev1.Pod, statuses []corev1.ContainerStatus, firstAsked time.Time) bool {
	if pod.DeletionTimestamp.IsZero() {
		return false
	}
	asked, ok := deletionAsked(pod)
	if !firstAsked.IsZero() && (!ok || firstAsked.Before(asked)) {
		asked, ok = firstAsked, true
	}
	if !ok {
		return false
	}
	for _, cs := range statuses {
		t := cs.State.Terminated
		if t != nil && t.ExitCode != 0 && !t.FinishedAt.IsZero() && t.FinishedAt.Time.Before(asked) {
			return true
		}
	}
	return false
}

// removal says how a pod was taken away by someone else, if it was: a
// deletion (its deletionTimestamp; the exit code 137 or 143 its containers
// get from the kubelet's SIGTERM/SIGKILL is not the server's), or an
// eviction (a DisruptionTarget condition, or the kubelet's Evicted status).
func removal(pod *corev1.Pod) (string, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			how := "evicted (" + c.Reason
			if c.Message != "" {
				how += ": " + c.Message
			}
			return how + ")", true
		}
	}
	if pod.Status.Phase == corev1.PodFailed && pod.Status.Reason == "Evicted" {
		return "evicted by the kubelet (" + pod.Status.Message + ")", true
	}
	if !pod.DeletionTimestamp.IsZero() {
		return "deleted", true
	}
	return "", false
}

// runningSince is when a ready pod's server started.
func runningSince(pod *corev1.Pod) (time.Time, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodReady || c.Status != corev1.ConditionTrue || pod.Status.PodIP == "" {
			continue
		}
		up := c.LastTransitionTime.Time
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name == serverContainer && cs.State.Running != nil {
				up = cs.State.Running.StartedAt.Time
			}
		}
		return up, true
	}
	return time.Time{}, false
}

// serverStarted is when the server's container of a pod with an IP started,
// whether or not the pod is Ready.
func serverStarted(pod *corev1.Pod) (time.Time, bool) {
	if pod.Status.PodIP == "" {
		return time.Time{}, false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == serverContainer && cs.State.Running != nil {
			return cs.State.Running.StartedAt.Time, true
		}
	}
	return time.Time{}, false
}

// notReadySince: the pod's Ready condition turned False after its server
// started, so it was Ready in between (the kubelet dates a condition by its
// last change of status). A pod not Ready yet has had Ready False since
// before its containers started.
func notReadySince(pod *corev1.Pod, started time.Time) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionFalse {
			return c.LastTransitionTime.Time.After(started)
		}
	}
	return false
}

// pullError is the runtime's reason a pull failed. The kubelet alternates
// between ErrImagePull (the error) and ImagePullBackOff ("Back-off pulling
// image "x": ErrImagePull: the error"); both give the same message, so status
// does not change at each retry.
func pullError(w *corev1.ContainerStateWaiting) string {
	msg := w.Message
	if strings.HasPrefix(msg, "Back-off pulling image") {
		if i := strings.Index(msg, ": "); i >= 0 {
			msg = msg[i+2:]
		}
	}
	msg = strings.TrimPrefix(msg, "ErrImagePull: ")
	if msg == "" {
		msg = w.Reason
	}
	return msg
}

func containerImage(pod *corev1.Pod, cs corev1.ContainerStatus) string {
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if c.Name == cs.Name {
			return c.Image
		}
	}
	return cs.Image
}

// exitReason is how a container ended, as status.restarts.lastExitReason and
// the audit event mcp.server.crashed give it.
func exitReason(t *corev1.ContainerStateTerminated) string {
	if t.Reason == "OOMKilled" {
		return "OOMKilled"
	}
	if t.Signal != 0 {
		return fmt.Sprintf("killed by signal %d", t.Signal)
	}
	reason := t.Reason
	if reason == "" {
		reason = "Error"
	}
	return fmt.Sprintf("%s (exit code %d)", reason, t.ExitCode)
}

// reasonAdapterInstallFailed is the exit reason of a pod whose adapter
// container's postStart hook could not install the stdio adapter.
const reasonAdapterInstallFailed = "AdapterInstallFailed"

// adapterEnded reads how the adapter's container ended. When its postStart
// hook (the install) fails, the kubelet stops the container, whose idle
// process exits 0 on the signal: the container's status then says
// "Completed", and only its termination message, which the install writes,
// says what failed.
func adapterEnded(pod *corev1.Pod, t *corev1.ContainerStateTerminated) podState {
	if t.Reason == "OOMKilled" || t.ExitCode != 0 {
		return podState{phase: podTerminated, reason: exitReason(t), message: exitDetail(pod, adapterContainer, t)}
	}
	msg := strings.TrimSpace(t.Message)
	if msg == "" {
		msg = "the postStart hook of container " + adapterContainer + " failed (the pod's FailedPostStartHook event says why)"
	}
	return podState{phase: podTerminated, reason: reasonAdapterInstallFailed, message: msg}
}

// exitDetail says more than the exit reason where it helps: an OOM kill names
// the memory limit it hit, and who sets it.
func exitDetail(pod *corev1.Pod, container string, t *corev1.ContainerStateTerminated) string {
	if t.Reason != "OOMKilled" {
		return ""
	}
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if c.Name != container {
			continue
		}
		if limit, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
			setBy := "spec.workload.resources.limits.memory"
			if container != serverContainer {
				setBy = "set by the operator for its stdio adapter, not by spec.workload.resources"
			}
			return fmt.Sprintf("container %s used all of its memory limit of %s (%s)", container, limit.String(), setBy)
		}
	}
	return fmt.Sprintf("container %s ran out of memory", container)
}
