package controller

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mtlstest"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

var nsSeq atomic.Int64

func createNamespace() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("mcps-%d", nsSeq.Add(1))}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// reconcilerFor is an MCPServer reconciler with a fake clock and the real
// MCP prober.
func reconcilerFor(clk *clocktesting.FakeClock, bridgeNamespaces ...string) func(ctrl.Manager) error {
	return func(mgr ctrl.Manager) error {
		return testReconciler(mgr, clk, bridgeNamespaces...).SetupWithManager(mgr, Options{MaxConcurrentReconciles: 2})
	}
}

func testReconciler(mgr ctrl.Manager, clk *clocktesting.FakeClock, bridgeNamespaces ...string) *MCPServerReconciler {
	return &MCPServerReconciler{
		Client:           mgr.GetClient(),
		Recorder:         mgr.GetEventRecorder("mcp-operator"),
		Prober:           NewMCPProber(),
		Clock:            clk,
		Workload:         WorkloadOptions{OperatorImage: "localhost/mcp-operator/manager:dev", OperatorNamespace: "mcp-system"},
		BridgeNamespaces: bridgeNamespaces,
	}
}

func httpServer(ns, name string, port int) *mcpv1alpha1.MCPServer {
	return &mcpv1alpha1.MCPServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: mcpv1alpha1.MCPServerSpec{
			Transport: mcpv1alpha1.TransportStreamableHTTP,
			Workload:  &mcpv1alpha1.Workload{Image: "example.com/everything:1", Port: int32(port)},
		},
	}
}

func get(s *mcpv1alpha1.MCPServer) *mcpv1alpha1.MCPServer {
	var out mcpv1alpha1.MCPServer
	ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKeyFromObject(s), &out)).To(Succeed())
	return &out
}

func condition(s *mcpv1alpha1.MCPServer, typ string) func() *metav1.Condition {
	return func() *metav1.Condition {
		return meta.FindStatusCondition(get(s).Status.Conditions, typ)
	}
}

func haveReason(status metav1.ConditionStatus, reason string) OmegaMatcher {
	return And(Not(BeNil()), HaveField("Status", status), HaveField("Reason", reason))
}

// serverPods are the server's pods that are not being deleted.
func serverPods(s *mcpv1alpha1.MCPServer) []corev1.Pod {
	var pods corev1.PodList
	ExpectWithOffset(1, k8sClient.List(ctx, &pods, client.InNamespace(s.Namespace), client.MatchingLabels{mcpv1alpha1.ServerLabel: s.Name})).To(Succeed())
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp.IsZero() {
			live = append(live, p)
		}
	}
	return live
}

// onePod waits for the server's single live pod.
func onePod(s *mcpv1alpha1.MCPServer) *corev1.Pod {
	var pod corev1.Pod
	EventuallyWithOffset(1, func(g Gomega) {
		pods := serverPods(s)
		g.Expect(pods).To(HaveLen(1))
		pod = pods[0]
	}).WithTimeout(20 * time.Second).Should(Succeed())
	return &pod
}

// kubeletRuns writes the status a kubelet writes for a running, ready pod.
// The pod IP is loopback: the server the test started is the pod's process.
func kubeletRuns(pod *corev1.Pod, startedAt time.Time) {
	ExpectWithOffset(1, k8sClient.Status().Update(ctx, runningPod(pod, startedAt, true))).To(Succeed())
}

// kubeletStarts writes the status a kubelet writes once the server's
// container runs, before its readiness probe passed.
func kubeletStarts(pod *corev1.Pod, startedAt time.Time) {
	ExpectWithOffset(1, k8sClient.Status().Update(ctx, runningPod(pod, startedAt, false))).To(Succeed())
}

func runningPod(pod *corev1.Pod, startedAt time.Time, ready bool) *corev1.Pod {
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: "127.0.0.1",
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: serverContainer, Ready: ready, Image: pod.Spec.Containers[0].Image, ImageID: "sha256:0",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(startedAt)}},
		}},
	}
	// Ready is False from the pod's first status, written before its
	// containers start.
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: metav1.NewTime(startedAt.Add(-time.Second))}}
	if ready {
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(startedAt)}}
	}
	return pod
}

// kubeletSeesExit writes the status of a pod whose server exited.
func kubeletSeesExit(pod *corev1.Pod, exitCode int32, reason string) {
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodFailed,
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: serverContainer, Image: pod.Spec.Containers[0].Image, ImageID: "sha256:0",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Reason: reason}},
		}},
	}
	ExpectWithOffset(1, k8sClient.Status().Update(ctx, pod)).To(Succeed())
}

// update changes the server as a user would, retrying when the controller's
// status writes got in between.
func update(s *mcpv1alpha1.MCPServer, change func(*mcpv1alpha1.MCPServer)) {
	EventuallyWithOffset(1, func() error {
		cur := get(s)
		change(cur)
		return k8sClient.Update(ctx, cur)
	}).Should(Succeed())
}

// poke makes the controller reconcile now, as any update of the object does;
// the tests move a fake clock, which no requeue timer follows.
func poke(s *mcpv1alpha1.MCPServer) {
	update(s, func(cur *mcpv1alpha1.MCPServer) {
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations["test.mcp-operator.dev/poke"] = strconv.FormatInt(time.Now().UnixNano(), 10)
	})
}

// eventsOf lists the reasons and notes of the server's Kubernetes Events.
func eventsOf(s *mcpv1alpha1.MCPServer) []string {
	var list eventsv1.EventList
	ExpectWithOffset(1, k8sClient.List(ctx, &list, client.InNamespace(s.Namespace))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == s.Name && e.Regarding.Kind == "MCPServer" {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}

func eventWith(reason, text string) OmegaMatcher {
	return ContainElement(And(HavePrefix(reason+": "), ContainSubstring(text)))
}

var _ = Describe("MCPServer controller", func() {
	var (
		ns  string
		clk *clocktesting.FakeClock
	)
	BeforeEach(func() {
		ns = createNamespace()
		clk = clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	})

	Context("with a workload server", func() {
		BeforeEach(func() { startManager([]string{ns}, reconcilerFor(clk)) })

		It("runs a hardened pod with a Service and NetworkPolicy, probes it and publishes the catalog", func() {
			port := testpeers.NodeEverything(GinkgoT()).Port
			s := httpServer(ns, "everything", port)
			Expect(k8sClient.Create(ctx, s)).To(Succeed())

			pod := onePod(s)
			Expect(metav1.IsControlledBy(pod, get(s))).To(BeTrue())
			Expect(pod.Spec.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
			Expect(pod.Spec.Containers[0].Resources.Limits.Memory().String()).To(Equal("256Mi"))
			var svc corev1.Service
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.Name}, &svc)).To(Succeed())
			Expect(metav1.IsControlledBy(&svc, get(s))).To(BeTrue())
			var np networkingv1.NetworkPolicy
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.Name}, &np)).To(Succeed())
			Expect(np.Spec.PodSelector.MatchLabels).To(HaveKeyWithValue(mcpv1alpha1.ServerLabel, s.Name))
			Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonStarting))

			kubeletRuns(pod, clk.Now())
			Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))

			st := get(s).Status
			Expect(st.ObservedGeneration).To(Equal(get(s).Generation))
			Expect(st.Endpoint).To(Equal(&mcpv1alpha1.Endpoint{URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), PodName: pod.Name, PodUID: string(pod.UID)}))
			Expect(st.ServerInfo.ProtocolVersion).NotTo(BeEmpty())
			Expect(st.Capabilities.Tools).To(BeTrue())
			Expect(st.CatalogDigest).To(MatchRegexp(`^sha256:[a-f0-9]{64}$`))
			Expect(st.ToolCount).To(BeNumerically("==", len(st.Tools)))
			Expect(st.Tools).To(ContainElement(And(HaveField("Name", "mcp.everything.echo"), HaveField("UpstreamName", "echo"))))
			names := make([]string, len(st.Tools))
			for i, t := range st.Tools {
				names[i] = t.Name
			}
			Expect(names).To(BeSortedAs())
			Expect(st.Prompts).To(ContainElement(And(
				HaveField("Name", "mcp.everything.args-prompt"),
				HaveField("Arguments", ContainElement(mcpv1alpha1.PromptArgument{Name: "city", Required: true})))))
			Expect(st.ResourceCount).To(BeNumerically(">", 0))
			for _, c := range st.Conditions {
				Expect(c.ObservedGeneration).To(Equal(get(s).Generation), c.Type)
			}
		})

		It("probes a server whose container runs before the kubelet reports the pod Ready", func() {
			port := testpeers.NodeEverything(GinkgoT()).Port
			s := httpServer(ns, "early", port)
			Expect(k8sClient.Create(ctx, s)).To(Succeed())

			pod := onePod(s)
			kubeletStarts(pod, clk.Now())
			Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))
			Expect(get(s).Status.Endpoint).To(Equal(&mcpv1alpha1.Endpoint{URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), PodName: pod.Name, PodUID: string(pod.UID)}))
		})

		It("stays Ready after an early probe when something reconciles before the kubelet's Ready", func() {
			port := testpeers.NodeEverything(GinkgoT()).Port
			s := httpServer(ns, "early-then-reconciled", port)
			Expect(k8sClient.Create(ctx, s)).To(Succeed())
			pod := onePod(s)
			kubeletStarts(pod, clk.Now())
			Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))

			// Any change brings a reconcile: the pod is still not Ready by the
			// kubelet, which is no loss of readiness.
			update(s, func(cur *mcpv1alpha1.MCPServer) { cur.Annotations = map[string]string{"example.com/touched": "1"} })
			Consistently(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(3 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))
			Expect(get(s).Status.Endpoint).NotTo(BeNil())

			// Ready by the kubelet, then not: readiness lost, the server is
			// away until the kubelet finds it Ready again.
			kubeletRuns(onePod(s), clk.Now())
			lost := onePod(s)
			lost.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: metav1.NewTime(clk.Now().Add(10 * time.Second))}}
			Expect(k8sClient.Status().Update(ctx, lost)).To(Succeed())
			Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(10 * time.Second).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonStarting))
		})

		It("counts no probe failure while a server that runs but is not Ready does not listen yet, and serves it before the kubelet's Ready", func() {
			bin, err := testpeers.EverythingServer()
			Expect(err).NotTo(HaveOccurred())
			port := testkit.FreePort(GinkgoT())
			s := httpServer(ns, "slow-start", port)
			Expect(k8sClient.Create(ctx, s)).To(Succeed())

			pod := onePod(s)
			kubeletStarts(pod, clk.Now())
			// Probed again every earlyProbeRetry: each fails, none counts
			// (from the first status written on).
			Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(10 * time.Second).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonStarting))
			Consistently(func(g Gomega) {
				g.Expect(condition(s, mcpv1alpha1.ConditionReady)()).To(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonStarting))
				g.Expect(get(s).Status.Restarts.ProbeFailures).To(BeZero())
			}).WithTimeout(time.Second).Should(Succeed())

			// The server listens a second after its start: a retry finds it,
			// and the kubelet has still not said Ready.
			server := testpeers.Start(GinkgoT(), port, nil, bin, "-http=127.0.0.1:"+strconv.Itoa(port))
			Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(2 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))
			Expect(get(s).Status.Restarts.ProbeFailures).To(BeZero())

			// Once the kubelet says Ready, a failed probe is a failure again.
			server.Kill()
			kubeletRuns(onePod(s), clk.Now())
			Eventually(func() int32 { return get(s).Status.Restarts.ProbeFailures }).WithTimeout(30 * time.Second).Should(BeNumerically(">=", 1))
		})

		It("stops probing a pod that is not Ready once it has run for the early window", func() {
			port, accepts := closingListener()
			s := httpServer(ns, "early-window", port)
			Expect(k8sClient.Create(ctx, s)).To(Succeed())
			kubeletStarts(onePod(s), clk.Now())
			Eventually(accepts.Load).Should(BeNumerically(">=", 2))

			clk.Step(6 * time.Second)
			// At most the retry in flight, then none (well before the retries'
			// own count would end them).
			Eventually(probesIn(accepts, time.Second)).WithTimeout(3 * time.Second).Should(BeZero())
			Expect(condition(s, mcpv1alpha1.ConditionReady)()).To(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonStarting))
		})

		It("restarts a crashing server with backoff, gives up after maxRestarts, and comes back on the restart annotation", func() {
			s := httpServer(ns, "crashy", testkit.FreePort(GinkgoT()))
			Expect(k8sClient.Create(ctx, s)).To(Succeed())

			backoffs := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}
			for i, backoff := range backoffs {
				pod := onePod(s)
				kubeletSeesExit(pod, 1, "Error")
				Eventually(func() int32 { return get(s).Status.Restarts.Consecutive }).Should(BeEquivalentTo(i + 1))
				st := get(s).Status.Restarts
				Expect(st.NextRestartTime.Time).To(BeTemporally("==", clk.Now().Add(backoff)))
				Expect(st.LastExitReason).To(Equal("Error (exit code 1)"))
				Expect(condition(s, mcpv1alpha1.ConditionReady)()).To(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonRestarting))
				// No new pod before the backoff has passed.
				Eventually(func() []corev1.Pod { return serverPods(s) }).Should(BeEmpty())
				poke(s)
				Consistently(func() []corev1.Pod { return serverPods(s) }).WithTimeout(time.Second).Should(BeEmpty())
				clk.Step(backoff)
				poke(s)
			}

			kubeletSeesExit(onePod(s), 137, "OOMKilled")
			Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonPermanentlyFailed))
			Expect(get(s).Status.Restarts).To(And(HaveField("Consecutive", BeEquivalentTo(4)), HaveField("Total", BeEquivalentTo(4)),
				HaveField("LastExitReason", "OOMKilled"), HaveField("NextRestartTime", BeNil())))
			// The controller's metrics count the crashes, and the server down.
			Eventually(func() *float64 { return serverMetric("mcp_operator_server_crashes_total", ns, "crashy") }).WithTimeout(10 * time.Second).Should(HaveValue(BeEquivalentTo(4)))
			Expect(serverMetric("mcp_operator_server_ready", ns, "crashy")).To(HaveValue(BeZero()))
			Eventually(func() []corev1.Pod { return serverPods(s) }).Should(BeEmpty())
			clk.Step(time.Hour)
			poke(s)
			Consistently(func() []corev1.Pod { return serverPods(s) }).WithTimeout(2 * time.Second).Should(BeEmpty())
			Expect(eventsOf(s)).To(HaveEach(Not(HaveSuffix("(crash 5 in a row)"))))

			Eventually(func() []string { return eventsOf(s) }).Should(And(
				eventWith("Crashed", "mcp.server.crashed: Error (exit code 1)"),
				eventWith("Restarting", "mcp.server.restarting: restart 3 of 3"),
				eventWith("PermanentlyFailed", "mcp.server.permanently_failed"),
			))

			update(s, func(cur *mcpv1alpha1.MCPServer) {
				cur.Annotations = map[string]string{mcpv1alpha1.RestartAnnotation: "try-again"}
			})
			onePod(s)
			Eventually(func() int64 { return get(s).Status.Restarts.FailedGeneration }).Should(BeZero())
			Expect(get(s).Status.Restarts.Consecutive).To(BeZero())
		})

		It("keeps the published catalog through a crash's backoff and withdraws it when the server gives up", func() {
			s := httpServer(ns, "comeback", testpeers.NodeEverything(GinkgoT()).Port)
			s.Spec.RestartPolicy.MaxRestarts = ptr.To[int32](1)
			Expect(k8sClient.Create(ctx, s)).To(Succeed())
			kubeletRuns(onePod(s), clk.Now())
			Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))
			published := get(s).Status
			Expect(published.Tools).NotTo(BeEmpty())

			kubeletSeesExit(onePod(s), 1, "Error")
			Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonRestarting))
			// The bridge stops forwarding (no endpoint) but still knows the
			// tools, so a call is told the server is restarting.
			away := get(s).Status
			Expect(away.Endpoint).To(BeNil())
			Expect(away.CatalogDigest).To(Equal(published.CatalogDigest))
			Expect(away.Tools).To(Equal(published.Tools))
			Expect(meta.IsStatusConditionTrue(away.Conditions, mcpv1alpha1.ConditionCatalogReady)).To(BeTrue())

			Eventually(func() []corev1.Pod { return serverPods(s) }).Should(BeEmpty())
			Expect(get(s).Status.Tools).To(Equal(published.Tools), "the catalog stays while the crashed pod goes")
			clk.Step(time.Second)
			poke(s)
			kubeletSeesExit(onePod(s), 1, "Error")
			Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonPermanentlyFailed))
			gone := get(s).Status
			Expect(gone.Tools).To(BeEmpty())
			Expect(gone.CatalogDigest).To(BeEmpty())
			Expect(condition(s, mcpv1alpha1.ConditionCatalogReady)()).To(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonPermanentlyFailed))
		})

		It("counts a server that stops answering the probe as crashed", func() {
			s := httpServer(ns, "silent", testkit.FreePort(GinkgoT())) // nothing listens there
			Expect(k8sClient.Create(ctx, s)).To(Succeed())
			kubeletRuns(onePod(s), clk.Now())
			Eventually(func() string { return get(s).Status.Restarts.LastExitReason }).WithTimeout(30 * time.Second).
				Should(HavePrefix("ProbeFailed (3 probes in a row"))
			Expect(get(s).Status.Restarts.Consecutive).To(BeEquivalentTo(1))
		})

		It("suspends at once: pod deleted, catalog withdrawn, no restart", func() {
			port := testpeers.NodeEverything(GinkgoT()).Port
			s := httpServer(ns, "pausable", port)
			Expect(k8sClient.Create(ctx, s)).To(Succeed())
			kubeletRuns(onePod(s), clk.Now())
			Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))

			update(s, func(cur *mcpv1alpha1.MCPServer) {
				cur.Spec.Suspend = true
			})
			Eventually(func() []corev1.Pod { return serverPods(s) }).Should(BeEmpty())
			Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonSuspended))
			Expect(get(s).Status.Tools).To(BeEmpty())
			Expect(get(s).Status.Restarts.Total).To(BeZero(), "a suspend is not a crash")
			Eventually(func() []string { return eventsOf(s) }).Should(eventWith("Shutdown", "mcp.server.shutdown"))
			Consistently(func() []corev1.Pod { return serverPods(s) }).WithTimeout(time.Second).Should(BeEmpty())
		})

		It("replaces the pod on a spec change without counting a crash", func() {
			s := httpServer(ns, "changing", testkit.FreePort(GinkgoT()))
			Expect(k8sClient.Create(ctx, s)).To(Succeed())
			first := onePod(s)
			update(s, func(cur *mcpv1alpha1.MCPServer) {
				cur.Spec.Workload.Args = []string{"--verbose"}
			})
			Eventually(func(g Gomega) {
				pods := serverPods(s)
				g.Expect(pods).To(HaveLen(1))
				g.Expect(pods[0].Name).NotTo(Equal(first.Name))
				g.Expect(pods[0].Spec.Containers[0].Args).To(Equal([]string{"--verbose"}))
			}).WithTimeout(20 * time.Second).Should(Succeed())
			Expect(get(s).Status.Restarts.Total).To(BeZero())
		})
	})

	It("keeps a backoff across a controller restart", func() {
		stop := startStoppableManager([]string{ns}, reconcilerFor(clk))
		s := httpServer(ns, "survivor", testkit.FreePort(GinkgoT()))
		s.Spec.RestartPolicy.BackoffBase = metav1.Duration{Duration: time.Minute}
		s.Spec.RestartPolicy.BackoffCap = metav1.Duration{Duration: 10 * time.Minute}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		kubeletSeesExit(onePod(s), 2, "Error")
		Eventually(func() int32 { return get(s).Status.Restarts.Consecutive }).Should(BeEquivalentTo(1))
		Eventually(func() []corev1.Pod { return serverPods(s) }).Should(BeEmpty())
		stop()

		startManager([]string{ns}, reconcilerFor(clk))
		poke(s)
		Consistently(func() []corev1.Pod { return serverPods(s) }).WithTimeout(2 * time.Second).Should(BeEmpty())
		clk.Step(time.Minute)
		poke(s)
		onePod(s)
		Expect(get(s).Status.Restarts).To(And(HaveField("Consecutive", BeEquivalentTo(1)), HaveField("Total", BeEquivalentTo(1))))
	})

	Context("with a remote server", func() {
		BeforeEach(func() { startManager([]string{ns}, reconcilerFor(clk)) })

		remote := func(name string, port int) *mcpv1alpha1.MCPServer {
			return &mcpv1alpha1.MCPServer{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: mcpv1alpha1.MCPServerSpec{
					Transport: mcpv1alpha1.TransportStreamableHTTP,
					Remote: &mcpv1alpha1.Remote{
						URL:  fmt.Sprintf("http://127.0.0.1:%d/mcp", port),
						Auth: &mcpv1alpha1.RemoteAuth{BearerTokenSecretRef: &mcpv1alpha1.SecretKeySelector{Name: "token", Key: "token"}},
					},
				},
			}
		}

		It("waits for its credentials, then publishes the catalog without a pod", func() {
			port := testpeers.NodeEverything(GinkgoT()).Port
			s := remote("far", port)
			Expect(k8sClient.Create(ctx, s)).To(Succeed())
			Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonCredentialsMissing))
			Expect(condition(s, mcpv1alpha1.ConditionReady)().Message).To(ContainSubstring("Secret token"))
			Eventually(func() []string { return eventsOf(s) }).Should(eventWith("CredentialsMissing", "Secret token"))

			Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token"}, StringData: map[string]string{"token": "s3cret"}})).To(Succeed())
			poke(s)
			Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))
			Expect(get(s).Status.Endpoint.URL).To(Equal(s.Spec.Remote.URL))
			Expect(get(s).Status.Tools).To(ContainElement(HaveField("Name", "mcp.far.echo")))
			Expect(serverPods(s)).To(BeEmpty())
		})

		It("announces catalog changes, and with Locked pinning serves only the approved catalog", func() {
			port := testpeers.NodeEverything(GinkgoT()).Port
			Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token"}, StringData: map[string]string{"token": "t"}})).To(Succeed())
			s := remote("pinned", port)
			Expect(k8sClient.Create(ctx, s)).To(Succeed())
			Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))
			full := get(s).Status

			// Auto: a change is published and named in an event.
			update(s, func(cur *mcpv1alpha1.MCPServer) {
				cur.Spec.Tools.Exclude = []string{"echo"}
			})
			Eventually(func() string { return get(s).Status.CatalogDigest }).ShouldNot(Equal(full.CatalogDigest))
			Expect(get(s).Status.ToolCount).To(Equal(full.ToolCount - 1))
			Eventually(func() []string { return eventsOf(s) }).Should(eventWith("CatalogChanged", "removed: echo"))
			trimmed := get(s).Status.CatalogDigest

			// Locked to the trimmed catalog: the full one is refused, the
			// approved one stays served.
			update(s, func(cur *mcpv1alpha1.MCPServer) {
				cur.Spec.Tools.CatalogPinning = mcpv1alpha1.CatalogPinningLocked
				cur.Spec.Tools.ApprovedDigest = trimmed
				cur.Spec.Tools.Exclude = nil
			})
			Eventually(condition(s, mcpv1alpha1.ConditionDegraded)).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonCatalogNotApproved))
			Expect(get(s).Status.CatalogDigest).To(Equal(trimmed))
			Expect(condition(s, mcpv1alpha1.ConditionReady)()).To(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))
			Eventually(func() []string { return eventsOf(s) }).Should(eventWith("CatalogRefused", "approvedDigest"))

			// Approving the full catalog publishes it.
			update(s, func(cur *mcpv1alpha1.MCPServer) {
				cur.Spec.Tools.ApprovedDigest = full.CatalogDigest
			})
			Eventually(func() string { return get(s).Status.CatalogDigest }).Should(Equal(full.CatalogDigest))
			Eventually(condition(s, mcpv1alpha1.ConditionDegraded)).Should(BeNil())
		})
		It("probes over mutual TLS with the Secret's CA and client certificate, and says what is wrong with the Secret", func() {
			// The go-sdk everything-server behind the test's TLS-terminating
			// proxy, which requires a client certificate its CA signed: the
			// probe's TLS handshake is what is tested.
			watchesBefore := secretListsAndWatches()
			ca := mtlstest.NewCA(GinkgoT(), "mcp test CA")
			up := testpeers.GoEverything(GinkgoT(), false)
			front := mtlstest.NewFront(GinkgoT(), ca, fmt.Sprintf("http://127.0.0.1:%d", up.Port))
			cert := ca.Client(GinkgoT(), "probe-client")

			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "upstream-tls"}, Data: map[string][]byte{"ca.pem": ca.PEM}}
			Expect(k8sClient.Create(ctx, secret)).To(Succeed())
			s := &mcpv1alpha1.MCPServer{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secure"},
				Spec: mcpv1alpha1.MCPServerSpec{
					Transport: mcpv1alpha1.TransportStreamableHTTP,
					Remote: &mcpv1alpha1.Remote{
						URL:  front.URL + "/mcp",
						Auth: &mcpv1alpha1.RemoteAuth{TLSSecretRef: &mcpv1alpha1.LocalSecretReference{Name: secret.Name}},
					},
				},
			}
			Expect(k8sClient.Create(ctx, s)).To(Succeed())
			// The controller reads Secrets through its cache and reconciles
			// on changes of the server only: poke until it has seen the
			// Secret's new contents.
			setSecret := func(data map[string][]byte) {
				secret.Data = data
				Expect(k8sClient.Update(ctx, secret)).To(Succeed())
			}
			readyIs := func(status metav1.ConditionStatus, reason, message string) {
				EventuallyWithOffset(1, func(g Gomega) {
					poke(s)
					c := condition(s, mcpv1alpha1.ConditionReady)()
					g.Expect(c).To(haveReason(status, reason))
					g.Expect(c.Message).To(ContainSubstring(message))
				}).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
			}

			// None of the keys (ca.pem is not ca.crt): said so, not tried.
			readyIs(metav1.ConditionFalse, mcpv1alpha1.ReasonCredentialsMissing, "Secret upstream-tls has none of the keys ca.crt, tls.crt, tls.key")
			// A certificate without its key.
			setSecret(map[string][]byte{"ca.crt": ca.PEM, "tls.crt": cert.Cert})
			readyIs(metav1.ConditionFalse, mcpv1alpha1.ReasonCredentialsMissing, "tls.crt and tls.key go together")
			// The CA alone: the server wants a client certificate.
			setSecret(map[string][]byte{"ca.crt": ca.PEM})
			readyIs(metav1.ConditionFalse, mcpv1alpha1.ReasonProbeFailed, "tls: certificate required")
			Expect(front.Subjects()).To(BeEmpty())

			setSecret(map[string][]byte{"ca.crt": ca.PEM, "tls.crt": cert.Cert, "tls.key": cert.Key})
			readyIs(metav1.ConditionTrue, mcpv1alpha1.ReasonServing, "")
			Expect(get(s).Status.Tools).To(ContainElement(HaveField("Name", "mcp.secure.test_simple_text")))
			Expect(front.Subjects()).NotTo(BeEmpty())
			Expect(front.Subjects()).To(HaveEach("probe-client"))
			// Read at each probe, never listed or watched: the controller
			// keeps no cache of the Secrets it can see (the API server
			// watches Secrets itself, hence the count before).
			Expect(secretListsAndWatches()).To(Equal(watchesBefore))
		})
	})

	It("gives a name to the older of two same-named servers in the bridge's scope", func() {
		other := createNamespace()
		startManager([]string{ns, other}, reconcilerFor(clk, ns, other))
		port := testpeers.NodeEverything(GinkgoT()).Port
		first := httpServer(ns, "dup", port)
		Expect(k8sClient.Create(ctx, first)).To(Succeed())
		time.Sleep(1100 * time.Millisecond) // creation timestamps have second precision
		second := httpServer(other, "dup", port)
		Expect(k8sClient.Create(ctx, second)).To(Succeed())

		Eventually(condition(second, mcpv1alpha1.ConditionNameConflict)).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonNameInUse))
		Expect(condition(second, mcpv1alpha1.ConditionNameConflict)().Message).To(ContainSubstring(ns + "/dup"))
		Expect(serverPods(second)).To(BeEmpty())
		kubeletRuns(onePod(first), clk.Now())
		Eventually(condition(first, mcpv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))
		Expect(condition(first, mcpv1alpha1.ConditionNameConflict)()).To(BeNil())
	})
})

// BeSortedAs succeeds for a sorted []string.
func BeSortedAs() OmegaMatcher {
	return WithTransform(func(s []string) bool {
		for i := 1; i < len(s); i++ {
			if strings.Compare(s[i-1], s[i]) > 0 {
				return false
			}
		}
		return true
	}, BeTrue())
}

var _ = Describe("MCPServer controller with a stdio server", func() {
	It("runs the server's command under the stdio adapter and publishes its catalog; the server's exit is a crash", func() {
		ns := createNamespace()
		clk := clocktesting.NewFakeClock(time.Now())
		startManager([]string{ns}, reconcilerFor(clk))
		everything, err := testpeers.NPMBin("mcp-server-everything")
		Expect(err).NotTo(HaveOccurred())
		port := testkit.FreePort(GinkgoT())
		s := &mcpv1alpha1.MCPServer{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stdio"},
			Spec: mcpv1alpha1.MCPServerSpec{
				Transport: mcpv1alpha1.TransportStdio,
				Workload:  &mcpv1alpha1.Workload{Image: "node:22", Command: []string{everything}, Port: int32(port), Path: "/mcp"},
			},
		}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		pod := onePod(s)
		Expect(pod.Spec.InitContainers).To(HaveLen(1))
		Expect(pod.Spec.InitContainers[0].Command).To(Equal([]string{AdapterPath, "--hold"}))
		Expect(pod.Spec.InitContainers[0].Lifecycle.PostStart.Exec.Command).To(Equal([]string{AdapterPath, "--install", adapterPath}))

		// Play the container runtime: run the pod's command with the adapter
		// built from this tree standing in for the installed one.
		command := pod.Spec.Containers[0].Command
		Expect(command[0]).To(Equal(adapterPath))
		args := append([]string{}, command[1:]...)
		for i := range args {
			if args[i] == fmt.Sprintf(":%d", port) {
				args[i] = fmt.Sprintf("127.0.0.1:%d", port)
			}
		}
		adapter := exec.Command(adapterBinary(), args...)
		adapter.Stdout, adapter.Stderr = GinkgoWriter, GinkgoWriter
		adapter.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		Expect(adapter.Start()).To(Succeed())
		exited := make(chan int, 1)
		go func() { _ = adapter.Wait(); exited <- adapter.ProcessState.ExitCode() }()
		DeferCleanup(func() { _ = syscall.Kill(-adapter.Process.Pid, syscall.SIGKILL) })

		kubeletRuns(pod, clk.Now())
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(60 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))
		Expect(get(s).Status.Tools).To(ContainElement(HaveField("Name", "mcp.stdio.echo")))

		// The server dies; the adapter exits with its code, as the pod's
		// container would, and the controller counts a crash.
		server := childOf(adapter.Process.Pid)
		Expect(syscall.Kill(server, syscall.SIGKILL)).To(Succeed())
		var code int
		Eventually(exited).WithTimeout(10 * time.Second).Should(Receive(&code))
		Expect(code).To(Equal(128 + int(syscall.SIGKILL)))
		kubeletSeesExit(pod, int32(code), "Error")
		Eventually(func() string { return get(s).Status.Restarts.LastExitReason }).Should(Equal("Error (exit code 137)"))
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).Should(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonRestarting))
	})
})

var (
	adapterOnce sync.Once
	adapterBin  string
)

// adapterBinary builds cmd/stdio-adapter, the binary stdio server pods run,
// from this tree once per test run.
func adapterBinary() string {
	adapterOnce.Do(func() {
		root, err := testenv.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		adapterBin = filepath.Join(GinkgoT().TempDir(), "stdio-adapter")
		build := exec.Command("go", "build", "-o", adapterBin, "./cmd/stdio-adapter")
		build.Dir = root
		out, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
	})
	return adapterBin
}

// childOf finds the one child process of pid (any of its threads may have
// started it).
func childOf(pid int) int {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	Expect(err).NotTo(HaveOccurred())
	var children []string
	for _, t := range tasks {
		data, _ := os.ReadFile(t)
		children = append(children, strings.Fields(string(data))...)
	}
	Expect(children).To(HaveLen(1), "children of the adapter")
	child, err := strconv.Atoi(children[0])
	Expect(err).NotTo(HaveOccurred())
	return child
}
