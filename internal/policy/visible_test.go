package policy

import (
	"testing"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

func TestToolVisible(t *testing.T) {
	alice := ServiceAccount("agents", "alice")
	rule := func(d v1alpha1.Decision, when string, tools ...string) v1alpha1.ToolRule {
		return v1alpha1.ToolRule{Tools: tools, Decision: d, When: when}
	}
	policyOf := func(rules ...v1alpha1.ToolRule) v1alpha1.ToolPolicy {
		var tp v1alpha1.ToolPolicy
		tp.Namespace, tp.Name = "tools", "p"
		tp.Spec.Subjects = []v1alpha1.Subject{{Kind: v1alpha1.SubjectServiceAccount, Namespace: "agents", Name: "alice"}}
		tp.Spec.Rules = rules
		return tp
	}
	call := func(name string, risk v1alpha1.Risk) ToolCall {
		return ToolCall{Name: name, Server: "fs", Namespace: "tools", Risk: risk}
	}
	for _, tc := range []struct {
		name    string
		rules   []v1alpha1.ToolRule
		subject Subject
		call    ToolCall
		want    bool
	}{
		{"allowed", []v1alpha1.ToolRule{rule("allow", "", "mcp.fs.*")}, alice, call("mcp.fs.read", "read"), true},
		{"asked", []v1alpha1.ToolRule{rule("ask", "", "mcp.fs.*")}, alice, call("mcp.fs.read", "read"), true},
		{"no rule: denied by default", []v1alpha1.ToolRule{rule("allow", "", "mcp.fs.read")}, alice, call("mcp.fs.write", "write"), false},
		{"unconditional deny wins", []v1alpha1.ToolRule{rule("allow", "", "mcp.fs.*"), rule("deny", "", "mcp.fs.write")}, alice, call("mcp.fs.write", "write"), false},
		{"conditional deny hides nothing", []v1alpha1.ToolRule{rule("allow", "", "mcp.fs.*"), rule("deny", `args.path.startsWith("/etc")`, "mcp.fs.read")}, alice, call("mcp.fs.read", "read"), true},
		{"conditional allow shows", []v1alpha1.ToolRule{rule("allow", `args.path.startsWith("/data")`, "mcp.fs.read")}, alice, call("mcp.fs.read", "read"), true},
		{"conditional allow under an unconditional deny", []v1alpha1.ToolRule{rule("allow", `args.x == 1`, "mcp.fs.read"), rule("deny", "", "mcp.fs.*")}, alice, call("mcp.fs.read", "read"), false},
		{"destructive allowed is asked, so visible", []v1alpha1.ToolRule{rule("allow", "", "mcp.fs.*")}, alice, call("mcp.fs.delete", "destructive"), true},
		{"another subject sees nothing", []v1alpha1.ToolRule{rule("allow", "", "mcp.fs.*")}, ServiceAccount("agents", "bob"), call("mcp.fs.read", "read"), false},
		{"another namespace's server", []v1alpha1.ToolRule{rule("allow", "", "mcp.fs.*")}, alice, ToolCall{Name: "mcp.fs.read", Server: "fs", Namespace: "other", Risk: "read"}, false},
		{"malformed name", []v1alpha1.ToolRule{rule("allow", "", "mcp.fs.*")}, alice, call("fs.read", "read"), false},
		{"risk rule", []v1alpha1.ToolRule{{Risks: []v1alpha1.Risk{"read"}, Decision: "allow"}}, alice, call("mcp.fs.read", "read"), true},
		{"risk rule of another risk", []v1alpha1.ToolRule{{Risks: []v1alpha1.Risk{"read"}, Decision: "allow"}}, alice, call("mcp.fs.write", "write"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, errs := Compile([]v1alpha1.ToolPolicy{policyOf(tc.rules...)})
			if len(errs) > 0 {
				t.Fatalf("compile: %v", errs)
			}
			if got := e.ToolVisible(tc.subject, tc.call); got != tc.want {
				t.Fatalf("ToolVisible = %v, want %v", got, tc.want)
			}
			// Visible must never hide a tool that some arguments would be
			// allowed or asked for: check against DecideTool with no args
			// where no condition is involved.
			if d := e.DecideTool(tc.subject, tc.call).Decision; d != v1alpha1.DecisionDeny && !tc.want {
				t.Fatalf("DecideTool says %s but ToolVisible hides the tool", d)
			}
		})
	}
}
