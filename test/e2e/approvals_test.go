//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

// The sample filesystem server's write tools are destructive
// (config/samples): a policy can at most ask before they run.
const (
	writeFile = "mcp.filesystem.write_file"
	moveFile  = "mcp.filesystem.move_file"
)

var _ = Describe("a person approves what an agent may not do alone", Label("approvals"), func() {
	It("holds a destructive call until kubectl mcp approves or denies it, expires it unanswered, and names the approver in the audit chain", func() {
		suffix := time.Now().UnixNano() % 1e6
		agent := fmt.Sprintf("e2e-asker-%d", suffix)
		approver := fmt.Sprintf("e2e-approver-%d", suffix)
		requester := "system:serviceaccount:" + servedNamespace + ":" + agent
		createAsker(agent)
		// Both may decide ToolApprovals by RBAC: what stops the agent's own
		// ServiceAccount from approving its request is the admission policy.
		grantDeciding(approver, agent)
		asApprover := kubeconfigAs(approver)
		asAgent := kubeconfigAs(requester)

		// The e2e agent's client declares no elicitation: the policy's
		// ToolApproval channel is the only way to ask.
		pod := startAgent(agent, "--timeout", "5m",
			"--call", writeFile+`={"path":"/data/e2e-approved.txt","content":"a person said yes"}`,
			"--call", writeFile+`={"path":"/data/e2e-denied.txt","content":"a person said no"}`,
			"--call", moveFile+`={"source":"/data/e2e-approved.txt","destination":"/data/e2e-moved.txt"}`)

		// 1. A ToolApproval appears for the first call; the agent's own
		// ServiceAccount may update it, yet cannot approve it.
		first := pendingApproval(requester, writeFile, "")
		Expect(first.Spec.Request.Method).To(Equal("tools/call"))
		Expect(first.Spec.Request.Risk).To(Equal(mcpv1alpha1.RiskDestructive))
		Expect(first.Spec.Request.ArgumentsPreview).To(ContainSubstring("e2e-approved.txt"))
		Expect(first.Spec.Request.ArgumentsSHA256).To(HavePrefix("sha256:"))
		out, err := kubectlMCP(asAgent, "approve", first.Name, "-n", servedNamespace)
		Expect(err).To(HaveOccurred(), "the requester approved its own request: %s", out)
		Expect(out).To(ContainSubstring("nobody decides their own request"))
		Consistently(callSteps).WithArguments(pod).WithTimeout(time.Second).WithPolling(250*time.Millisecond).Should(BeEmpty(), "the call went on before a person decided")

		// 2. The approver approves it: the call runs.
		out, err = kubectlMCP(asApprover, "approve", first.Name, "-n", servedNamespace, "--comment", "e2e: fine")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("approved (AllowOnce) by " + approver))
		Eventually(callSteps).WithArguments(pod).WithTimeout(60 * time.Second).WithPolling(250 * time.Millisecond).Should(HaveLen(1))
		approved := callSteps(pod)[0]
		Expect(approved.Error).To(BeEmpty())
		Expect(string(approved.Result)).To(ContainSubstring("e2e-approved.txt"))
		Expect(approvalPhase(first)).To(Equal(mcpv1alpha1.ApprovalApproved))

		// 3. The next call, other arguments, needs its own approval: the
		// approver denies it, and the agent hears why.
		second := pendingApproval(requester, writeFile, first.Name)
		Expect(second.Spec.Request.ArgumentsSHA256).NotTo(Equal(first.Spec.Request.ArgumentsSHA256))
		out, err = kubectlMCP(asApprover, "deny", second.Name, "-n", servedNamespace, "--comment", "e2e: not this one")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(callSteps).WithArguments(pod).WithTimeout(60 * time.Second).WithPolling(250 * time.Millisecond).Should(HaveLen(2))
		denied := callSteps(pod)[1]
		Expect(denied.Error).To(ContainSubstring("-32010"))
		Expect(denied.Error).To(ContainSubstring("denied_by_approver"))
		Expect(denied.Error).To(ContainSubstring("e2e: not this one"))

		// 4. Nobody decides the third (its policy waits 5s): approval_timeout.
		Eventually(callSteps).WithArguments(pod).WithTimeout(60 * time.Second).WithPolling(250 * time.Millisecond).Should(HaveLen(3))
		expired := callSteps(pod)[2]
		Expect(expired.Error).To(ContainSubstring("-32010"))
		Expect(expired.Error).To(ContainSubstring("approval_timeout"))
		third := finishedApproval(requester, moveFile)
		Expect(third.Status.Phase).To(Equal(mcpv1alpha1.ApprovalExpired))
		Expect(third.Spec.Decision).To(BeNil())

		// 5. The audit chain: each decision names its approval and who
		// made it; nothing denied or expired went upstream.
		Eventually(func(g Gomega) {
			events := auditEvents(g)
			ok := resolvedFor(g, events, first)
			g.Expect(ok).To(HaveKeyWithValue("decision", "allow"))
			g.Expect(ok).To(HaveKeyWithValue("actor", "user"))
			g.Expect(ok).To(HaveKeyWithValue("approver", approver))
			g.Expect(chainOf(events, first.Spec.Request.ToolCallID)).To(ContainElements("mcp.call.started", "tool.completed"))
			no := resolvedFor(g, events, second)
			g.Expect(no).To(HaveKeyWithValue("decision", "deny"))
			g.Expect(no).To(HaveKeyWithValue("actor", "user"))
			g.Expect(no).To(HaveKeyWithValue("approver", approver))
			g.Expect(chainOf(events, second.Spec.Request.ToolCallID)).NotTo(ContainElement("mcp.call.started"))
			late := resolvedFor(g, events, third)
			g.Expect(late).To(HaveKeyWithValue("decision", "deny"))
			g.Expect(late).To(HaveKeyWithValue("actor", "bridge"))
			g.Expect(chainOf(events, third.Spec.Request.ToolCallID)).NotTo(ContainElement("mcp.call.started"))
		}).WithTimeout(20 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	})
})

// createAsker makes the agent's ServiceAccount and its policies: writes
// are asked through ToolApprovals only (waiting up to 5m), moves too, with
// a 5s timeout nobody meets.
func createAsker(name string) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: servedNamespace, Name: name}}
	Expect(k8sClient.Create(ctx, sa)).To(Succeed())
	DeferCleanup(func() { _ = k8sClient.Delete(ctx, sa) })
	policy := func(suffix, tool string, timeout time.Duration) {
		tp := &mcpv1alpha1.ToolPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: servedNamespace, Name: name + "-" + suffix},
			Spec: mcpv1alpha1.ToolPolicySpec{
				Subjects: []mcpv1alpha1.Subject{{Kind: mcpv1alpha1.SubjectServiceAccount, Name: name, Namespace: servedNamespace}},
				Rules:    []mcpv1alpha1.ToolRule{{Tools: []string{tool}, Decision: mcpv1alpha1.DecisionAsk, Reason: "e2e: a person decides"}},
				Approval: mcpv1alpha1.ApprovalSpec{
					Channels: []mcpv1alpha1.ApprovalChannel{mcpv1alpha1.ChannelToolApproval},
					Modes:    []mcpv1alpha1.ApprovalMode{mcpv1alpha1.ApprovalAllowOnce},
					Timeout:  metav1.Duration{Duration: timeout},
				},
			},
		}
		Expect(k8sClient.Create(ctx, tp)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx, tp) })
	}
	policy("writes", writeFile, 5*time.Minute)
	policy("moves", moveFile, 5*time.Second)
}

// grantDeciding lets user and the ServiceAccount sa decide the
// ToolApprovals of the served namespace (RBAC, as docs/approvals.md shows).
func grantDeciding(user, sa string) {
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: servedNamespace, Name: user},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{mcpv1alpha1.GroupVersion.Group}, Resources: []string{"toolapprovals"},
			Verbs: []string{"get", "list", "watch", "update"},
		}},
	}
	Expect(k8sClient.Create(ctx, role)).To(Succeed())
	DeferCleanup(func() { _ = k8sClient.Delete(ctx, role) })
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: servedNamespace, Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user},
			{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: servedNamespace},
		},
	}
	Expect(k8sClient.Create(ctx, binding)).To(Succeed())
	DeferCleanup(func() { _ = k8sClient.Delete(ctx, binding) })
}

// kubeconfigAs writes a copy of the dev cluster's kubeconfig whose user
// acts as user (impersonation: the API server then authenticates,
// authorizes and admits every request as that user).
func kubeconfigAs(user string) string {
	cfg, err := clientcmd.LoadFromFile(kubeconfigPath)
	Expect(err).NotTo(HaveOccurred())
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = user
	}
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(clientcmd.WriteToFile(*cfg, path)).To(Succeed())
	return path
}

// kubectlMCP runs the built plugin (bin/kubectl-mcp) with kubeconfig and
// returns what it printed, stdout and stderr.
func kubectlMCP(kubeconfig string, args ...string) (string, error) {
	root, err := testenv.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.CommandContext(ctx, filepath.Join(root, "bin", "kubectl-mcp"), append(args, "--kubeconfig", kubeconfig)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// pendingApproval waits for the Pending ToolApproval of requester for
// target, other than the one named skip.
func pendingApproval(requester, target, skip string) *mcpv1alpha1.ToolApproval {
	var found *mcpv1alpha1.ToolApproval
	EventuallyWithOffset(1, func(g Gomega) {
		found = nil
		for _, a := range approvalsOf(g, requester, target) {
			if a.Name != skip && a.Spec.Decision == nil && a.Status.Phase == mcpv1alpha1.ApprovalPending {
				found = a
			}
		}
		g.Expect(found).NotTo(BeNil(), "no ToolApproval waits for %s of %s", target, requester)
	}).WithTimeout(90 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
	return found
}

// finishedApproval waits for the one ToolApproval of requester for target
// to be finished.
func finishedApproval(requester, target string) *mcpv1alpha1.ToolApproval {
	var found *mcpv1alpha1.ToolApproval
	EventuallyWithOffset(1, func(g Gomega) {
		list := approvalsOf(g, requester, target)
		g.Expect(list).To(HaveLen(1))
		found = list[0]
		g.Expect(found.Status.Phase).NotTo(BeElementOf(mcpv1alpha1.ApprovalPending, mcpv1alpha1.ApprovalPhase("")))
	}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
	return found
}

func approvalsOf(g Gomega, requester, target string) []*mcpv1alpha1.ToolApproval {
	var list mcpv1alpha1.ToolApprovalList
	g.Expect(k8sClient.List(ctx, &list, client.InNamespace(servedNamespace))).To(Succeed())
	var out []*mcpv1alpha1.ToolApproval
	for i := range list.Items {
		a := &list.Items[i]
		if a.Spec.Request.Requester.Username == requester && a.Spec.Request.Target == target {
			out = append(out, a)
		}
	}
	return out
}

func approvalPhase(a *mcpv1alpha1.ToolApproval) mcpv1alpha1.ApprovalPhase {
	var cur mcpv1alpha1.ToolApproval
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(a), &cur)).To(Succeed())
	return cur.Status.Phase
}

// callSteps are the call steps the agent in pod has reported so far.
func callSteps(pod *corev1.Pod) []agentStep {
	var calls []agentStep
	for _, s := range agentSteps(pod) {
		if s.Step == "call" {
			calls = append(calls, s)
		}
	}
	return calls
}

// resolvedFor is the permission.resolved event of a's request, which must
// be sourced from a.
func resolvedFor(g Gomega, events []map[string]any, a *mcpv1alpha1.ToolApproval) map[string]any {
	for _, e := range events {
		if e["type"] == "permission.resolved" && e["toolCallId"] == a.Spec.Request.ToolCallID {
			g.Expect(e).To(HaveKeyWithValue("sourcedFrom", "approval:"+a.Namespace+"/"+a.Name))
			g.Expect(e).To(HaveKeyWithValue("subject", a.Spec.Request.Requester.Username))
			return e
		}
	}
	g.Expect(nil).NotTo(BeNil(), "no permission.resolved for ToolApproval %s (toolCallId %s)", a.Name, a.Spec.Request.ToolCallID)
	return nil
}

// chainOf are the types of the events of one request, in order.
func chainOf(events []map[string]any, toolCallID string) []string {
	var types []string
	for _, e := range events {
		if e["toolCallId"] == toolCallID {
			types = append(types, fmt.Sprint(e["type"]))
		}
	}
	return types
}
