package api_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

// deciders is the group the suite grants the update of ToolApprovals, as a
// platform team would grant its on-call people: RBAC lets them write, the
// admission policy decides what they may write.
const deciders = "mcp-approvers"

// requester is the ServiceAccount validApproval names as the one asking.
const requester = "system:serviceaccount:default:agent"

// installAdmissionPolicy applies config/admission as shipped and grants the
// deciders group the use of ToolApprovals.
func installAdmissionPolicy() {
	Expect(testenv.InstallAdmissionPolicies(ctx, cfg)).To(Succeed())
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "toolapproval-decider"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{mcpv1alpha1.GroupVersion.Group}, Resources: []string{"toolapprovals"},
			Verbs: []string{"get", "list", "watch", "update", "patch", "create"},
		}},
	}
	Expect(k8sClient.Create(ctx, role)).To(Succeed())
	Expect(k8sClient.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "toolapproval-deciders"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: deciders}},
	})).To(Succeed())
}

// as is a client that acts as user, a member of the deciders group, by
// impersonation: the API server authenticates the request as that user, so
// request.userInfo is what a real login of that user would give.
func as(user string) client.Client {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{deciders, "system:authenticated"}}
	cl, err := client.New(c, client.Options{Scheme: k8sClient.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

// pendingApproval creates a ToolApproval as the bridge does (no decision) and
// returns it as stored.
func pendingApproval() *mcpv1alpha1.ToolApproval {
	name := uniqueName("approval")
	Expect(create(object("ToolApproval", name, validApproval))).To(Succeed())
	var a mcpv1alpha1.ToolApproval
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &a)).To(Succeed())
	a.Status.Phase = mcpv1alpha1.ApprovalPending
	Expect(k8sClient.Status().Update(ctx, &a)).To(Succeed())
	return &a
}

// decide sets the decision as user, the way kubectl mcp approve does.
func decide(user string, a *mcpv1alpha1.ToolApproval, verdict mcpv1alpha1.ApprovalVerdict, decider string) error {
	a = a.DeepCopy()
	a.Spec.Decision = &mcpv1alpha1.ApprovalDecision{Verdict: verdict, Decider: decider}
	return as(user).Update(ctx, a)
}

// expectForbidden checks a refusal by the admission policy and its message.
func expectForbidden(err error, message string) {
	GinkgoHelper()
	Expect(err).To(HaveOccurred(), "the API server accepted a write the admission policy must refuse")
	Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "want Forbidden or Invalid, got %v", err)
	Expect(err.Error()).To(ContainSubstring("mcp-operator-toolapprovals"), "the refusal names the policy")
	Expect(err.Error()).To(ContainSubstring(message))
}

var _ = Describe("the ToolApproval admission policy", func() {
	It("lets a person decide once, under their own name", func() {
		a := pendingApproval()
		Expect(decide("alice", a, mcpv1alpha1.VerdictAllowOnce, "alice")).To(Succeed())
		var got mcpv1alpha1.ToolApproval
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(a), &got)).To(Succeed())
		Expect(got.Spec.Decision.Decider).To(Equal("alice"))
		Expect(got.Spec.Decision.Verdict).To(Equal(mcpv1alpha1.VerdictAllowOnce))

		By("other changes that leave request and decision alone, such as a label, still pass")
		got.Labels = map[string]string{"team": "payments"}
		Expect(as("bob").Update(ctx, &got)).To(Succeed())
	})

	It("refuses a decision that names someone else as decider", func() {
		a := pendingApproval()
		expectForbidden(decide("mallory", a, mcpv1alpha1.VerdictAllowOnce, "alice"),
			`spec.decision.decider must be the user deciding: you are authenticated as "mallory", not "alice"`)
	})

	It("refuses a decision by the subject that asked, even with the right to update", func() {
		a := pendingApproval()
		expectForbidden(decide(requester, a, mcpv1alpha1.VerdictAllowOnce, requester),
			`nobody decides their own request: "`+requester+`" made the request`)
	})

	It("refuses a second decision, and any change of the first", func() {
		a := pendingApproval()
		Expect(decide("alice", a, mcpv1alpha1.VerdictDeny, "alice")).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
		expectForbidden(decide("bob", a, mcpv1alpha1.VerdictAllowOnce, "bob"),
			"spec.decision is set once: this ToolApproval was decided already (Deny by alice)")

		By("alice changing her own comment counts as a change too")
		changed := a.DeepCopy()
		changed.Spec.Decision.Comment = "changed my mind"
		expectForbidden(as("alice").Update(ctx, changed), "spec.decision is set once")

		By("nor can the decision be removed")
		removed := a.DeepCopy()
		removed.Spec.Decision = nil
		expectForbidden(as("alice").Update(ctx, removed), "spec.decision is set once")
	})

	It("refuses edits of the request", func() {
		a := pendingApproval()
		edited := a.DeepCopy()
		edited.Spec.Request.ArgumentsPreview = `{"path":"/etc/passwd"}`
		expectForbidden(as("alice").Update(ctx, edited), "spec.request is immutable")

		By("even together with a decision, and even by a cluster admin")
		edited.Spec.Decision = &mcpv1alpha1.ApprovalDecision{Verdict: mcpv1alpha1.VerdictAllowOnce, Decider: "alice"}
		expectForbidden(as("alice").Update(ctx, edited), "spec.request is immutable")
		admin := a.DeepCopy()
		admin.Spec.Request.Requester.Username = "system:serviceaccount:default:other"
		expectForbidden(k8sClient.Update(ctx, admin), "spec.request is immutable")
	})

	It("refuses a ToolApproval created with its decision already in it", func() {
		expectForbidden(as("alice").Create(ctx, object("ToolApproval", uniqueName("forged"), validApproval+`
decision: {verdict: AllowOnce, decider: alice}`)), "a ToolApproval is created without spec.decision")
	})

	It("refuses a decision once the request stopped waiting", func() {
		a := pendingApproval()
		a.Status.Phase = mcpv1alpha1.ApprovalExpired
		Expect(k8sClient.Status().Update(ctx, a)).To(Succeed())
		expectForbidden(decide("alice", a, mcpv1alpha1.VerdictAllowOnce, "alice"),
			"this ToolApproval is Expired: the request no longer waits for a decision")
	})
})
