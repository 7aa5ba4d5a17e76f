package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

// How probe failures and early retries follow the pod they were of. envtest
// runs no kubelet: the tests write the pod's status as a kubelet would, and
// hold a probe in flight (holdingProber) where a race lasts milliseconds.
var _ = Describe("Probe failures and retries of a pod", func() {
	env := withHeldProbes()

	serving := func(s *mcpv1alpha1.MCPServer) {
		GinkgoHelper()
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))
	}
	probes := func() int32 { return env.prober.probes.Load() }

	It("forgets probe failures once the kubelet reports the server's container started again, not Ready yet", func() {
		s := httpServer(env.ns, "restarted", env.server.port)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		pod := readyServing(s, env.clk)

		// The server hangs: two failed probes of the Ready pod.
		env.server.stop()
		poke(s)
		Eventually(probeFailures(s)).WithTimeout(10 * time.Second).Should(BeEquivalentTo(2))

		// Within the 2 s before the next probe, the kubelet restarts the
		// server's container: Ready turned False before the new container
		// started, the state of a pod not Ready yet.
		env.clk.Step(10 * time.Second)
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		kubeletStarts(pod, env.clk.Now())
		Eventually(probeFailures(s)).Should(BeZero(), "the failures were of the container before")

		env.server.start()
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		kubeletRuns(pod, env.clk.Now())
		serving(s)
		Expect(get(s).Status.Restarts.Total).To(BeZero())
	})

	It("counts a crash at once when the re-read after a failed probe finds the server ended", func() {
		s := httpServer(env.ns, "ended", env.server.port)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		pod := readyServing(s, env.clk)

		// Every status write of the server from here on.
		watcher, err := client.NewWithWatch(cfg, client.Options{Scheme: testenv.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		w, err := watcher.Watch(ctx, &mcpv1alpha1.MCPServerList{}, client.InNamespace(env.ns))
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()

		// The server exits with 1 while a probe is in flight; the
		// reconcile read the pod running.
		env.prober.holdNext(func() { poke(s) })
		env.server.stop()
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		kubeletSeesExit(pod, 1, "Error")
		close(env.prober.released)

		// The reconcile whose probe failed counts the crash itself, rather
		// than a probe failure first.
		var writes []mcpv1alpha1.RestartStatus
		Eventually(func() int32 {
			for {
				select {
				case e := <-w.ResultChan():
					if got, ok := e.Object.(*mcpv1alpha1.MCPServer); ok && e.Type == watch.Modified {
						writes = append(writes, got.Status.Restarts)
						if got.Status.Restarts.Total > 0 {
							return got.Status.Restarts.Total
						}
					}
				default:
					return 0
				}
			}
		}).WithTimeout(10 * time.Second).Should(BeEquivalentTo(1))
		for _, r := range writes {
			Expect(r.ProbeFailures).To(BeZero(), "status writes: %+v", writes)
		}
		Eventually(func() []string { return eventsOf(s) }).Should(eventWith(eventCrashed, "Error (exit code 1)"))
	})

	It("gives a same-named replacement of a pod in its early retries retries of its own", func() {
		s := httpServer(env.ns, "replaced", env.server.port)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		pod := onePod(s)

		// The server does not listen yet: most of the pod's early retries
		// go by.
		env.server.stop()
		kubeletStarts(pod, env.clk.Now())
		Eventually(probes).WithTimeout(15 * time.Second).Should(BeNumerically(">=", earlyProbeRetries-5))

		// While one of its probes is in flight, the pod is replaced by one
		// of the same name, which the kubelet starts.
		env.prober.holdNext(func() {})
		replacement := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, Labels: pod.Labels, Annotations: pod.Annotations,
				OwnerReferences: pod.OwnerReferences},
			Spec: pod.Spec,
		}
		replacement.Spec.NodeName = ""
		Expect(k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed())
		Expect(k8sClient.Create(ctx, replacement)).To(Succeed())
		kubeletStarts(replacement, env.clk.Now())
		// The controller's cache catches up before the held reconcile ends.
		time.Sleep(500 * time.Millisecond)
		before := probes()
		close(env.prober.released)

		// It is probed early more times than the first pod had left.
		Eventually(probes).WithTimeout(15 * time.Second).Should(BeNumerically(">=", before+10))
		env.server.start()
		serving(s)
		Expect(get(s).Status.Endpoint.PodUID).To(BeEquivalentTo(replacement.UID))
	})
})
