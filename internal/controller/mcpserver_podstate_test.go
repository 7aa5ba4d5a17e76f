package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

func TestReadPod(t *testing.T) {
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	spec := corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "install-adapter", Image: "localhost/mcp-operator/manager:dev",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}}}},
		Containers: []corev1.Container{{Name: serverContainer, Image: "ghcr.io/x/server:1",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}},
	}
	server := func(state corev1.ContainerState) []corev1.ContainerStatus {
		return []corev1.ContainerStatus{{Name: serverContainer, State: state}}
	}
	waiting := func(reason, msg string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	}
	tests := []struct {
		name   string
		status corev1.PodStatus
		want   podState
	}{
		{"just created", corev1.PodStatus{Phase: corev1.PodPending},
			podState{phase: podStarting, reason: mcpv1alpha1.ReasonStarting, message: "the server's pod is starting"}},
		{"creating its container", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: server(waiting("ContainerCreating", ""))},
			podState{phase: podStarting, reason: mcpv1alpha1.ReasonStarting, message: "the server's pod is starting"}},
		{"running and ready", corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7",
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: server(corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}})},
			podState{phase: podRunning, upSince: started}},
		{"running, not ready yet", corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7",
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: metav1.NewTime(started.Add(-2 * time.Second))}},
			ContainerStatuses: server(corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}})},
			podState{phase: podUp, reason: mcpv1alpha1.ReasonStarting, message: "the server's pod is starting", upSince: started}},
		{"running, ready and then not", corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7",
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: metav1.NewTime(started.Add(time.Minute))}},
			ContainerStatuses: server(corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}})},
			podState{phase: podUp, reason: mcpv1alpha1.ReasonStarting, message: "the server's pod is starting", upSince: started, readinessLost: true}},
		{"running, no IP yet", corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: server(corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}})},
			podState{phase: podStarting, reason: mcpv1alpha1.ReasonStarting, message: "the server's pod is starting"}},
		{"unschedulable", corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available: 1 Insufficient cpu."}}},
			podState{phase: podStuck, reason: mcpv1alpha1.ReasonUnschedulable, message: "no node can run the server's pod: 0/1 nodes are available: 1 Insufficient cpu."}},
		{"image pull error", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: server(waiting("ErrImagePull", "failed to pull: not found"))},
			podState{phase: podStuck, reason: mcpv1alpha1.ReasonImagePullFailed, message: `image "ghcr.io/x/server:1" of container server cannot be pulled: failed to pull: not found`}},
		{"image pull backoff, same message", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: server(waiting("ImagePullBackOff", `Back-off pulling image "ghcr.io/x/server:1": ErrImagePull: failed to pull: not found`))},
			podState{phase: podStuck, reason: mcpv1alpha1.ReasonImagePullFailed, message: `image "ghcr.io/x/server:1" of container server cannot be pulled: failed to pull: not found`}},
		{"adapter container's image", corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{Name: "install-adapter", State: waiting("ErrImageNeverPull", "")}}},
			podState{phase: podStuck, reason: mcpv1alpha1.ReasonImagePullFailed, message: `image "localhost/mcp-operator/manager:dev" of container install-adapter cannot be pulled: ErrImageNeverPull`}},
		{"missing Secret key", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: server(waiting("CreateContainerConfigError", "couldn't find key token in Secret ns/api"))},
			podState{phase: podStuck, reason: mcpv1alpha1.ReasonContainerConfigError, message: "container server cannot be created: couldn't find key token in Secret ns/api"}},
		{"OOM killed", corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: server(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}})},
			podState{phase: podTerminated, reason: "OOMKilled", message: "container server used all of its memory limit of 64Mi (spec.workload.resources.limits.memory)"}},
		{"exit code", corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: server(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}})},
			podState{phase: podTerminated, reason: "Error (exit code 2)"}},
		// The kubelet stops the adapter's container when its postStart hook
		// fails; its idle process exits 0 on the SIGTERM, and the install
		// wrote its error to the termination log. The kubelet then waits to
		// restart it (CrashLoopBackOff), or has restarted it.
		{"adapter install failed, restart backing off", corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{Name: "install-adapter",
			State: waiting("CrashLoopBackOff", "back-off 10s restarting failed container=install-adapter"),
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed",
				Message: "stdio-adapter --install: while creating /mcp-operator/stdio-adapter: open /mcp-operator/.stdio-adapter-1: no space left on device"}}}},
			ContainerStatuses: server(waiting("PodInitializing", ""))},
			podState{phase: podTerminated, reason: "AdapterInstallFailed", message: "stdio-adapter --install: while creating /mcp-operator/stdio-adapter: open /mcp-operator/.stdio-adapter-1: no space left on device"}},
		{"adapter install failed, restarted", corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{Name: "install-adapter",
			RestartCount: 1, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", Message: "stdio-adapter --install: x"}}}}},
			podState{phase: podTerminated, reason: "AdapterInstallFailed", message: "stdio-adapter --install: x"}},
		{"adapter install failed, no message", corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{Name: "install-adapter",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}},
			podState{phase: podTerminated, reason: "AdapterInstallFailed", message: "the postStart hook of container install-adapter failed (the pod's FailedPostStartHook event says why)"}},
		{"adapter container OOM killed", corev1.PodStatus{Phase: corev1.PodRunning, InitContainerStatuses: []corev1.ContainerStatus{{Name: "install-adapter",
			State: waiting("CrashLoopBackOff", ""), LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}},
			podState{phase: podTerminated, reason: "OOMKilled", message: "container install-adapter used all of its memory limit of 32Mi (set by the operator for its stdio adapter, not by spec.workload.resources)"}},
		// The server exited: the kubelet stops the adapter's container too,
		// which is no install failure.
		{"server exited, adapter stopped after it", corev1.PodStatus{Phase: corev1.PodFailed, InitContainerStatuses: []corev1.ContainerStatus{{Name: "install-adapter",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}},
			ContainerStatuses: server(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}})},
			podState{phase: podTerminated, reason: "Error (exit code 3)"}},
		{"adapter container failed", corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{Name: "install-adapter",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}},
			podState{phase: podTerminated, reason: "Error (exit code 1)"}},
		// Evictions are not the server's doing: not a crash.
		{"evicted by the kubelet", corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory.",
			ContainerStatuses: server(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}})},
			podState{phase: podRemoved, reason: "PodDeleted", message: "evicted by the kubelet (The node was low on resource: memory.)"}},
		{"evicted under node pressure, DisruptionTarget by the kubelet", corev1.PodStatus{Phase: corev1.PodFailed, Conditions: []corev1.PodCondition{{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet", Message: "The node was low on resource: ephemeral-storage."}}},
			podState{phase: podRemoved, reason: "PodDeleted", message: "evicted (TerminationByKubelet: The node was low on resource: ephemeral-storage.)"}},
		// Going over its own limits is the server's doing, like an OOM kill.
		{"evicted for its own ephemeral storage limit", corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "Pod ephemeral local storage usage exceeds the total limit of containers 1Gi. ",
			ContainerStatuses: server(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}})},
			podState{phase: podTerminated, reason: "Evicted", message: "evicted by the kubelet for going over its own limit: Pod ephemeral local storage usage exceeds the total limit of containers 1Gi. "}},
		{"evicted for its emptyDir's limit, DisruptionTarget by the kubelet", corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet", Message: `Usage of EmptyDir volume "tmp" exceeds the limit "64Mi". `}}},
			podState{phase: podTerminated, reason: "Evicted", message: `evicted by the kubelet for going over its own limit: Usage of EmptyDir volume "tmp" exceeds the limit "64Mi". `}},
		{"evicted through the Eviction API (a drain)", corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}},
			ContainerStatuses: server(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 143, Reason: "Error"}})},
			podState{phase: podRemoved, reason: "PodDeleted", message: "evicted (EvictionByEvictionAPI: Eviction API: evicting)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := readPod(&corev1.Pod{Spec: spec, Status: tt.status}, time.Time{})
			if got != tt.want {
				t.Errorf("readPod:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// A deleted pod whose server the kubelet stopped (SIGTERM: 143, SIGKILL after
// the grace period: 137) was not a crash; OOM kills and exits of a pod that
// nobody deleted are.
func TestReadPodDeleted(t *testing.T) {
	gone := metav1.Now()
	for _, code := range []int32{143, 137} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &gone}, Status: corev1.PodStatus{Phase: corev1.PodFailed,
			ContainerStatuses: []corev1.ContainerStatus{{Name: serverContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error"}}}}}}
		if got := readPod(pod, time.Time{}); got.phase != podRemoved || got.message != "deleted" {
			t.Errorf("exit %d of a deleted pod: got %+v, want removed", code, got)
		}
		pod.DeletionTimestamp = nil
		if got := readPod(pod, time.Time{}); got.phase != podTerminated {
			t.Errorf("exit %d of a pod nobody deleted: got %+v, want terminated", code, got)
		}
	}
}

// A container that exited non-zero before its pod's deletion was asked for
// crashed first: the crash counts. One that exited on the kubelet's signal
// after it, whatever its code, did not.
func TestReadPodCrashedThenDeleted(t *testing.T) {
	asked := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	gone, grace := metav1.NewTime(asked.Add(30*time.Second)), int64(30)
	pod := func(code int32, finished time.Time) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &gone, DeletionGracePeriodSeconds: &grace}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: serverContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: code, Reason: "Error", FinishedAt: metav1.NewTime(finished)}}}}}}
	}
	if got := readPod(pod(1, asked.Add(-time.Second)), time.Time{}); got.phase != podTerminated || got.reason != "Error (exit code 1)" {
		t.Errorf("exit 1 before the deletion: got %+v, want terminated", got)
	}
	for _, code := range []int32{1, 143} {
		if got := readPod(pod(code, asked.Add(time.Second)), time.Time{}); got.phase != podRemoved {
			t.Errorf("exit %d after the deletion was asked for: got %+v, want removed", code, got)
		}
	}
	if got := readPod(pod(0, asked.Add(-time.Second)), time.Time{}); got.phase != podRemoved {
		t.Errorf("exit 0 before the deletion: got %+v, want removed", got)
	}
}

// The kubelet's last deletion of a pod whose server it stopped (grace period
// 0, once the containers are gone) makes the API server date the deletion
// then, after the server's exit: a removal, not an exit before the deletion.
func TestReadPodKubeletFinishedDeletion(t *testing.T) {
	exited := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	finished, none := metav1.NewTime(exited.Add(time.Second)), int64(0)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &finished, DeletionGracePeriodSeconds: &none}, Status: corev1.PodStatus{Phase: corev1.PodFailed,
		ContainerStatuses: []corev1.ContainerStatus{{Name: serverContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 2, Reason: "Error", FinishedAt: metav1.NewTime(exited)}}}}}}
	if got := readPod(pod, time.Time{}); got.phase != podRemoved {
		t.Errorf("exit 2 a second before the kubelet's last deletion: got %+v, want removed", got)
	}
}

// A deletion asked again after its grace period ran out gets a grace period
// of 1 dated then, after a server's exit on the first deletion's SIGTERM:
// the first deletion's moment, seen earlier, says it was a removal; a crash
// before that moment still counts, even once the grace period is 0.
func TestReadPodFirstDeletionMoment(t *testing.T) {
	asked := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	exited := asked.Add(time.Second)
	pod := func(again time.Time, grace int64) *corev1.Pod {
		gone := metav1.NewTime(again)
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &gone, DeletionGracePeriodSeconds: &grace}, Status: corev1.PodStatus{Phase: corev1.PodFailed,
			ContainerStatuses: []corev1.ContainerStatus{{Name: serverContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 2, Reason: "Error", FinishedAt: metav1.NewTime(exited)}}}}}}
	}
	again := pod(asked.Add(20*time.Second), 1)
	if got := readPod(again, time.Time{}); got.phase != podTerminated {
		t.Fatalf("the later deletion's own fields: got %+v, want terminated (what the first moment corrects)", got)
	}
	if got := readPod(again, asked); got.phase != podRemoved {
		t.Errorf("exit after the first deletion, asked again later: got %+v, want removed", got)
	}
	if got := readPod(pod(asked.Add(20*time.Second), 0), exited.Add(time.Second)); got.phase != podTerminated {
		t.Errorf("exit before the first deletion, in the kubelet's last state: got %+v, want terminated", got)
	}
}

func TestDeletionMomentsKeepTheEarliest(t *testing.T) {
	var d deletionMoments
	first := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pod := func(at time.Time, grace int64) *corev1.Pod {
		ts := metav1.NewTime(at.Add(time.Duration(grace) * time.Second))
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "p", DeletionTimestamp: &ts, DeletionGracePeriodSeconds: &grace}}
	}
	if got := d.observe(pod(first.Add(5*time.Second), 10)); !got.Equal(first.Add(5 * time.Second)) {
		t.Fatalf("first seen: got %v", got)
	}
	if got := d.observe(pod(first, 10)); !got.Equal(first) {
		t.Errorf("an earlier moment seen later: got %v, want %v", got, first)
	}
	for _, later := range []*corev1.Pod{pod(first.Add(20*time.Second), 1), pod(first.Add(30*time.Second), 0)} {
		if got := d.observe(later); !got.Equal(first) {
			t.Errorf("a later deletion (grace %d): got %v, want the first %v", *later.DeletionGracePeriodSeconds, got, first)
		}
	}
	if got := d.first("p"); !got.Equal(first) {
		t.Errorf("first: got %v, want %v", got, first)
	}
	d.forget("p")
	if got := d.first("p"); !got.IsZero() {
		t.Errorf("first after forget: got %v, want none", got)
	}
	if got := d.observe(pod(first.Add(30*time.Second), 0)); !got.IsZero() {
		t.Errorf("after forget, a grace-0 pod: got %v, want none", got)
	}
}

func TestServesFrom(t *testing.T) {
	pod := func(uid, ip string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "s-0-abcdef", UID: types.UID(uid)}, Status: corev1.PodStatus{PodIP: ip}}
	}
	served := pod("uid-1", "10.0.0.7")
	tests := []struct {
		name     string
		endpoint *mcpv1alpha1.Endpoint
		pod      *corev1.Pod
		want     bool
	}{
		{"no endpoint", nil, served, false},
		{"the pod served", &mcpv1alpha1.Endpoint{URL: "http://10.0.0.7:8080/mcp", PodName: "s-0-abcdef", PodUID: "uid-1"}, served, true},
		{"its replacement, same name", &mcpv1alpha1.Endpoint{URL: "http://10.0.0.7:8080/mcp", PodName: "s-0-abcdef", PodUID: "uid-1"}, pod("uid-2", "10.0.0.7"), false},
		{"written without a UID: the pod served", &mcpv1alpha1.Endpoint{URL: "http://10.0.0.7:8080/mcp", PodName: "s-0-abcdef"}, served, true},
		{"written without a UID: its replacement at a new IP", &mcpv1alpha1.Endpoint{URL: "http://10.0.0.7:8080/mcp", PodName: "s-0-abcdef"}, pod("uid-2", "10.0.0.9"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &mcpv1alpha1.MCPServer{Spec: mcpv1alpha1.MCPServerSpec{Workload: &mcpv1alpha1.Workload{}}}
			s.Status.Endpoint = tt.endpoint
			if got := servesFrom(s, tt.pod); got != tt.want {
				t.Errorf("servesFrom = %v, want %v", got, tt.want)
			}
		})
	}
}
