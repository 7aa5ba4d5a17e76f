package policy

import (
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

func blockRule(d v1alpha1.Decision, tools ...string) policyOption {
	return withToolRule(toolRule(d, tools...), onInjection(v1alpha1.InjectionBlock))
}

// TestDecideToolInjection: a call is marked to block injection when any rule
// that matched it says Block, whichever rule decided it; rules that did not
// match (another tool, another risk, a false condition, another subject's
// or namespace's policy) do not count.
func TestDecideToolInjection(t *testing.T) {
	read := call("fs", "read_file", v1alpha1.RiskRead, map[string]any{"path": "/data/a"})
	cases := []struct {
		name      string
		policies  []v1alpha1.ToolPolicy
		call      ToolCall
		decision  v1alpha1.Decision
		wantBlock bool
	}{
		{
			name:     "unset flags",
			policies: []v1alpha1.ToolPolicy{newPolicy("team", "p", forSA("team", "agent"), allow("mcp.fs.*"))},
			call:     read, decision: dAllow,
		},
		{
			name: "Flag flags",
			policies: []v1alpha1.ToolPolicy{newPolicy("team", "p", forSA("team", "agent"),
				withToolRule(toolRule(dAllow, "mcp.fs.*"), onInjection(v1alpha1.InjectionFlag)))},
			call: read, decision: dAllow,
		},
		{
			name:     "Block on the deciding rule blocks",
			policies: []v1alpha1.ToolPolicy{newPolicy("team", "p", forSA("team", "agent"), blockRule(dAllow, "mcp.fs.*"))},
			call:     read, decision: dAllow, wantBlock: true,
		},
		{
			name: "Block on a matching rule that did not decide blocks",
			policies: []v1alpha1.ToolPolicy{newPolicy("team", "p", forSA("team", "agent"),
				blockRule(dAllow, "mcp.fs.*"), ask("mcp.fs.read_file"))},
			call: read, decision: dAsk, wantBlock: true,
		},
		{
			name: "Block in another policy of the caller blocks",
			policies: []v1alpha1.ToolPolicy{
				newPolicy("team", "a", forSA("team", "agent"), allow("mcp.fs.*")),
				newPolicy("team", "b", forGroup("system:serviceaccounts:team"), blockRule(dAllow, "mcp.**")),
			},
			call: read, decision: dAllow, wantBlock: true,
		},
		{
			name: "Block in a policy for another subject does not count",
			policies: []v1alpha1.ToolPolicy{
				newPolicy("team", "a", forSA("team", "agent"), allow("mcp.fs.*")),
				newPolicy("team", "b", forSA("team", "other"), blockRule(dAllow, "mcp.fs.*")),
			},
			call: read, decision: dAllow,
		},
		{
			name: "Block in a policy of another namespace does not count",
			policies: []v1alpha1.ToolPolicy{
				newPolicy("team", "a", forSA("team", "agent"), allow("mcp.fs.*")),
				newPolicy("other", "b", forSA("team", "agent"), blockRule(dAllow, "mcp.fs.*")),
			},
			call: read, decision: dAllow,
		},
		{
			name: "Block on a rule for another tool does not count",
			policies: []v1alpha1.ToolPolicy{newPolicy("team", "p", forSA("team", "agent"),
				allow("mcp.fs.*"), blockRule(dAllow, "mcp.fs.write_file"))},
			call: read, decision: dAllow,
		},
		{
			name: "Block on a rule for another risk does not count",
			policies: []v1alpha1.ToolPolicy{newPolicy("team", "p", forSA("team", "agent"),
				allow("mcp.fs.*"), withToolRule(toolRule(dAllow), risks(v1alpha1.RiskNetwork), onInjection(v1alpha1.InjectionBlock)))},
			call: read, decision: dAllow,
		},
		{
			name: "Block on a rule whose condition holds blocks",
			policies: []v1alpha1.ToolPolicy{newPolicy("team", "p", forSA("team", "agent"),
				allow("mcp.fs.*"), withToolRule(toolRule(dAllow, "mcp.fs.*"), when("args.path.startsWith('/data/')"), onInjection(v1alpha1.InjectionBlock)))},
			call: read, decision: dAllow, wantBlock: true,
		},
		{
			name: "Block on a rule whose condition fails does not count",
			policies: []v1alpha1.ToolPolicy{newPolicy("team", "p", forSA("team", "agent"),
				allow("mcp.fs.*"), withToolRule(toolRule(dAllow, "mcp.fs.*"), when("args.path.startsWith('/etc/')"), onInjection(v1alpha1.InjectionBlock)))},
			call: read, decision: dAllow,
		},
		{
			name:     "a destructive tool asked about keeps Block",
			policies: []v1alpha1.ToolPolicy{newPolicy("team", "p", forSA("team", "agent"), blockRule(dAllow, "mcp.fs.*"))},
			call:     call("fs", "rm", v1alpha1.RiskDestructive, nil), decision: dAsk, wantBlock: true,
		},
		{
			name:     "no rule matching: denied, nothing to block",
			policies: []v1alpha1.ToolPolicy{newPolicy("team", "p", forSA("team", "agent"), blockRule(dAllow, "mcp.git.*"))},
			call:     read, decision: dDeny,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := mustEngine(t, c.policies...).DecideTool(agent, c.call)
			if got.Decision != c.decision || got.BlockInjection != c.wantBlock {
				t.Errorf("decision %s, BlockInjection %v; want %s, %v (reason %q)", got.Decision, got.BlockInjection, c.decision, c.wantBlock, got.Reason)
			}
		})
	}
}

// TestInjectionSurvivesGrantsAndLimits: a session grant turns ask into allow
// but keeps Block, and so does a rate limit with tokens left.
func TestInjectionSurvivesGrantsAndLimits(t *testing.T) {
	e := mustEngine(t, newPolicy("team", "p", forSA("team", "agent"), withRateLimit(10, 0),
		withToolRule(toolRule(dAsk, "mcp.fs.*"), onInjection(v1alpha1.InjectionBlock))))
	g := NewSessionGrants()
	g.AllowSession("mcp.fs.read_file")
	r := NewRateLimiter(nil).Apply(agent, g.Apply(e.DecideTool(agent, call("fs", "read_file", v1alpha1.RiskRead, nil))))
	if r.Decision != dAllow || r.SourcedFrom != SourceSessionAllow || !r.BlockInjection {
		t.Fatalf("decision %s from %s, BlockInjection %v; want allow from %s, true", r.Decision, r.SourcedFrom, r.BlockInjection, SourceSessionAllow)
	}
}

func TestDecidePromptInjection(t *testing.T) {
	e := mustEngine(t,
		newPolicy("team", "strict", forSA("team", "agent"),
			withPrompt(v1alpha1.PromptRule{Prompts: []string{"mcp.everything.*"}, Decision: dAllow}),
			withPrompt(v1alpha1.PromptRule{Prompts: []string{"mcp.everything.args_*"}, Decision: dAllow, Injection: v1alpha1.InjectionBlock}),
		),
		newPolicy("team", "shared", forGroup("devs"),
			withPrompt(v1alpha1.PromptRule{Prompts: []string{"mcp.**"}, Decision: dAllow, Injection: v1alpha1.InjectionFlag}),
			withPrompt(v1alpha1.PromptRule{Prompts: []string{"mcp.wiki.*"}, Decision: dAllow, Injection: v1alpha1.InjectionBlock}),
		),
	)
	cases := []struct {
		caller    Subject
		name      string
		wantBlock bool
	}{
		{agent, "mcp.everything.simple", false},
		{agent, "mcp.everything.args_prompt", true},
		{User("bob", "devs"), "mcp.everything.args_prompt", false},
		{User("bob", "devs"), "mcp.wiki.page", true},
		{User("bob", "devs"), "mcp.everything.simple", false},
	}
	for _, c := range cases {
		server, _, _ := strings.Cut(strings.TrimPrefix(c.name, "mcp."), ".")
		got := e.DecidePrompt(c.caller, PromptGet{Name: c.name, Server: server, Namespace: "team"})
		if got.Decision != dAllow || got.BlockInjection != c.wantBlock {
			t.Errorf("%s by %s: %s, BlockInjection %v; want allow, %v", c.name, c.caller.Name, got.Decision, got.BlockInjection, c.wantBlock)
		}
	}
}
