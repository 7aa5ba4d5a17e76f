package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// A pod deleted or evicted by someone else is recreated and never counted as
// a crash. envtest runs no kubelet, so an unscheduled pod is deleted at once;
// a finalizer of the test's holds a deleted pod in the state a kubelet shows
// while it stops the containers (deletionTimestamp set, exit code 143).

const holdFinalizer = "test.mcp-operator.dev/hold"

// holdPod keeps the pod after its deletion until release.
func holdPod(pod *corev1.Pod) {
	patch := client.MergeFrom(pod.DeepCopy())
	pod.Finalizers = append(pod.Finalizers, holdFinalizer)
	ExpectWithOffset(1, k8sClient.Patch(ctx, pod, patch)).To(Succeed())
}

func release(pod *corev1.Pod) {
	EventuallyWithOffset(1, func() error {
		var cur corev1.Pod
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), &cur); err != nil {
			return client.IgnoreNotFound(err)
		}
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Finalizers = nil
		return k8sClient.Patch(ctx, &cur, patch)
	}).Should(Succeed())
}

// stoppedByKubelet writes what the kubelet reports once its SIGTERM on
// deletion ended the server: exit code 143, Failed.
func stoppedByKubelet(pod *corev1.Pod) { serverExited(pod, 143, time.Time{}) }

// serverExited writes what the kubelet reports once the server's process
// ended with code at exited (zero: no time reported). A Go server that is
// its container's PID 1 and handles no signal exits with 2 on SIGTERM.
func serverExited(pod *corev1.Pod, code int32, exited time.Time) {
	EventuallyWithOffset(1, func() error {
		var cur corev1.Pod
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), &cur); err != nil {
			return err
		}
		t := &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error"}
		if !exited.IsZero() {
			t.FinishedAt = metav1.NewTime(exited)
		}
		cur.Status.Phase = corev1.PodFailed
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: serverContainer, Image: cur.Spec.Containers[0].Image, ImageID: "sha256:0",
			State: corev1.ContainerState{Terminated: t},
		}}
		return k8sClient.Status().Update(ctx, &cur)
	}).Should(Succeed())
}

// newPodAfter waits for a live pod of the server other than old (or old's
// name recreated: a new UID).
func newPodAfter(s *mcpv1alpha1.MCPServer, old *corev1.Pod) *corev1.Pod {
	var pod corev1.Pod
	EventuallyWithOffset(1, func(g Gomega) {
		pods := serverPods(s)
		g.Expect(pods).To(HaveLen(1))
		g.Expect(pods[0].UID).NotTo(Equal(old.UID))
		pod = pods[0]
	}).WithTimeout(20 * time.Second).Should(Succeed())
	return &pod
}

// scheduled binds the pod to a node, as the scheduler does: a bound pod's
// deletion keeps its grace period (an unscheduled one is deleted at once).
func scheduled(pod *corev1.Pod) {
	EventuallyWithOffset(1, func() error {
		var cur corev1.Pod
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), &cur); err != nil {
			return err
		}
		return k8sClient.SubResource("binding").Create(ctx, &cur, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: cur.Name, Namespace: cur.Namespace},
			Target:     corev1.ObjectReference{Kind: "Node", Name: "node-1"},
		})
	}).Should(Succeed())
}

// scheduledServing creates a server whose pod is bound to a node, so that
// its deletion keeps a grace period, and runs it until it serves.
func scheduledServing(env *specEnv, name string) (*mcpv1alpha1.MCPServer, *corev1.Pod) {
	GinkgoHelper()
	s := httpServer(env.ns, name, testpeers.NodeEverything(GinkgoT()).Port)
	Expect(k8sClient.Create(ctx, s)).To(Succeed())
	pod := onePod(s)
	scheduled(pod)
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
	kubeletRuns(pod, env.clk.Now())
	Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))
	return s, pod
}

var _ = Describe("A deletion is not a crash", func() {
	env := withController()

	expectNoCrash := func(s *mcpv1alpha1.MCPServer) {
		GinkgoHelper()
		st := get(s).Status.Restarts
		Expect(st.Consecutive).To(BeZero())
		Expect(st.Total).To(BeZero())
		Expect(eventsOf(s)).NotTo(ContainElement(HavePrefix(eventCrashed)))
	}

	It("recreates a pod deleted by kubectl delete pod, whose server the kubelet stopped with 143", func() {
		port := testpeers.NodeEverything(GinkgoT()).Port
		s := httpServer(env.ns, "deleted", port)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		pod := readyServing(s, env.clk)

		holdPod(pod)
		Expect(k8sClient.Delete(ctx, pod)).To(Succeed())
		stoppedByKubelet(pod)
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonRestarting))
		Expect(condition(s, mcpv1alpha1.ConditionReady)().Message).To(ContainSubstring("deleted by someone else"))
		Eventually(func() []string { return eventsOf(s) }).Should(eventWith(eventPodDeleted, "was deleted"))
		release(pod)

		next := newPodAfter(s, pod)
		kubeletRuns(next, env.clk.Now())
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))
		expectNoCrash(s)
	})

	It("counts no crash when the kubelet's last deletion of the pod comes a second after the server's exit", func() {
		s, pod := scheduledServing(env, "finished")

		// kubectl delete pod: the grace period of the pod's spec.
		holdPod(pod)
		Expect(k8sClient.Delete(ctx, pod)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		Expect(*pod.DeletionGracePeriodSeconds).To(BeEquivalentTo(10))
		// The server exits on the kubelet's SIGTERM; the kubelet deletes the
		// pod again, with no grace period, in a later second, as it does
		// when it is busy: the API server dates the deletion then.
		exited := time.Now()
		serverExited(pod, 2, exited)
		time.Sleep(time.Until(exited.Truncate(time.Second).Add(time.Second + 100*time.Millisecond)))
		uid := pod.UID
		Expect(k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &uid})).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		Expect(*pod.DeletionGracePeriodSeconds).To(BeZero())
		Expect(pod.DeletionTimestamp.Time).To(BeTemporally(">", exited), "the deletion is dated after the exit")

		// The finalizer holds the pod in that state while the controller
		// reads it, as a reconcile may before the pod is gone.
		poke(s)
		Consistently(func() int32 { return get(s).Status.Restarts.Total }, 2*time.Second).Should(BeZero())
		Expect(eventsOf(s)).NotTo(ContainElement(HavePrefix(eventCrashed)))
		release(pod)
		next := newPodAfter(s, pod)
		kubeletRuns(next, env.clk.Now())
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))
		expectNoCrash(s)
	})

	It("counts no crash when a deletion is asked again after the first one's grace period ran out", func() {
		s, pod := scheduledServing(env, "stuck")

		// A graceful deletion; the server exits on the kubelet's SIGTERM
		// (written as the kubelet would: envtest runs none), but the pod
		// stays Terminating past its grace period (the finalizer).
		holdPod(pod)
		Expect(k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(3))).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		asked := pod.DeletionTimestamp.Add(-3 * time.Second)
		exited := time.Now()
		serverExited(pod, 2, exited)
		Eventually(func() []string { return eventsOf(s) }).Should(eventWith(eventPodDeleted, "deleted"))
		time.Sleep(time.Until(pod.DeletionTimestamp.Add(1500 * time.Millisecond)))

		// kubectl delete again: past the deadline, the API server makes it
		// a grace period of 1 dated now, after the exit.
		Expect(k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(2))).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		Expect(*pod.DeletionGracePeriodSeconds).To(BeEquivalentTo(1))
		Expect(pod.DeletionTimestamp.Add(-time.Second)).To(BeTemporally(">", exited), "the deletion's fields now date it after the exit")
		Expect(exited).To(BeTemporally(">", asked))

		poke(s)
		Consistently(func() int32 { return get(s).Status.Restarts.Total }, 2*time.Second).Should(BeZero())
		Expect(eventsOf(s)).NotTo(ContainElement(HavePrefix(eventCrashed)))
		// The kubelet's last deletion, with no grace period.
		uid := pod.UID
		Expect(k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &uid})).To(Succeed())
		release(pod)
		newPodAfter(s, pod)
		expectNoCrash(s)
	})

	It("recreates a pod deleted with no grace period, and says so", func() {
		s := httpServer(env.ns, "gone", testpeers.NodeEverything(GinkgoT()).Port)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		pod := readyServing(s, env.clk)
		Expect(k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed())
		newPodAfter(s, pod)
		// Gone at once: the controller may see the pod with its deletion
		// under way ("deleted by someone else") or already gone ("was
		// deleted"); either is said as PodDeleted.
		Eventually(func() []string { return eventsOf(s) }).Should(eventWith(eventPodDeleted, "was deleted"))
		expectNoCrash(s)
	})

	It("recreates an evicted pod (the Eviction API, as a node drain uses it)", func() {
		s := httpServer(env.ns, "drained", testpeers.NodeEverything(GinkgoT()).Port)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		pod := readyServing(s, env.clk)
		holdPod(pod)
		Expect(k8sClient.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{})).To(Succeed())
		stoppedByKubelet(pod)
		Eventually(func() []string { return eventsOf(s) }).Should(eventWith(eventPodDeleted, "evicted (EvictionByEvictionAPI"))
		release(pod)
		newPodAfter(s, pod)
		expectNoCrash(s)
	})

	It("replaces a pod the kubelet evicted under node pressure (Failed, Evicted, not deleted)", func() {
		s := httpServer(env.ns, "pressed", testpeers.NodeEverything(GinkgoT()).Port)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		pod := readyServing(s, env.clk)
		pod.Status.Phase, pod.Status.Reason, pod.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
		pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}}
		Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
		newPodAfter(s, pod)
		Eventually(func() []string { return eventsOf(s) }).Should(eventWith(eventPodDeleted, "evicted by the kubelet (The node was low on resource: memory.)"))
		expectNoCrash(s)
	})
})
