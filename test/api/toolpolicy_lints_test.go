package api_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

var _ = Describe("the ToolPolicy lints admission policy", func() {
	// apply writes a ToolPolicy as kubectl apply would and returns the
	// warnings the API server answered with that name the lints policy.
	var apply func(name, spec string) []string

	BeforeEach(func() {
		c, warnings, err := testenv.ClientWithWarnings(cfg)
		Expect(err).NotTo(HaveOccurred())
		apply = func(name, spec string) []string {
			GinkgoHelper()
			u := object("ToolPolicy", name, spec)
			existing := u.DeepCopy()
			if err := c.Get(ctx, client.ObjectKeyFromObject(u), existing); err == nil {
				u.SetResourceVersion(existing.GetResourceVersion())
				Expect(c.Update(ctx, u, client.FieldValidation("Strict"))).To(Succeed(), "a policy with warnings is stored all the same")
			} else {
				Expect(c.Create(ctx, u, client.FieldValidation("Strict"))).To(Succeed(), "a policy with warnings is stored all the same")
			}
			var ours []string
			for _, w := range warnings.Take() {
				if strings.Contains(w, testenv.ToolPolicyLintsPolicy) {
					ours = append(ours, w)
				}
			}
			return ours
		}
	})

	It("warns about a prefix test on a raw path or URL, saying how to write it", func() {
		name := uniqueName("raw-path")
		ws := apply(name, `
subjects: [{kind: User, name: alice}]
rules:
  - tools: ["mcp.fs.read_file"]
    decision: allow
    when: "args.path.startsWith('/data/public/')"
  - tools: ["mcp.web.fetch"]
    decision: allow
    when: "args['targetUrl'].startsWith('https://example.com')"
`)
		Expect(ws).To(HaveLen(1))
		Expect(ws[0]).To(And(
			HavePrefix("Validation failed for ValidatingAdmissionPolicy 'mcp-operator-toolpolicy-lints' with binding 'mcp-operator-toolpolicy-lints': a prefix or suffix test"),
			ContainSubstring("/data/public/../secret/key.txt passes startsWith('/data/public/')"),
			ContainSubstring("path.clean(args.path).startsWith('/data/public/')"),
			ContainSubstring("uri.canonical(args.url).startsWith('https://example.com/')"),
			HaveSuffix("In spec.rules[0], spec.rules[1]"),
		))

		By("rewriting it safely, the warning goes")
		Expect(apply(name, `
subjects: [{kind: User, name: alice}]
rules:
  - tools: ["mcp.fs.read_file"]
    decision: allow
    when: "path.clean(args.path).startsWith('/data/public/') && args.profile.startsWith('x')"
`)).To(BeEmpty())
	})

	It("names the rules of a multi-line condition by index, in a message of one line", func() {
		// The API server drops a message with a line break and falls back
		// on the static one, which names no rule.
		ws := apply(uniqueName("multi-line"), `
subjects: [{kind: User, name: alice}]
rules:
  - tools: ["mcp.fs.list"]
    decision: allow
  - tools: ["mcp.fs.read_file"]
    decision: allow
    when: |
      has(args.path) &&
        args.path
          .startsWith('/data/public/')
`)
		Expect(ws).To(HaveLen(1))
		Expect(ws[0]).To(And(ContainSubstring("path.clean(args.path)"), HaveSuffix("In spec.rules[1]"), Not(ContainSubstring("\n"))))
	})

	It("names at most 20 rules, however many there are", func() {
		var spec strings.Builder
		spec.WriteString("subjects: [{kind: User, name: alice}]\nrules:\n")
		for range 30 {
			spec.WriteString("  - {tools: [\"mcp.fs.*\"], decision: allow, risks: [destructive]}\n")
		}
		ws := apply(uniqueName("many"), spec.String())
		Expect(ws).To(HaveLen(1))
		Expect(ws[0]).To(HaveSuffix("In spec.rules[0], spec.rules[1], spec.rules[2], spec.rules[3], spec.rules[4], spec.rules[5], spec.rules[6], spec.rules[7], spec.rules[8], spec.rules[9], spec.rules[10], spec.rules[11], spec.rules[12], spec.rules[13], spec.rules[14], spec.rules[15], spec.rules[16], spec.rules[17], spec.rules[18], spec.rules[19] and 10 more"))
	})

	It("stores a policy past the CEL cost limit, warning that the lints could not run", func() {
		// failurePolicy Fail with a binding that only warns: the
		// evaluation error is a warning, not a rejection.
		cond := "args.a == '" + strings.Repeat("x", 2000) + "' && args.path.startsWith('/data/')"
		var spec strings.Builder
		spec.WriteString("subjects: [{kind: User, name: alice}]\nrules:\n")
		for range 500 {
			spec.WriteString("  - {tools: [\"mcp.fs.*\"], decision: deny, when: \"" + cond + "\"}\n")
		}
		ws := apply(uniqueName("costly"), spec.String())
		Expect(ws).To(HaveLen(1))
		Expect(ws[0]).To(ContainSubstring("cost limit exceeded"))
	})

	It("warns about an allow of risk destructive on update too", func() {
		name := uniqueName("allow-destructive")
		Expect(apply(name, `
subjects: [{kind: User, name: alice}]
rules: [{tools: ["mcp.fs.*"], decision: allow, risks: [read]}]
`)).To(BeEmpty())
		ws := apply(name, `
subjects: [{kind: User, name: alice}]
rules: [{tools: ["mcp.fs.*"], decision: allow, risks: [read, destructive]}]
`)
		Expect(ws).To(HaveLen(1))
		Expect(ws[0]).To(And(
			ContainSubstring("decision allow with risks: [destructive] cannot allow"),
			HaveSuffix("In spec.rules[0]"),
		))
	})

	It("shows the Warnings condition in kubectl get", func() {
		name := uniqueName("columns")
		Expect(apply(name, `
subjects: [{kind: User, name: alice}]
rules: [{tools: ["mcp.fs.*"], decision: allow}]
`)).To(BeEmpty())
		var tp mcpv1alpha1.ToolPolicy
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &tp)).To(Succeed())
		tp.Status.Conditions = []metav1.Condition{
			{Type: mcpv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: mcpv1alpha1.ReasonCompiled, Message: "in force", LastTransitionTime: metav1.Now()},
			{Type: mcpv1alpha1.ConditionWarnings, Status: metav1.ConditionTrue, Reason: mcpv1alpha1.ReasonHasWarnings, Message: "spec.rules[0]: …", LastTransitionTime: metav1.Now()},
		}
		tp.Status.ToolCount = 3
		Expect(k8sClient.Status().Update(ctx, &tp)).To(Succeed())
		table := getTable("toolpolicies", name)
		Expect(table.columns).To(Equal([]string{"Name", "Ready", "Warnings", "Tools", "Age"}))
		// Cells hold every column, the wide ones too (Servers, none here).
		Expect(table.row[:5]).To(Equal([]any{name, "True", "True", nil, float64(3)}))
	})
})
