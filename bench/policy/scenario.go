package main

import (
	"fmt"
	"math/rand/v2"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/policy"
)

// The scenario: 1,000 rules across 100 policies, 5,000 catalog
// tools. All in one namespace, so the namespace does not thin anything out.
const (
	namespace       = "bench"
	callerNamespace = "agents"
	policyCount     = 100
	rulesPerPolicy  = 10
	serverCount     = 50
	toolsPerServer  = 100
	// groupPolicies apply to every ServiceAccount of callerNamespace; the
	// rest each name one ServiceAccount. So a caller has 11 policies.
	groupPolicies = 10
)

var riskCycle = []v1alpha1.Risk{v1alpha1.RiskRead, v1alpha1.RiskWrite, v1alpha1.RiskNetwork, v1alpha1.RiskDestructive}

type catalogTool struct {
	server, name string
	risk         v1alpha1.Risk
}

// catalog is serverCount servers of toolsPerServer tools each. One tool in
// ten of each server is a drop_ tool, the target of the deny rules.
func catalog() []catalogTool {
	var tools []catalogTool
	for s := range serverCount {
		server := fmt.Sprintf("srv-%02d", s)
		for i := range toolsPerServer {
			upstream := fmt.Sprintf("tool_%03d", i)
			if i%10 == 9 {
				upstream = fmt.Sprintf("drop_%03d", i)
			}
			tools = append(tools, catalogTool{server: server, name: "mcp." + server + "." + upstream, risk: riskCycle[i%len(riskCycle)]})
		}
	}
	return tools
}

// policies builds the rule set: a mix of exact names, per-server globs,
// cross-server globs, risk-only rules and deny rules. With withCondition,
// the first group policy's first rule gets a `when`, and it matches every
// call the benchmark makes.
func policies(rng *rand.Rand, withCondition bool) []v1alpha1.ToolPolicy {
	out := make([]v1alpha1.ToolPolicy, 0, policyCount)
	for p := range policyCount {
		tp := v1alpha1.ToolPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("policy-%03d", p)}}
		if p < groupPolicies {
			tp.Spec.Subjects = []v1alpha1.Subject{{Kind: v1alpha1.SubjectGroup, Name: "system:serviceaccounts:" + callerNamespace}}
		} else {
			tp.Spec.Subjects = []v1alpha1.Subject{
				{Kind: v1alpha1.SubjectServiceAccount, Namespace: callerNamespace, Name: fmt.Sprintf("agent-%03d", p)},
				{Kind: v1alpha1.SubjectUser, Name: fmt.Sprintf("user-%03d", p)},
			}
		}
		for r := range rulesPerPolicy {
			tp.Spec.Rules = append(tp.Spec.Rules, randomRule(rng, r))
		}
		if p == 0 {
			tp.Spec.Rules[0] = v1alpha1.ToolRule{Tools: []string{"mcp.**"}, Decision: v1alpha1.DecisionAllow}
			if withCondition {
				tp.Spec.Rules[0].When = "args.path.startsWith('/data/') && args.options.depth <= 3"
			}
		}
		out = append(out, tp)
	}
	return out
}

func randomRule(rng *rand.Rand, i int) v1alpha1.ToolRule {
	server := func() string { return fmt.Sprintf("srv-%02d", rng.IntN(serverCount)) }
	decisions := []v1alpha1.Decision{v1alpha1.DecisionAllow, v1alpha1.DecisionAllow, v1alpha1.DecisionAsk}
	d := decisions[rng.IntN(len(decisions))]
	switch i % 5 {
	case 0: // a few exact tools
		return v1alpha1.ToolRule{Decision: d, Tools: []string{
			fmt.Sprintf("mcp.%s.tool_%03d", server(), rng.IntN(toolsPerServer)),
			fmt.Sprintf("mcp.%s.tool_%03d", server(), rng.IntN(toolsPerServer)),
		}}
	case 1: // a whole server
		return v1alpha1.ToolRule{Decision: d, Tools: []string{"mcp." + server() + ".*"}}
	case 2: // a name pattern on every server
		return v1alpha1.ToolRule{Decision: d, Tools: []string{fmt.Sprintf("mcp.*.tool_%d*", rng.IntN(10))}}
	case 3: // by risk only
		return v1alpha1.ToolRule{Decision: d, Risks: []v1alpha1.Risk{riskCycle[rng.IntN(len(riskCycle))]}}
	default: // deny the drop_ tools of a server
		return v1alpha1.ToolRule{Decision: v1alpha1.DecisionDeny, Tools: []string{"mcp." + server() + ".drop_*"}}
	}
}

type sample struct {
	subject policy.Subject
	call    policy.ToolCall
}

// samples are calls of random callers to random tools that no deny rule
// matches, so a condition, when there is one, runs on every call.
func samples(rng *rand.Rand, tools []catalogTool, n int) []sample {
	args := map[string]any{"path": "/data/reports/q3.csv", "options": map[string]any{"depth": float64(2)}}
	out := make([]sample, 0, n)
	for len(out) < n {
		t := tools[rng.IntN(len(tools))]
		if len(t.name) > len("mcp.srv-00.drop_") && t.name[len("mcp.srv-00."):][:5] == "drop_" {
			continue
		}
		caller := policy.ServiceAccount(callerNamespace, fmt.Sprintf("agent-%03d", groupPolicies+rng.IntN(policyCount-groupPolicies)),
			"system:serviceaccounts", "system:serviceaccounts:"+callerNamespace, "system:authenticated")
		out = append(out, sample{subject: caller, call: policy.ToolCall{
			Name: t.name, Server: t.server, Namespace: namespace, Risk: t.risk, Args: args,
		}})
	}
	return out
}
