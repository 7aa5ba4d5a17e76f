//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// countEvents counts the server's Events of a reason.
func countEvents(s *mcpv1alpha1.MCPServer, reason string) func() int {
	return func() int {
		n := 0
		for _, e := range events(s) {
			if strings.HasPrefix(e, reason+": ") {
				n++
			}
		}
		return n
	}
}

var _ = Describe("servers that sleep", Label("sleep"), func() {
	// What the controller does alone: sleep after idle, wake by hand.
	Context("the controller", func() {
		It("puts an idle server to sleep with its tools kept, and kubectl mcp wake brings it back Ready", func() {
			ns := namespace()
			s := httpEverything(ns, "dozy")
			s.Spec.Workload.Idle = &metav1.Duration{Duration: 8 * time.Second}
			Expect(k8sClient.Create(ctx, s)).To(Succeed())
			Eventually(ready(s)).WithTimeout(90 * time.Second).Should(Equal("True/Serving"))
			tools := get(s).Status.Tools
			Expect(tools).NotTo(BeEmpty())

			// Nobody calls it: after the idle time its pod goes, its tools stay.
			Eventually(ready(s)).WithTimeout(60 * time.Second).Should(Equal("False/Sleeping"))
			Eventually(podCount(s)).WithTimeout(60 * time.Second).Should(BeZero())
			st := get(s).Status
			Expect(st.SleepingSince).NotTo(BeNil())
			Expect(st.Tools).To(Equal(tools))
			Expect(st.Endpoint).To(BeNil())
			Expect(events(s)).To(ContainElement(HavePrefix("Slept: ")))

			out, err := kubectlMCP(kubeconfigPath, "wake", s.Name, "-n", ns)
			Expect(err).NotTo(HaveOccurred(), out)
			Expect(out).To(ContainSubstring("is waking"))
			// Woke is said when the new pod answered its probe; with no calls
			// the server falls asleep again after its idle time.
			Eventually(countEvents(s, "Woke")).WithTimeout(90 * time.Second).Should(Equal(1))
			Expect(get(s).Status.Tools).To(Equal(tools))
			Expect(get(s).Status.Restarts.Total).To(BeZero(), "a wake is not a restart")
			Eventually(countEvents(s, "Slept")).WithTimeout(60 * time.Second).Should(Equal(2))
		})

		It("puts a server to sleep by hand with kubectl mcp sleep", func() {
			ns := namespace()
			s := httpEverything(ns, "by-hand")
			s.Spec.Workload.Idle = &metav1.Duration{Duration: time.Hour}
			Expect(k8sClient.Create(ctx, s)).To(Succeed())
			Eventually(ready(s)).WithTimeout(90 * time.Second).Should(Equal("True/Serving"))
			out, err := kubectlMCP(kubeconfigPath, "sleep", s.Name, "-n", ns)
			Expect(err).NotTo(HaveOccurred(), out)
			Eventually(ready(s)).WithTimeout(30 * time.Second).Should(Equal("False/Sleeping"))
			Eventually(podCount(s)).WithTimeout(60 * time.Second).Should(BeZero())
			out, err = kubectlMCP(kubeconfigPath, "wake", s.Name, "-n", ns)
			Expect(err).NotTo(HaveOccurred(), out)
			Eventually(ready(s)).WithTimeout(90 * time.Second).Should(Equal("True/Serving"))
		})
	})

	// What the bridge adds: a call wakes a sleeping server and is answered,
	// 20 concurrent first calls make one pod and get 20 answers, a wake that
	// fails answers every waiting call with the reason, a session-era agent
	// reconnects after its server slept.
	Context("through the bridge", func() {
		// sleepyServer is an everything-server in the bridge's namespace
		// that sleeps after idle, asleep by the time it is returned, with an
		// agent whose policy allows all of its tools.
		sleepyServer := func(name string, idle time.Duration) *mcpv1alpha1.MCPServer {
			s := httpEverything(servedNamespace, name)
			s.Spec.Workload.Idle = &metav1.Duration{Duration: idle}
			Expect(k8sClient.Create(ctx, s)).To(Succeed())
			DeferCleanup(func() { _ = k8sClient.Delete(ctx, s) })
			createAgent(name+"-agent", []mcpv1alpha1.ToolRule{{Tools: []string{"mcp." + name + ".*"}, Decision: mcpv1alpha1.DecisionAllow}})
			Eventually(ready(s)).WithTimeout(90 * time.Second).Should(Equal("True/Serving"))
			return s
		}
		asleep := func(s *mcpv1alpha1.MCPServer) {
			Eventually(ready(s)).WithTimeout(60 * time.Second).Should(Equal("False/Sleeping"))
			Eventually(podCount(s)).WithTimeout(60 * time.Second).Should(BeZero())
		}

		It("keeps a sleeping server's tools listed, and 20 first calls at once make one pod and get 20 answers", func() {
			s := sleepyServer("e2e-sleepy", 8*time.Second)
			asleep(s)
			tool := "mcp.e2e-sleepy.test_simple_text"

			steps := finishAgent(startAgent("e2e-sleepy-agent", "--concurrent", "20", "--call", tool))
			Expect(stepOf(steps, "list", "").Tools).To(ContainElement(tool), "a sleeping server's tools stay listed")
			calls := 0
			for _, st := range steps {
				if st.Step != "call" {
					continue
				}
				calls++
				Expect(st.Error).To(BeEmpty(), "a call held through the wake")
				Expect(string(st.Result)).To(ContainSubstring(`"text":"[mcp:e2e-sleepy:test_simple_text] `))
			}
			Expect(calls).To(Equal(20))

			// One wake, one pod: the 20 calls shared it.
			Expect(countEvents(s, "Woke")()).To(Equal(1))
			var pods corev1.PodList
			Expect(k8sClient.List(ctx, &pods, client.InNamespace(s.Namespace), client.MatchingLabels{mcpv1alpha1.ServerLabel: s.Name})).To(Succeed())
			Expect(pods.Items).To(HaveLen(1))
			Expect(get(s).Status.Restarts.Total).To(BeZero())
		})

		It("answers every call waiting on a wake that fails with the server's reason", func() {
			s := sleepyServer("e2e-nowake", 8*time.Second)
			asleep(s)
			// While it sleeps its image goes: the wake's pod cannot start.
			update(s, func(cur *mcpv1alpha1.MCPServer) {
				cur.Spec.Workload.Image = "localhost/mcp-operator/does-not-exist:dev"
			})
			Consistently(ready(s)).WithTimeout(3*time.Second).Should(Equal("False/Sleeping"), "a spec change alone wakes nothing")

			steps := finishAgent(startAgent("e2e-nowake-agent", "--concurrent", "3", "--call", "mcp.e2e-nowake.test_simple_text"))
			calls := 0
			for _, st := range steps {
				if st.Step != "call" {
					continue
				}
				calls++
				Expect(st.Error).To(ContainSubstring("-32012"))
				Expect(st.Error).To(ContainSubstring("ImagePullFailed"))
			}
			Expect(calls).To(Equal(3))
			Eventually(func() []string { return events(s) }).Should(ContainElement(HavePrefix("WakeFailed: ")))
		})

		It("carries a 2025-11-25 agent's session on after its server slept: the next call wakes it", func() {
			s := sleepyServer("e2e-session-sleep", time.Hour)
			tool := "mcp.e2e-session-sleep.test_simple_text"
			pod := startAgent("e2e-session-sleep-agent", "--era", "session", "--call", tool,
				"--repeat", tool, "--every", "2s", "--for", "50s", "--call-timeout", "60s")
			// Until the agent's container has started its log cannot be
			// read: each poll's failure is retried.
			Eventually(func(g Gomega) []agentStep { return stepsNamed(agentStepsG(g, pod), "call") }).
				WithTimeout(60 * time.Second).Should(HaveLen(1))

			out, err := kubectlMCP(kubeconfigPath, "sleep", s.Name, "-n", s.Namespace)
			Expect(err).NotTo(HaveOccurred(), out)
			Eventually(countEvents(s, "Slept")).WithTimeout(60 * time.Second).Should(Equal(1))
			Eventually(countEvents(s, "Woke")).WithTimeout(90 * time.Second).Should(Equal(1))

			steps := finishAgent(pod)
			repeats := stepsNamed(steps, "repeat")
			Expect(len(repeats)).To(BeNumerically(">=", 5))
			session := repeats[0].Session
			Expect(session).NotTo(BeEmpty())
			for _, r := range repeats {
				Expect(r.Session).To(Equal(session), "the agent's session with the bridge is the same throughout")
				Expect(r.Error).NotTo(ContainSubstring("unknown tool"))
			}
			for _, r := range repeats[len(repeats)-3:] {
				Expect(r.Error).To(BeEmpty(), "calls after the wake are answered on the same agent session")
			}
		})
	})
})

// recordPodStates watches the server's pods until the spec ends and, if it
// failed, prints each state they went through: which pod the controller
// read as crashed is then in the spec's output.
func recordPodStates(ns, server string) {
	w, err := clientset.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: mcpv1alpha1.ServerLabel + "=" + server})
	Expect(err).NotTo(HaveOccurred())
	var mu sync.Mutex
	var lines []string
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			line := fmt.Sprintf("%s %s %s uid=%s rv=%s phase=%s ip=%s deletion=%v grace=%v", time.Now().Format("15:04:05.000"), ev.Type, pod.Name, pod.UID, pod.ResourceVersion,
				pod.Status.Phase, pod.Status.PodIP, pod.DeletionTimestamp, ptrValue(pod.DeletionGracePeriodSeconds))
			for _, c := range pod.Status.Conditions {
				line += fmt.Sprintf(" %s=%s@%s", c.Type, c.Status, c.LastTransitionTime.Format("15:04:05"))
			}
			for _, cs := range pod.Status.ContainerStatuses {
				line += fmt.Sprintf(" [%s ready=%v running=%v terminated=%+v]", cs.Name, cs.Ready, cs.State.Running != nil, cs.State.Terminated)
			}
			mu.Lock()
			lines = append(lines, line)
			mu.Unlock()
		}
	}()
	DeferCleanup(func() {
		w.Stop()
		if CurrentSpecReport().Failed() {
			mu.Lock()
			defer mu.Unlock()
			GinkgoWriter.Println("the server's pods, as watched:\n" + strings.Join(lines, "\n"))
		}
	})
}

func ptrValue[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

var _ = Describe("a deletion is not a crash", Label("sleep"), func() {
	It("recreates a pod removed with kubectl delete pod, without counting a crash", func() {
		ns := namespace()
		s := httpEverything(ns, "deleted")
		recordPodStates(ns, s.Name)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		Eventually(ready(s)).WithTimeout(90 * time.Second).Should(Equal("True/Serving"))
		pod := runningPod(s)

		// The kubelet stops the server with SIGTERM (exit 143 or 137 after
		// the grace period): the server did not end on its own.
		args := append(slices.Clone(kubectl[1:]), "-n", ns, "delete", "pod", pod.Name, "--wait=true")
		out, err := exec.CommandContext(ctx, kubectl[0], args...).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Eventually(func() []string { return events(s) }).WithTimeout(30 * time.Second).Should(ContainElement(HavePrefix("PodDeleted: ")))
		Eventually(ready(s)).WithTimeout(90 * time.Second).Should(Equal("True/Serving"))
		next := runningPod(s)
		Expect(next.UID).NotTo(Equal(pod.UID))
		st := get(s).Status.Restarts
		Expect(st.Total).To(BeZero(), "the server's events: %q", events(s))
		Expect(st.Consecutive).To(BeZero())
		Expect(events(s)).NotTo(ContainElement(HavePrefix("Crashed: ")))
		Expect(next.Status.Phase).To(Equal(corev1.PodRunning))
	})
})
