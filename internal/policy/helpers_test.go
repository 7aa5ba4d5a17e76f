package policy

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// Fixtures built with small functional options, so each table row says only
// what matters to it.

type policyOption func(*v1alpha1.ToolPolicy)

func newPolicy(namespace, name string, opts ...policyOption) v1alpha1.ToolPolicy {
	p := v1alpha1.ToolPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func forSA(namespace, name string) policyOption {
	return forSubject(v1alpha1.Subject{Kind: v1alpha1.SubjectServiceAccount, Namespace: namespace, Name: name})
}

func forUser(name string) policyOption {
	return forSubject(v1alpha1.Subject{Kind: v1alpha1.SubjectUser, Name: name})
}

func forGroup(name string) policyOption {
	return forSubject(v1alpha1.Subject{Kind: v1alpha1.SubjectGroup, Name: name})
}

func forSubject(s v1alpha1.Subject) policyOption {
	return func(p *v1alpha1.ToolPolicy) { p.Spec.Subjects = append(p.Spec.Subjects, s) }
}

func withRule(r v1alpha1.ToolRule) policyOption {
	return func(p *v1alpha1.ToolPolicy) { p.Spec.Rules = append(p.Spec.Rules, r) }
}

func withResource(r v1alpha1.ResourceRule) policyOption {
	return func(p *v1alpha1.ToolPolicy) { p.Spec.Resources = append(p.Spec.Resources, r) }
}

func withPrompt(r v1alpha1.PromptRule) policyOption {
	return func(p *v1alpha1.ToolPolicy) { p.Spec.Prompts = append(p.Spec.Prompts, r) }
}

func withRateLimit(perMinute, burst int32) policyOption {
	return func(p *v1alpha1.ToolPolicy) {
		p.Spec.RateLimit = &v1alpha1.RateLimit{CallsPerMinute: perMinute, Burst: burst}
	}
}

func withModes(modes ...v1alpha1.ApprovalMode) policyOption {
	return func(p *v1alpha1.ToolPolicy) { p.Spec.Approval.Modes = modes }
}

func withChannels(channels ...v1alpha1.ApprovalChannel) policyOption {
	return func(p *v1alpha1.ToolPolicy) { p.Spec.Approval.Channels = channels }
}

type ruleOption func(*v1alpha1.ToolRule)

func toolRule(d v1alpha1.Decision, tools ...string) ruleOption {
	return func(r *v1alpha1.ToolRule) { r.Decision, r.Tools = d, tools }
}

func risks(rs ...v1alpha1.Risk) ruleOption {
	return func(r *v1alpha1.ToolRule) { r.Risks = rs }
}

func when(expr string) ruleOption {
	return func(r *v1alpha1.ToolRule) { r.When = expr }
}

func reason(s string) ruleOption {
	return func(r *v1alpha1.ToolRule) { r.Reason = s }
}

func onInjection(a v1alpha1.InjectionAction) ruleOption {
	return func(r *v1alpha1.ToolRule) { r.Injection = a }
}

func withToolRule(opts ...ruleOption) policyOption {
	var r v1alpha1.ToolRule
	for _, o := range opts {
		o(&r)
	}
	return withRule(r)
}

func allow(tools ...string) policyOption {
	return withToolRule(toolRule(v1alpha1.DecisionAllow, tools...))
}
func deny(tools ...string) policyOption {
	return withToolRule(toolRule(v1alpha1.DecisionDeny, tools...))
}
func ask(tools ...string) policyOption { return withToolRule(toolRule(v1alpha1.DecisionAsk, tools...)) }

// call is a call of mcp.<server>.<tool> in namespace "team".
func call(server, tool string, risk v1alpha1.Risk, args map[string]any) ToolCall {
	return ToolCall{Name: "mcp." + server + "." + tool, Server: server, Namespace: "team", Risk: risk, Args: args}
}

// mustEngine compiles policies that must compile.
func mustEngine(t testing.TB, policies ...v1alpha1.ToolPolicy) *Engine {
	t.Helper()
	e, errs := Compile(policies)
	if len(errs) > 0 {
		t.Fatalf("policies did not compile: %v", errs)
	}
	return e
}

var agent = ServiceAccount("team", "agent")
