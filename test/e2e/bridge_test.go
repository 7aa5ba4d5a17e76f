//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// The dev install's bridge serves namespace default (hack/cluster/dev.sh).
const (
	bridgeNamespace = "mcp-operator-system"
	bridgeService   = "mcp-operator-bridge"
	servedNamespace = "default"
)

// agentStep is one line the e2e agent prints (test/e2e/agent).
type agentStep struct {
	Step    string          `json:"step"`
	Tool    string          `json:"tool"`
	Status  int             `json:"status"`
	Tools   []string        `json:"tools"`
	Result  json.RawMessage `json:"result"`
	Error   string          `json:"error"`
	Session string          `json:"session"`
	Version string          `json:"version"`
	At      time.Time       `json:"at"`
	Ms      float64         `json:"ms"`
}

var agentSeq int

// runAgent runs the agent in a pod of ServiceAccount sa with a projected token
// for audience mcp-operator, and returns what it reported.
func runAgent(sa string, calls ...string) []agentStep {
	var args []string
	for _, c := range calls {
		args = append(args, "--call", c)
	}
	return finishAgent(startAgent(sa, args...))
}

// finishAgent waits for the agent in pod to end well, and returns what it
// reported.
func finishAgent(pod *corev1.Pod) []agentStep {
	Eventually(func() corev1.PodPhase {
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		return pod.Status.Phase
	}).WithTimeout(90 * time.Second).Should(Equal(corev1.PodSucceeded))
	return agentSteps(pod)
}

// startAgent starts the agent in a pod of ServiceAccount sa with a projected
// token for audience mcp-operator, pointed at the bridge's Service, with
// args added to its command line.
func startAgent(sa string, extraArgs ...string) *corev1.Pod {
	return startAgentWith(sa, corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: "mcp-operator", ExpirationSeconds: ptr.To(int64(600)), Path: "token",
		}}},
	}}, extraArgs...)
}

// startAgentWith runs the agent with the bearer token in token's file
// "token" (a person's access token in a Secret, say) instead of its
// ServiceAccount's.
func startAgentWith(sa string, token corev1.VolumeSource, extraArgs ...string) *corev1.Pod {
	var svc corev1.Service
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: bridgeNamespace, Name: bridgeService}, &svc)).To(Succeed())
	// No cluster DNS in the dev cluster: the agent dials the Service's IP.
	args := append([]string{"--url", fmt.Sprintf("http://%s:%d/mcp", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)}, extraArgs...)
	agentSeq++
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: servedNamespace, Name: fmt.Sprintf("e2e-agent-%d-%d", GinkgoParallelProcess(), agentSeq)},
		Spec: corev1.PodSpec{
			ServiceAccountName:           sa,
			AutomountServiceAccountToken: ptr.To(false),
			RestartPolicy:                corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "agent", Image: "localhost/mcp-operator/e2e-agent:dev", ImagePullPolicy: corev1.PullNever,
				Command: []string{"/agent"}, Args: args,
				VolumeMounts: []corev1.VolumeMount{{Name: "token", MountPath: "/var/run/secrets/mcp-operator", ReadOnly: true}},
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
			}},
			Volumes: []corev1.Volume{{Name: "token", VolumeSource: token}},
		},
	}
	Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	DeferCleanup(func() { _ = k8sClient.Delete(ctx, pod) })
	return pod
}

// agentSteps is what the agent in pod has reported so far.
func agentSteps(pod *corev1.Pod) []agentStep { return agentStepsG(Default, pod) }

func agentStepsG(g Gomega, pod *corev1.Pod) []agentStep {
	logs, err := clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).Do(ctx).Raw()
	g.Expect(err).NotTo(HaveOccurred())
	var steps []agentStep
	for _, line := range strings.Split(strings.TrimSpace(string(logs)), "\n") {
		if line == "" {
			continue
		}
		var s agentStep
		g.Expect(json.Unmarshal([]byte(line), &s)).To(Succeed(), line)
		steps = append(steps, s)
	}
	return steps
}

func stepOf(steps []agentStep, step, tool string) agentStep {
	for _, s := range steps {
		if s.Step == step && s.Tool == tool {
			return s
		}
	}
	Fail(fmt.Sprintf("the agent reported no %s step for %q: %+v", step, tool, steps))
	return agentStep{}
}

// bridgePodSelector selects the bridge's pods.
const bridgePodSelector = "app.kubernetes.io/component=bridge"

// auditEvents are the bridge's audit events (JSON lines on its stdout), of
// all its pods. g is the Gomega of the Eventually polling it, so that a
// failed read is retried, not the end of the spec.
func auditEvents(g Gomega) []map[string]any {
	var events []map[string]any
	for _, byPod := range auditEventsByPod(g) {
		events = append(events, byPod...)
	}
	return events
}

// auditEventsByPod are the audit events of each bridge pod that has started,
// by pod name.
func auditEventsByPod(g Gomega) map[string][]map[string]any {
	pods, err := clientset.CoreV1().Pods(bridgeNamespace).List(ctx, metav1.ListOptions{LabelSelector: bridgePodSelector})
	g.Expect(err).NotTo(HaveOccurred())
	events := map[string][]map[string]any{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodPending {
			continue // no log yet
		}
		logs, err := clientset.CoreV1().Pods(bridgeNamespace).GetLogs(p.Name, &corev1.PodLogOptions{}).Stream(ctx)
		if apierrors.IsNotFound(err) {
			continue // gone since the list
		}
		g.Expect(err).NotTo(HaveOccurred())
		events[p.Name] = parseAudit(logs)
		logs.Close()
	}
	return events
}

// parseAudit reads the audit events among a bridge's log lines.
func parseAudit(r io.Reader) []map[string]any {
	var events []map[string]any
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		var e map[string]any
		if json.Unmarshal(scanner.Bytes(), &e) == nil && e["seq"] != nil {
			events = append(events, e)
		}
	}
	return events
}

func createAgent(name string, rules []mcpv1alpha1.ToolRule) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: servedNamespace, Name: name}}
	Expect(k8sClient.Create(ctx, sa)).To(Succeed())
	DeferCleanup(func() { _ = k8sClient.Delete(ctx, sa) })
	tp := &mcpv1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: servedNamespace, Name: name},
		Spec: mcpv1alpha1.ToolPolicySpec{
			Subjects: []mcpv1alpha1.Subject{{Kind: mcpv1alpha1.SubjectServiceAccount, Name: name, Namespace: servedNamespace}},
			Rules:    rules,
		},
	}
	Expect(k8sClient.Create(ctx, tp)).To(Succeed())
	DeferCleanup(func() { _ = k8sClient.Delete(ctx, tp) })
}

var _ = Describe("agents through the bridge", Label("bridge"), func() {
	It("authenticates a pod's projected token, enforces its ToolPolicy and writes the audit chain", func() {
		// A name of its own, so the bridge's log holds no earlier run's events for it.
		agent := fmt.Sprintf("e2e-agent-%d", time.Now().UnixNano()%1e6)
		createAgent(agent, []mcpv1alpha1.ToolRule{
			{Tools: []string{"mcp.everything.test_simple_text", "mcp.everything.test_error_handling"}, Decision: mcpv1alpha1.DecisionAllow},
			{Tools: []string{"mcp.everything.test_error_handling"}, Decision: mcpv1alpha1.DecisionDeny, Reason: "e2e: not this one"},
		})
		steps := runAgent(agent, "mcp.everything.test_simple_text", "mcp.everything.test_error_handling", "mcp.everything.test_image_content")

		Expect(stepOf(steps, "no-token", "").Status).To(Equal(401))
		Expect(stepOf(steps, "list", "").Tools).To(Equal([]string{"mcp.everything.test_simple_text"}), "only what the policy allows is listed")

		allowed := stepOf(steps, "call", "mcp.everything.test_simple_text")
		Expect(allowed.Error).To(BeEmpty())
		Expect(string(allowed.Result)).To(ContainSubstring(`"text":"[mcp:everything:test_simple_text] `))
		Expect(stepOf(steps, "call", "mcp.everything.test_error_handling").Error).To(ContainSubstring("denied"))
		Expect(stepOf(steps, "call", "mcp.everything.test_image_content").Error).To(ContainSubstring("denied"))

		subject := "system:serviceaccount:default:" + agent
		var chain, denied []string
		Eventually(func(g Gomega) {
			chain, denied = nil, nil
			byCall := map[string]string{}
			for _, e := range auditEvents(g) {
				if e["subject"] != subject {
					continue
				}
				if e["type"] == "permission.requested" {
					byCall[fmt.Sprint(e["toolCallId"])] = fmt.Sprint(e["tool"])
				}
				switch byCall[fmt.Sprint(e["toolCallId"])] {
				case "mcp.everything.test_simple_text":
					chain = append(chain, fmt.Sprint(e["type"]))
				case "mcp.everything.test_error_handling":
					denied = append(denied, fmt.Sprintf("%s/%v", e["type"], e["decision"]))
				}
			}
			g.Expect(chain).To(Equal([]string{"permission.requested", "permission.resolved", "mcp.call.started", "tool.started", "mcp.call.completed", "tool.completed"}))
			g.Expect(denied).To(ContainElement("permission.resolved/deny"))
			g.Expect(denied).NotTo(ContainElement(HavePrefix("mcp.call.started")), "a denied call never reaches the server")
		}).WithTimeout(20 * time.Second).Should(Succeed())
	})

	It("withdraws a suspended server's tools from the bridge within seconds", func() {
		s := httpEverything(servedNamespace, "e2e-suspend")
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx, s) })
		createAgent("e2e-suspender", []mcpv1alpha1.ToolRule{{Tools: []string{"mcp.e2e-suspend.*"}, Decision: mcpv1alpha1.DecisionAllow}})
		Eventually(ready(s)).WithTimeout(90 * time.Second).Should(Equal("True/Serving"))
		Expect(stepOf(runAgent("e2e-suspender"), "list", "").Tools).To(ContainElement("mcp.e2e-suspend.test_simple_text"))

		update(s, func(cur *mcpv1alpha1.MCPServer) { cur.Spec.Suspend = true })
		Eventually(ready(s)).WithTimeout(10 * time.Second).Should(Equal("False/Suspended"))
		Expect(stepOf(runAgent("e2e-suspender"), "list", "").Tools).To(BeEmpty())
		Eventually(podCount(s)).WithTimeout(20 * time.Second).Should(BeZero())
	})
})
