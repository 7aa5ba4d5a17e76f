package controller

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

var _ = Describe("ToolPolicy controller", func() {
	// ns holds the spec's objects; otherNS a server of the same name that no
	// policy of ns may count.
	var ns, otherNS string

	BeforeEach(func() {
		ns, otherNS = createNamespace(), createNamespace()
		startManager([]string{ns, otherNS}, func(mgr ctrl.Manager) error {
			return (&ToolPolicyReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, Options{MaxConcurrentReconciles: 2})
		})
	})

	It("marks a policy that compiles Ready with reason Compiled", func() {
		tp := newToolPolicy(ns, "readers", mcpv1alpha1.ToolRule{Tools: []string{"mcp.fs.*"}, Risks: []mcpv1alpha1.Risk{mcpv1alpha1.RiskRead}, Decision: mcpv1alpha1.DecisionAllow})
		Expect(k8sClient.Create(ctx, tp)).To(Succeed())

		ready := eventuallyReady(tp, metav1.ConditionTrue)
		Expect(ready.Reason).To(Equal(mcpv1alpha1.ReasonCompiled))
		Expect(ready.Message).To(ContainSubstring("in force"))
		Expect(ready.ObservedGeneration).To(Equal(tp.Generation))
		Expect(tp.Status.ObservedGeneration).To(Equal(tp.Generation))
		Expect(tp.Status.MatchedServers).To(BeEmpty())
		Expect(tp.Status.ToolCount).To(BeZero())
	})

	It("marks a policy with a CEL error or a bad glob Invalid, naming each field, and Ready once fixed", func() {
		tp := newToolPolicy(ns, "broken",
			mcpv1alpha1.ToolRule{Tools: []string{"mcp.fs.*"}, Decision: mcpv1alpha1.DecisionAllow},
			mcpv1alpha1.ToolRule{Tools: []string{"mcp.fs.*"}, Decision: mcpv1alpha1.DecisionAsk, When: "argz.path.startsWith('/data/')"},
			mcpv1alpha1.ToolRule{Tools: []string{"fs.write_file"}, Decision: mcpv1alpha1.DecisionDeny},
		)
		Expect(k8sClient.Create(ctx, tp)).To(Succeed())

		ready := eventuallyReady(tp, metav1.ConditionFalse)
		Expect(ready.Reason).To(Equal(mcpv1alpha1.ReasonInvalid))
		Expect(ready.Message).To(And(
			ContainSubstring("not in force"),
			ContainSubstring("2 errors"),
			ContainSubstring("spec.rules[1].when"),
			ContainSubstring("undeclared reference to 'argz'"),
			ContainSubstring("spec.rules[2].tools[0]"),
			ContainSubstring(`did you mean "mcp.fs.write_file"`),
		))
		Expect(tp.Status.ObservedGeneration).To(Equal(tp.Generation))
		invalidGeneration := tp.Generation

		By("fixing both rules")
		tp.Spec.Rules[1].When = "args.path.startsWith('/data/')"
		tp.Spec.Rules[2].Tools = []string{"mcp.fs.write_file"}
		Expect(k8sClient.Update(ctx, tp)).To(Succeed())
		Expect(tp.Generation).To(BeNumerically(">", invalidGeneration))
		ready = eventuallyReady(tp, metav1.ConditionTrue)
		Expect(ready.Reason).To(Equal(mcpv1alpha1.ReasonCompiled))
		Expect(ready.ObservedGeneration).To(Equal(tp.Generation))
	})

	It("follows the catalogs of the MCPServers in its namespace", func() {
		fs := newRemoteServer(ns, "fs")
		fsV2 := newRemoteServer(ns, "fs-v2")
		publishTools(fs, tool("fs", "read_file", mcpv1alpha1.RiskRead), tool("fs", "write_file", mcpv1alpha1.RiskWrite))
		publishTools(fsV2, tool("fs-v2", "read_file", mcpv1alpha1.RiskRead))
		// A server of the same name elsewhere is not governed by the policy.
		publishTools(newRemoteServer(otherNS, "fs"), tool("fs", "read_file", mcpv1alpha1.RiskRead))

		tp := newToolPolicy(ns, "fs-users",
			mcpv1alpha1.ToolRule{Tools: []string{"mcp.fs.*"}, Decision: mcpv1alpha1.DecisionAllow},
			mcpv1alpha1.ToolRule{Tools: []string{"mcp.**"}, Risks: []mcpv1alpha1.Risk{mcpv1alpha1.RiskDestructive}, Decision: mcpv1alpha1.DecisionDeny},
		)
		Expect(k8sClient.Create(ctx, tp)).To(Succeed())
		Eventually(policyMatches(tp)).WithTimeout(statusTimeout).Should(Equal(matches{servers: []string{"fs"}, tools: 2}))

		By("adding a tool to fs")
		publishTools(fs, tool("fs", "read_file", mcpv1alpha1.RiskRead), tool("fs", "write_file", mcpv1alpha1.RiskWrite), tool("fs", "list_dir", mcpv1alpha1.RiskRead))
		Eventually(policyMatches(tp)).WithTimeout(statusTimeout).Should(Equal(matches{servers: []string{"fs"}, tools: 3}))

		By("publishing a destructive tool on fs-v2, which the risk rule reaches")
		publishTools(fsV2, tool("fs-v2", "read_file", mcpv1alpha1.RiskRead), tool("fs-v2", "delete_tree", mcpv1alpha1.RiskDestructive))
		Eventually(policyMatches(tp)).WithTimeout(statusTimeout).Should(Equal(matches{servers: []string{"fs", "fs-v2"}, tools: 4}))

		By("withdrawing fs's catalog")
		publishTools(fs)
		Eventually(policyMatches(tp)).WithTimeout(statusTimeout).Should(Equal(matches{servers: []string{"fs-v2"}, tools: 1}))

		By("deleting fs-v2")
		Expect(k8sClient.Delete(ctx, fsV2)).To(Succeed())
		Eventually(policyMatches(tp)).WithTimeout(statusTimeout).Should(Equal(matches{tools: 0}))
		ready := eventuallyReady(tp, metav1.ConditionTrue)
		Expect(ready.Message).To(ContainSubstring("match 0 published tools of 0 servers"))
	})

	It("lists the lints' warnings in the Warnings condition, and clears them when the policy or the catalog is fixed", func() {
		fs := newRemoteServer(ns, "fs")
		read := tool("fs", "read_file", mcpv1alpha1.RiskRead)
		read.Arguments = []mcpv1alpha1.ToolArgument{{Name: "path", Holds: mcpv1alpha1.HoldsPath}}
		publishTools(fs, read)

		tp := newToolPolicy(ns, "public-files",
			mcpv1alpha1.ToolRule{Tools: []string{"mcp.fs.read_file"}, Decision: mcpv1alpha1.DecisionAllow, When: "args.path.startsWith('/data/public/')"},
			mcpv1alpha1.ToolRule{Tools: []string{"mcp.fs.*"}, Decision: mcpv1alpha1.DecisionAllow, Risks: []mcpv1alpha1.Risk{mcpv1alpha1.RiskRead, mcpv1alpha1.RiskDestructive}},
		)
		Expect(k8sClient.Create(ctx, tp)).To(Succeed())
		warnings := eventuallyWarnings(tp, metav1.ConditionTrue)
		Expect(warnings.Reason).To(Equal(mcpv1alpha1.ReasonHasWarnings))
		Expect(warnings.Message).To(And(
			ContainSubstring("in force, with 2 warnings"),
			ContainSubstring("spec.rules[0].when: args.path.startsWith('/data/public/') tests a raw path"),
			ContainSubstring("path.clean(args.path).startsWith('/data/public/')"),
			ContainSubstring("spec.rules[1]: decision allow with risks: [destructive] cannot allow"),
		))
		// A policy with warnings is in force all the same.
		Expect(eventuallyReady(tp, metav1.ConditionTrue).Reason).To(Equal(mcpv1alpha1.ReasonCompiled))

		By("writing the rules safely")
		tp.Spec.Rules[0].When = "path.clean(args.path).startsWith('/data/public/')"
		tp.Spec.Rules[1].Risks = []mcpv1alpha1.Risk{mcpv1alpha1.RiskRead}
		Expect(k8sClient.Update(ctx, tp)).To(Succeed())
		Expect(eventuallyWarnings(tp, metav1.ConditionFalse).Reason).To(Equal(mcpv1alpha1.ReasonNoWarnings))

		By("a catalog change the policy no longer fits: read_file renamed")
		renamed := tool("fs", "read", mcpv1alpha1.RiskRead)
		renamed.Arguments = read.Arguments
		publishTools(fs, renamed)
		warnings = eventuallyWarnings(tp, metav1.ConditionTrue)
		Expect(warnings.Message).To(ContainSubstring("spec.rules[0].tools: the rule matches no tool of the servers it names; they publish mcp.fs.read"))

		By("the catalog back as it was")
		publishTools(fs, read)
		eventuallyWarnings(tp, metav1.ConditionFalse)
	})

	It("writes the status once and then leaves it alone", func() {
		publishTools(newRemoteServer(ns, "fs"), tool("fs", "read_file", mcpv1alpha1.RiskRead))
		tp := newToolPolicy(ns, "quiet", mcpv1alpha1.ToolRule{Tools: []string{"mcp.fs.*"}, Decision: mcpv1alpha1.DecisionAllow})
		Expect(k8sClient.Create(ctx, tp)).To(Succeed())
		Eventually(policyMatches(tp)).WithTimeout(statusTimeout).Should(Equal(matches{servers: []string{"fs"}, tools: 1}))
		version := tp.ResourceVersion
		Consistently(func(g Gomega) string {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tp), tp)).To(Succeed())
			return tp.ResourceVersion
		}).WithTimeout(3*time.Second).Should(Equal(version), "the status was rewritten with nothing changed")
	})
})

// statusTimeout bounds the wait for the controller to write a status.
const statusTimeout = 30 * time.Second

func newToolPolicy(ns, name string, rules ...mcpv1alpha1.ToolRule) *mcpv1alpha1.ToolPolicy {
	return &mcpv1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: mcpv1alpha1.ToolPolicySpec{
			Subjects: []mcpv1alpha1.Subject{{Kind: mcpv1alpha1.SubjectServiceAccount, Namespace: "agents", Name: "agent"}},
			Rules:    rules,
		},
	}
}

// eventuallyReady waits until the policy's status describes its current
// generation with Ready at want, and returns that condition.
func eventuallyReady(tp *mcpv1alpha1.ToolPolicy, want metav1.ConditionStatus) *metav1.Condition {
	return eventuallyCondition(tp, mcpv1alpha1.ConditionReady, want)
}

// eventuallyWarnings is eventuallyReady for the Warnings condition.
func eventuallyWarnings(tp *mcpv1alpha1.ToolPolicy, want metav1.ConditionStatus) *metav1.Condition {
	return eventuallyCondition(tp, mcpv1alpha1.ConditionWarnings, want)
}

func eventuallyCondition(tp *mcpv1alpha1.ToolPolicy, conditionType string, want metav1.ConditionStatus) *metav1.Condition {
	var c *metav1.Condition
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tp), tp)).To(Succeed())
		g.Expect(tp.Status.ObservedGeneration).To(Equal(tp.Generation))
		c = meta.FindStatusCondition(tp.Status.Conditions, conditionType)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(want), "%s is %s: %s", conditionType, c.Status, c.Message)
	}).WithTimeout(statusTimeout).Should(Succeed())
	return c
}

type matches struct {
	servers []string
	tools   int32
}

func policyMatches(tp *mcpv1alpha1.ToolPolicy) func(Gomega) matches {
	return func(g Gomega) matches {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tp), tp)).To(Succeed())
		return matches{servers: tp.Status.MatchedServers, tools: tp.Status.ToolCount}
	}
}

// newRemoteServer creates a remote MCPServer: no MCPServer controller runs
// in this suite yet, and a remote one needs nothing else to be valid.
func newRemoteServer(ns, name string) *mcpv1alpha1.MCPServer {
	s := &mcpv1alpha1.MCPServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: mcpv1alpha1.MCPServerSpec{
			Transport: mcpv1alpha1.TransportStreamableHTTP,
			Remote:    &mcpv1alpha1.Remote{URL: "https://mcp.example.com/" + name},
		},
	}
	Expect(k8sClient.Create(ctx, s)).To(Succeed())
	return s
}

func tool(server, upstream string, risk mcpv1alpha1.Risk) mcpv1alpha1.ToolStatus {
	return mcpv1alpha1.ToolStatus{
		Name:         fmt.Sprintf("mcp.%s.%s", server, upstream),
		UpstreamName: upstream,
		Risk:         risk,
		SchemaDigest: "sha256:0000000000000000000000000000000000000000000000000000000000000000",
	}
}

// publishTools writes a catalog into the server's status, as the MCPServer
// controller will (through the status subresource).
func publishTools(s *mcpv1alpha1.MCPServer, tools ...mcpv1alpha1.ToolStatus) {
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
		s.Status.Tools = tools
		s.Status.ToolCount = int32(len(tools))
		g.Expect(k8sClient.Status().Update(ctx, s)).To(Succeed())
	}).WithTimeout(statusTimeout).Should(Succeed())
}
