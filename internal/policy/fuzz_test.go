package policy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/mcp/catalog"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

var fuzzDecisions = []v1alpha1.Decision{dAllow, dDeny, dAsk, "", "Allow"}
var fuzzRisks = []v1alpha1.Risk{v1alpha1.RiskRead, v1alpha1.RiskWrite, v1alpha1.RiskNetwork, v1alpha1.RiskDestructive, "", "odd"}

// FuzzDecideTool builds a policy from arbitrary globs, decisions, risks,
// conditions and subjects, and calls arbitrary tools with arbitrary JSON
// arguments. Nothing may panic, and a destructive tool is never allowed.
func FuzzDecideTool(f *testing.F) {
	f.Add("mcp.fs.*", uint8(0), uint8(0), "", "mcp.**", "fs", "read", []byte(`{"path":"/data"}`), "team", uint8(0))
	f.Add("mcp.**", uint8(0), uint8(8), "args.path.startsWith('/')", "mcp.fs.*", "fs", "rm", []byte(`{"path":"/"}`), "system:serviceaccounts", uint8(3))
	f.Add("mcp.*.x", uint8(2), uint8(15), "args.a.b.c == 1", "**", "s", "x", []byte(`{"a":{"b":{"c":1}}}`), "g", uint8(1))
	f.Add("mcp.fs.**", uint8(0), uint8(0), "tool.risk == 'destructive'", "mcp.fs.*", "fs", "a.b", []byte(`[1,2]`), "system:serviceaccounts:team", uint8(5))
	f.Add("fs.*", uint8(3), uint8(0), "args.items.all(x, args.items.all(y, x == y))", "mcp.f?.*", "fs", "rm", []byte(`{"items":[1,2,3,4,5,6,7,8,9,10]}`), "", uint8(3))
	f.Add("mcp.fs.*", uint8(0), uint8(0), "subject.groups.exists(g, g == 'x')", "mcp.fs.read", "fs", "read", []byte(`null`), "x", uint8(4))
	f.Fuzz(func(t *testing.T, glob string, decision, riskBits uint8, cond, glob2, server, tool string, argsJSON []byte, group string, risk uint8) {
		var rs []v1alpha1.Risk
		for i, r := range fuzzRisks {
			if riskBits&(1<<i) != 0 {
				rs = append(rs, r)
			}
		}
		policies := []v1alpha1.ToolPolicy{
			newPolicy("team", "fuzz", forSA("team", "agent"), forGroup(group),
				withToolRule(toolRule(fuzzDecisions[int(decision)%len(fuzzDecisions)], glob), risks(rs...), when(cond)),
				allow(glob2),
				withResource(v1alpha1.ResourceRule{Servers: []string{server}, URIs: []string{glob}, Decision: dAllow}),
				withPrompt(v1alpha1.PromptRule{Prompts: []string{glob2}, Decision: dAllow})),
			// A permissive policy that always compiles, so destructive calls
			// are tested against an allow even when the fuzzed one is invalid.
			newPolicy("team", "open", forSA("team", "agent"), allow("**"), withRateLimit(1000, 0)),
		}
		e, _ := Compile(policies)
		var args map[string]any
		_ = json.Unmarshal(argsJSON, &args) // invalid JSON: no arguments
		lintFuzzed(t, policies, server, tool, args)
		c := ToolCall{Name: "mcp." + server + "." + tool, Server: server, Namespace: "team",
			Risk: fuzzRisks[int(risk)%len(fuzzRisks)], Args: args}
		callers := []Subject{agent, User(group, group), SubjectFromUserInfo(group, []string{group})}
		for _, s := range callers {
			r := e.DecideTool(s, c)
			checkInvariants(t, r, c)
			destructive := c
			destructive.Risk = v1alpha1.RiskDestructive
			r = e.DecideTool(s, destructive)
			checkInvariants(t, r, destructive)
			if r.Decision == dAllow {
				t.Fatalf("destructive tool allowed: %+v", r)
			}
			g := NewSessionGrants()
			g.AllowSession(destructive.Name)
			if r = g.Apply(r); r.Decision == dAllow {
				t.Fatalf("destructive tool allowed by a session grant: %+v", r)
			}
			_ = NewRateLimiter(nil).Apply(s, r)
			checkInvariants(t, e.DecideResource(s, ResourceRead{Server: server, Namespace: "team", URI: tool}), ToolCall{})
			checkInvariants(t, e.DecidePrompt(s, PromptGet{Name: c.Name, Server: server, Namespace: "team"}), ToolCall{})
		}
	})
}

// lintFuzzed lints each policy that compiles, alone and against a catalog
// holding the fuzzed tool with the fuzzed arguments' names: no panic, and
// every warning names a tool rule of the policy.
func lintFuzzed(t *testing.T, policies []v1alpha1.ToolPolicy, server, tool string, args map[string]any) {
	t.Helper()
	st := v1alpha1.ToolStatus{Name: "mcp." + server + "." + tool, Risk: v1alpha1.RiskDestructive}
	for name := range args {
		st.Arguments = append(st.Arguments, v1alpha1.ToolArgument{Name: name, Holds: catalogHolds(name)})
	}
	for i := range policies {
		p, errs := CompilePolicy(&policies[i])
		if len(errs) > 0 {
			continue
		}
		for _, catalogs := range [][]Catalog{nil, {}, {{Server: server, Tools: []v1alpha1.ToolStatus{st}, Complete: true}}} {
			for _, w := range p.Lint(&policies[i].Spec, catalogs) {
				if w.Rule < 0 || w.Rule >= len(policies[i].Spec.Rules) || !strings.HasPrefix(w.Field, fmt.Sprintf("spec.rules[%d]", w.Rule)) || w.Message == "" {
					t.Fatalf("warning %+v names no tool rule of the policy", w)
				}
			}
		}
	}
}

func checkInvariants(t *testing.T, r Result, c ToolCall) {
	t.Helper()
	switch r.Decision {
	case dAllow, dDeny:
	case dAsk:
		if r.Approval == nil {
			t.Fatalf("ask without approval settings: %+v", r)
		}
	default:
		t.Fatalf("decision %q is none of allow, deny, ask", r.Decision)
	}
	if r.SourcedFrom == SourceDefault && r.Decision != dDeny {
		t.Fatalf("the default is not deny: %+v", r)
	}
	if r.SourcedFrom == "" || r.Reason == "" {
		t.Fatalf("a result without source or reason: %+v", r)
	}
	if c.Name != "" && r.RiskAtDecision != effectiveRisk(c.Risk) {
		t.Fatalf("riskAtDecision %q for a %q tool", r.RiskAtDecision, c.Risk)
	}
}

var catalogHolds = catalog.HoldsByName
