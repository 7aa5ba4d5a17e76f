package policy

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

func withSkill(d v1alpha1.Decision, globs ...string) policyOption {
	return func(p *v1alpha1.ToolPolicy) {
		p.Spec.Skills = append(p.Spec.Skills, v1alpha1.SkillRule{Skills: globs, Decision: d})
	}
}

// TestDecideSkill: skill rules match namespaced skill names (a skill path's
// '/' written '.') with the name globs of tools; deny wins; no match, or a
// tool or prompt rule matching the same name, denies.
func TestDecideSkill(t *testing.T) {
	e := mustEngine(t, newPolicy("team", "p", forGroup("devs"),
		withSkill(dAllow, "mcp.billing.acme.**"),
		withSkill(dDeny, "mcp.billing.acme.billing.internal-*"),
		withSkill(dAllow, "mcp.*.git-workflow"),
		allow("mcp.tools.deploy"),
		withPrompt(v1alpha1.PromptRule{Prompts: []string{"mcp.prompts.deploy"}, Decision: dAllow}),
	))
	dev := User("bob", "devs")
	cases := []struct {
		caller Subject
		name   string
		want   v1alpha1.Decision
		source string
	}{
		{dev, "mcp.billing.acme.billing.refunds", dAllow, "policy:team/p#skills[0]"},
		{dev, "mcp.billing.acme.billing.internal-audit", dDeny, "policy:team/p#skills[1]"},
		{dev, "mcp.ops.git-workflow", dAllow, "policy:team/p#skills[2]"},
		{dev, "mcp.ops.acme.git-workflow", dDeny, SourceDefault}, // '*' does not cross '.'
		{dev, "mcp.billing.other", dDeny, SourceDefault},
		{dev, "mcp.tools.deploy", dDeny, SourceDefault},   // a tool rule is not a skill rule
		{dev, "mcp.prompts.deploy", dDeny, SourceDefault}, // nor is a prompt rule
		{User("eve"), "mcp.billing.acme.billing.refunds", dDeny, SourceDefault},
	}
	for _, c := range cases {
		server, _, _ := strings.Cut(strings.TrimPrefix(c.name, "mcp."), ".")
		got := e.DecideSkill(c.caller, SkillGet{Name: c.name, Server: server, Namespace: "team"})
		if got.Decision != c.want || got.SourcedFrom != c.source {
			t.Errorf("%s by %s: %s from %s (%s), want %s from %s", c.name, c.caller.Name, got.Decision, got.SourcedFrom, got.Reason, c.want, c.source)
		}
	}
	if got := e.DecideSkill(dev, SkillGet{Name: "mcp.ops.git-workflow", Server: "billing", Namespace: "team"}); got.Decision != dDeny || !strings.Contains(got.Reason, "malformed") {
		t.Errorf("a name of another server: %s (%s), want a malformed-request deny", got.Decision, got.Reason)
	}
}

func TestCompileSkillRules(t *testing.T) {
	sa := forSA("team", "agent")
	cases := []struct {
		name   string
		policy v1alpha1.ToolPolicy
		field  string
		want   string
	}{
		{"ask", newPolicy("team", "p", sa, withSkill(dAsk, "mcp.**")), "spec.skills[0].decision", "allow or deny, not ask"},
		{"no globs", newPolicy("team", "p", sa, withSkill(dAllow)), "spec.skills[0].skills", "at least one skill glob"},
		{"glob without prefix", newPolicy("team", "p", sa, withSkill(dAllow, "billing.*")), "spec.skills[0].skills[0]", "skill names are namespaced"},
		{"slash in a glob", newPolicy("team", "p", sa, withSkill(dAllow, "mcp.billing.acme/refunds")), "spec.skills[0].skills[0]", "no MCP name can contain"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errs := CompilePolicy(&c.policy)
			for _, err := range errs {
				if err.Field == c.field && strings.Contains(err.Message, c.want) {
					return
				}
			}
			t.Errorf("errors %v, want one at %s saying %q", errs, c.field, c.want)
		})
	}
	if _, errs := CompilePolicy(ptr.To(newPolicy("team", "p", sa, withSkill(dAllow, "mcp.billing.**")))); len(errs) != 0 {
		t.Errorf("a policy of skill rules alone: %v", errs)
	}
}
