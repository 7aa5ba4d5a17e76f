//go:build e2e

package e2e

import (
	"os/exec"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
		// The bridge side's specs go here.
	})
})

var _ = Describe("a deletion is not a crash", Label("sleep"), func() {
	It("recreates a pod removed with kubectl delete pod, without counting a crash", func() {
		ns := namespace()
		s := httpEverything(ns, "deleted")
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
		Expect(st.Total).To(BeZero())
		Expect(st.Consecutive).To(BeZero())
		Expect(events(s)).NotTo(ContainElement(HavePrefix("Crashed: ")))
		Expect(next.Status.Phase).To(Equal(corev1.PodRunning))
	})
})
