//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// The dev install's bridge Deployment (chart release mcp-operator).
const bridgeDeployment = "mcp-operator-bridge"

var _ = Describe("bridge replicas", Label("bridge"), Serial, func() {
	// docs/bridge.md, Sessions and replicas: a 2025-11-25 session id is
	// sealed with the key the replicas share, so any replica carries the
	// session on. Here the replica that opened it is deleted in the middle of
	// an agent's calls, and the agent keeps its session id.
	It("carries a 2025-11-25 session on when the replica that opened it is deleted", func() {
		const tool = "mcp.everything.test_simple_text"
		scaleBridge(2)
		agent := fmt.Sprintf("e2e-replicas-%d", time.Now().UnixNano()%1e6)
		subject := "system:serviceaccount:" + servedNamespace + ":" + agent
		createAgent(agent, []mcpv1alpha1.ToolRule{{Tools: []string{tool}, Decision: mcpv1alpha1.DecisionAllow}})
		pod := startAgent(agent, "--era", "session", "--call", tool, "--repeat", tool, "--every", "500ms", "--for", "10s")

		By("finding the session and the replica that opened it")
		var token string
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(pod.Status.Phase).To(BeElementOf(corev1.PodRunning, corev1.PodSucceeded))
			first := stepsNamed(agentStepsG(g, pod), "call")
			g.Expect(first).NotTo(BeEmpty())
			g.Expect(first[0].Error).To(BeEmpty())
			token = first[0].Session
		}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		Expect(stepOf(agentSteps(pod), "connect", "").Version).To(Equal("2025-11-25"))
		Expect(token).NotTo(BeEmpty(), "the agent got no Mcp-Session-Id")

		// The session id inside the token is sealed (encrypted), so the
		// agent's session is found in the audit log: the one session its
		// ServiceAccount completed calls in.
		var id, opener string
		Eventually(func(g Gomega) {
			id = sessionOfSubject(g, auditEventsByPod(g), subject)
			var servedBy []string
			for name, events := range auditEventsByPod(g) {
				if len(callsOf(events, id, subject)) > 0 {
					servedBy = append(servedBy, name)
				}
			}
			g.Expect(servedBy).To(HaveLen(1), "sessionAffinity keeps the session's calls on one replica")
			opener = servedBy[0]
		}).WithTimeout(10 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

		// The opener's log until its container ends: its log goes with the pod.
		openerLog := followLog(opener)
		By("deleting the replica that opened the session, " + opener)
		deletedAt := time.Now()
		Expect(clientset.CoreV1().Pods(bridgeNamespace).Delete(ctx, opener, metav1.DeleteOptions{})).To(Succeed())

		Eventually(func() corev1.PodPhase {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			return pod.Status.Phase
		}).WithTimeout(90 * time.Second).Should(Equal(corev1.PodSucceeded))
		var openerEvents []map[string]any
		Eventually(openerLog).WithTimeout(30*time.Second).Should(Receive(&openerEvents), "the opener's log stream ends with its container")

		steps := agentSteps(pod)
		repeats := stepsNamed(steps, "repeat")
		Expect(repeats).NotTo(BeEmpty())
		var failed, after []agentStep
		for _, s := range append(stepsNamed(steps, "call"), repeats...) {
			Expect(s.Session).To(Equal(token), "the agent kept its session id: no new initialize")
			Expect(s.Error).NotTo(ContainSubstring("404"), "no replica disowned the session")
			if s.Error != "" {
				failed = append(failed, s)
			} else if s.At.After(deletedAt) {
				after = append(after, s)
			}
		}
		Expect(len(after)).To(BeNumerically(">=", 5), "the agent went on calling for a while after the deletion: %d successful calls", len(after))
		Expect(repeats[len(repeats)-1].Error).To(BeEmpty(), "the session works at the end")

		// Every successful call is accounted for in the replicas' audit logs:
		// the opener's (followed to its end) and the others', and the session
		// never left the other replica once it got there.
		var survivorCalls []map[string]any
		others := map[string]int{}
		for name, events := range auditEventsByPod(Default) {
			if name == opener {
				continue
			}
			if calls := callsOf(events, id, subject); len(calls) > 0 {
				others[name] = len(calls)
				survivorCalls = append(survivorCalls, calls...)
			}
		}
		openerCalls := callsOf(openerEvents, id, subject)
		succeeded := len(stepsNamed(steps, "call")) + len(repeats) - len(failed)
		Expect(others).To(HaveLen(1), "the session moved to one other replica")
		Expect(len(openerCalls)+len(survivorCalls)).To(Equal(succeeded), "each successful call is one tool.completed of the session")
		for _, e := range survivorCalls {
			Expect(eventTime(e).After(deletedAt)).To(BeTrue(), "the other replica served the session only after the deletion: %v", e)
		}

		// What the agent saw around the deletion: failures, the slowest call
		// and the longest wait between two answers.
		lastOnOpener := time.Time{}
		for _, e := range openerCalls {
			lastOnOpener = eventTime(e)
		}
		firstOnSurvivor := eventTime(slices.MinFunc(survivorCalls, func(a, b map[string]any) int { return eventTime(a).Compare(eventTime(b)) }))
		ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
		var errs []string
		for _, s := range failed {
			errs = append(errs, fmt.Sprintf("sent %s after the deletion, failed after %s: %s", ms(s.At.Sub(deletedAt)), ms(s.took()), s.Error))
		}
		var slowest, longestWait time.Duration
		var lastAnswer time.Time
		for _, s := range repeats {
			slowest = max(slowest, s.took())
			if s.Error == "" {
				if !lastAnswer.IsZero() {
					longestWait = max(longestWait, s.At.Add(s.took()).Sub(lastAnswer))
				}
				lastAnswer = s.At.Add(s.took())
			}
		}
		AddReportEntry("session across the deletion", fmt.Sprintf(
			"opener %s served %d calls, the last %s after the deletion; the other replica %d, the first %s after it; "+
				"%d of %d calls failed %v; slowest call %s; longest time between two answers %s (calls every 500ms)",
			opener, len(openerCalls), ms(lastOnOpener.Sub(deletedAt)), len(survivorCalls), ms(firstOnSurvivor.Sub(deletedAt)),
			len(failed), succeeded+len(failed), errs, ms(slowest), ms(longestWait)))
		// Only a call in flight at the deletion may fail: the agent calls one
		// at a time, so that is one at most.
		for _, s := range failed {
			Expect(s.At.Before(deletedAt)).To(BeTrue(), "a call sent after the deletion failed: %v", errs)
		}
	})
})

// scaleBridge runs the bridge with n replicas until the spec ends, then
// restores its replica count and waits until only that many pods are left
// and serve.
func scaleBridge(n int32) {
	deployments := clientset.AppsV1().Deployments(bridgeNamespace)
	scale, err := deployments.GetScale(ctx, bridgeDeployment, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	restore := scale.Spec.Replicas
	setScale := func(replicas int32) {
		_, err := deployments.UpdateScale(ctx, bridgeDeployment, &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Name: bridgeDeployment, Namespace: bridgeNamespace},
			Spec:       autoscalingv1.ScaleSpec{Replicas: replicas},
		}, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(bridgeServing).WithTimeout(90*time.Second).WithPolling(250*time.Millisecond).Should(Equal(int(replicas)),
			func() string {
				return fmt.Sprintf("%d bridge pods Ready and behind the Service, none terminating; last seen: %s", replicas, bridgeNotServing)
			})
	}
	DeferCleanup(setScale, restore)
	setScale(n)
}

// bridgeServing is how many bridge pods serve: Ready and in the Service's
// endpoints; -1 while any pod is still starting or terminating, with why in
// bridgeNotServing (a wait that times out says what it waited on).
func bridgeServing() int {
	pods, err := clientset.CoreV1().Pods(bridgeNamespace).List(ctx, metav1.ListOptions{LabelSelector: bridgePodSelector})
	Expect(err).NotTo(HaveOccurred())
	active := 0
	for _, p := range pods.Items {
		switch {
		case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
			// Its containers have ended for good (a deleted pod whose
			// object the kubelet has yet to remove, or an evicted one the
			// Deployment replaced): it serves nothing and is out of the
			// endpoints, and counted it would keep the wait from settling
			// for as long as its object stays.
			continue
		case p.DeletionTimestamp != nil:
			bridgeNotServing = fmt.Sprintf("pod %s terminating for %s (phase %s, containers %s)", p.Name,
				time.Since(p.DeletionTimestamp.Time).Round(time.Second), p.Status.Phase, containerStates(&p))
			return -1
		case !podReady(&p):
			bridgeNotServing = fmt.Sprintf("pod %s not Ready %s after its creation (phase %s, containers %s)", p.Name,
				time.Since(p.CreationTimestamp.Time).Round(time.Second), p.Status.Phase, containerStates(&p))
			return -1
		}
		active++
	}
	eps, err := clientset.DiscoveryV1().EndpointSlices(bridgeNamespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + bridgeService})
	Expect(err).NotTo(HaveOccurred())
	ready := 0
	for _, s := range eps.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || !*e.Conditions.Ready {
				bridgeNotServing = fmt.Sprintf("endpoint %v of slice %s not ready", e.Addresses, s.Name)
				return -1
			}
			ready++
		}
	}
	if ready != active {
		bridgeNotServing = fmt.Sprintf("%d ready endpoints for %d pods", ready, active)
		return -1
	}
	return ready
}

// bridgeNotServing is why bridgeServing last returned -1.
var bridgeNotServing string

// containerStates says, for a wait's message, what p's containers are doing.
func containerStates(p *corev1.Pod) string {
	var out []string
	for _, c := range p.Status.ContainerStatuses {
		switch st := c.State; {
		case st.Running != nil:
			out = append(out, fmt.Sprintf("%s running since %s, ready %v, %d restarts", c.Name, st.Running.StartedAt.UTC().Format(time.TimeOnly), c.Ready, c.RestartCount))
		case st.Waiting != nil:
			out = append(out, fmt.Sprintf("%s waiting: %s %s", c.Name, st.Waiting.Reason, st.Waiting.Message))
		case st.Terminated != nil:
			out = append(out, fmt.Sprintf("%s terminated: %s, exit code %d", c.Name, st.Terminated.Reason, st.Terminated.ExitCode))
		}
	}
	return "[" + strings.Join(out, "; ") + "]"
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// followLog reads a bridge pod's audit events until its container ends.
func followLog(pod string) <-chan []map[string]any {
	stream, err := clientset.CoreV1().Pods(bridgeNamespace).GetLogs(pod, &corev1.PodLogOptions{Follow: true}).Stream(ctx)
	Expect(err).NotTo(HaveOccurred())
	out := make(chan []map[string]any, 1)
	go func() {
		defer GinkgoRecover()
		defer stream.Close()
		out <- parseAudit(stream)
	}()
	return out
}

// callsOf are the completed tool calls of one session and subject.
func callsOf(events []map[string]any, sessionID, subject string) []map[string]any {
	var calls []map[string]any
	for _, e := range events {
		if e["session"] == sessionID && e["subject"] == subject && e["type"] == "tool.completed" {
			calls = append(calls, e)
		}
	}
	return calls
}

func eventTime(e map[string]any) time.Time {
	t, err := time.Parse(time.RFC3339Nano, fmt.Sprint(e["time"]))
	Expect(err).NotTo(HaveOccurred())
	return t
}

// sessionOfSubject is the one session in which subject completed calls,
// across the replicas' audit logs.
func sessionOfSubject(g Gomega, byPod map[string][]map[string]any, subject string) string {
	sessions := map[string]bool{}
	for _, events := range byPod {
		for _, e := range events {
			if e["subject"] == subject && e["type"] == "tool.completed" {
				sessions[fmt.Sprint(e["session"])] = true
			}
		}
	}
	g.Expect(sessions).To(HaveLen(1), "the agent's calls belong to one session")
	for id := range sessions {
		return id
	}
	return ""
}

// took is how long a repeated call took.
func (s agentStep) took() time.Duration { return time.Duration(s.Ms * float64(time.Millisecond)) }

func stepsNamed(steps []agentStep, name string) []agentStep {
	var out []agentStep
	for _, s := range steps {
		if s.Step == name {
			out = append(out, s)
		}
	}
	return out
}
