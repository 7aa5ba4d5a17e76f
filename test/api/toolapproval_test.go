package api_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// validApproval is the request part of a ToolApproval as the bridge writes it.
const validApproval = `
request:
  requester: {username: "system:serviceaccount:default:agent", groups: ["system:serviceaccounts"]}
  method: tools/call
  server: fs
  target: mcp.fs.write_file
  argumentsSHA256: "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  argumentsPreview: '{"path":"/data/x"}'
  risk: destructive
  rules: ["policy:default/p#rules[0]"]
  modes: [AllowOnce]
  expiresAt: "2030-01-01T00:00:00Z"
`

var _ = Describe("ToolApproval validation", func() {
	It("accepts the request the bridge writes, and a decision among its modes", func() {
		Expect(create(object("ToolApproval", uniqueName("ok"), validApproval))).To(Succeed())
		Expect(decide("alice", pendingApproval(), mcpv1alpha1.VerdictAllowOnce, "alice")).To(Succeed())
		Expect(decide("alice", pendingApproval(), mcpv1alpha1.VerdictDeny, "alice")).To(Succeed())
	})

	DescribeTable("rejects invalid approvals with a message that says what to fix",
		func(specYAML, message string) {
			// The schema is checked before the admission policy, so these
			// are refused for what they are even with a decision in them.
			expectRejected(create(object("ToolApproval", uniqueName("bad"), specYAML)), message)
		},
		Entry("a verdict the request does not offer", validApproval+`
decision: {verdict: AllowSession, decider: alice}`, "decision.verdict must be Deny or one of request.modes"),
		Entry("an unknown verdict", validApproval+`
decision: {verdict: Maybe, decider: alice}`, `Unsupported value: "Maybe"`),
		Entry("a decision without decider", validApproval+`
decision: {verdict: Deny}`, "spec.decision.decider"),
		Entry("no request", `decision: {verdict: Deny, decider: alice}`, "spec.request"),
		Entry("an unknown method", `
request:
  requester: {username: a}
  method: tools/list
  server: fs
  target: mcp.fs.x
  risk: read
  modes: [AllowOnce]
  expiresAt: "2030-01-01T00:00:00Z"`, `Unsupported value: "tools/list"`),
		Entry("an arguments digest that is not hex sha256", `
request:
  requester: {username: a}
  method: tools/call
  server: fs
  target: mcp.fs.x
  argumentsSHA256: "sha256:abc"
  risk: read
  modes: [AllowOnce]
  expiresAt: "2030-01-01T00:00:00Z"`, "spec.request.argumentsSHA256"),
		Entry("no modes", `
request:
  requester: {username: a}
  method: tools/call
  server: fs
  target: mcp.fs.x
  risk: read
  modes: []
  expiresAt: "2030-01-01T00:00:00Z"`, "spec.request.modes"),
		Entry("no expiry", `
request:
  requester: {username: a}
  method: tools/call
  server: fs
  target: mcp.fs.x
  risk: read
  modes: [AllowOnce]`, "spec.request.expiresAt"),
		Entry("a requester without user name", `
request:
  requester: {groups: [g]}
  method: tools/call
  server: fs
  target: mcp.fs.x
  risk: read
  modes: [AllowOnce]
  expiresAt: "2030-01-01T00:00:00Z"`, "spec.request.requester.username"),
	)

	It("keeps status apart from spec and serves the printer columns", func() {
		pending := pendingApproval()
		name := pending.Name
		Expect(decide("alice", pending, mcpv1alpha1.VerdictAllowOnce, "alice")).To(Succeed())
		var a mcpv1alpha1.ToolApproval
		key := client.ObjectKey{Namespace: "default", Name: name}
		Expect(k8sClient.Get(ctx, key, &a)).To(Succeed())
		a.Status.Phase = mcpv1alpha1.ApprovalApproved
		a.Status.FinishedAt = &metav1.Time{Time: time.Now()}
		Expect(k8sClient.Status().Update(ctx, &a)).To(Succeed())

		table := getTable("toolapprovals", name)
		Expect(table.columns).To(Equal([]string{"Name", "Phase", "Requester", "Target", "Risk", "Decider", "Age"}))
		Expect(table.row[:6]).To(Equal([]any{name, "Approved", "system:serviceaccount:default:agent", "mcp.fs.write_file", "destructive", "alice"}))

		a.Status.Phase = mcpv1alpha1.ApprovalDenied
		Expect(k8sClient.Update(ctx, &a)).To(Succeed())
		Expect(k8sClient.Get(ctx, key, &a)).To(Succeed())
		Expect(a.Status.Phase).To(Equal(mcpv1alpha1.ApprovalApproved), "a write of the main resource must not change status")
	})
})

var _ = Describe("ToolPolicy approval channels", func() {
	It("default to Elicitation only, so no policy creates ToolApprovals unless it says so", func() {
		name := uniqueName("channels")
		Expect(create(object("ToolPolicy", name, validPolicy+`
rules: [{tools: ["mcp.**"], decision: ask}]`))).To(Succeed())
		var p mcpv1alpha1.ToolPolicy
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &p)).To(Succeed())
		Expect(p.Spec.Approval.Channels).To(Equal([]mcpv1alpha1.ApprovalChannel{mcpv1alpha1.ChannelElicitation}))
	})

	It("keep the order the policy gives", func() {
		name := uniqueName("channels")
		Expect(create(object("ToolPolicy", name, validPolicy+`
rules: [{tools: ["mcp.**"], decision: ask}]
approval: {channels: [ToolApproval, Elicitation]}`))).To(Succeed())
		var p mcpv1alpha1.ToolPolicy
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &p)).To(Succeed())
		Expect(p.Spec.Approval.Channels).To(Equal([]mcpv1alpha1.ApprovalChannel{mcpv1alpha1.ChannelToolApproval, mcpv1alpha1.ChannelElicitation}))
	})

	DescribeTable("rejects invalid channel lists",
		func(channels, message string) {
			expectRejected(create(object("ToolPolicy", uniqueName("bad"), validPolicy+`
rules: [{tools: ["mcp.**"], decision: ask}]
approval: {channels: `+channels+`}`)), message)
		},
		Entry("an unknown channel", "[Email]", `Unsupported value: "Email"`),
		Entry("a channel twice", "[ToolApproval, ToolApproval]", "Duplicate value"),
		Entry("no channel", "[]", "spec.approval.channels"),
	)
})

var _ = Describe("the ToolApproval kind", func() {
	It("registers the short name ta in the mcp category", func() {
		resources, err := disco.ServerResourcesForGroupVersion(mcpv1alpha1.GroupVersion.String())
		Expect(err).NotTo(HaveOccurred())
		for _, r := range resources.APIResources {
			if r.Name == "toolapprovals" {
				Expect(r.ShortNames).To(ContainElement("ta"))
				Expect(r.Categories).To(ContainElement("mcp"))
				Expect(r.Namespaced).To(BeTrue())
				return
			}
		}
		Fail("toolapprovals is not served")
	})
})
