package policy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

const (
	dAllow = v1alpha1.DecisionAllow
	dDeny  = v1alpha1.DecisionDeny
	dAsk   = v1alpha1.DecisionAsk
)

func TestDecideToolPrecedence(t *testing.T) {
	read := call("fs", "read_file", v1alpha1.RiskRead, nil)
	cases := []struct {
		name     string
		policies []v1alpha1.ToolPolicy
		call     ToolCall
		want     v1alpha1.Decision
		source   string
		rules    []string
		reason   string
	}{
		{
			name: "no policy denies by default",
			call: read, want: dDeny, source: SourceDefault, reason: "denied by default",
		},
		{
			name:     "a policy whose rules do not match denies by default",
			policies: []v1alpha1.ToolPolicy{newPolicy("team", "p", forSA("team", "agent"), allow("mcp.git.*"))},
			call:     read, want: dDeny, source: SourceDefault,
		},
		{
			name:     "allow",
			policies: []v1alpha1.ToolPolicy{newPolicy("team", "p", forSA("team", "agent"), allow("mcp.fs.*"))},
			call:     read, want: dAllow, source: "policy:team/p#rules[0]", rules: []string{"policy:team/p#rules[0]"},
			reason: "allowed by policy:team/p#rules[0]",
		},
		{
			name: "deny beats allow in one policy",
			policies: []v1alpha1.ToolPolicy{newPolicy("team", "p", forSA("team", "agent"),
				allow("mcp.fs.*"), withToolRule(toolRule(dDeny, "mcp.fs.read_file"), reason("reads are off today")))},
			call: read, want: dDeny, source: "policy:team/p#rules[1]", reason: "reads are off today",
		},
		{
			name: "deny beats allow across policies",
			policies: []v1alpha1.ToolPolicy{
				newPolicy("team", "a", forSA("team", "agent"), allow("mcp.fs.*")),
				newPolicy("team", "b", forGroup("system:serviceaccounts:team"), deny("mcp.**")),
			},
			call: read, want: dDeny, source: "policy:team/b#rules[0]",
		},
		{
			name: "ask beats allow",
			policies: []v1alpha1.ToolPolicy{newPolicy("team", "p", forSA("team", "agent"),
				allow("mcp.fs.*"), ask("mcp.fs.read_file"))},
			call: read, want: dAsk, source: "policy:team/p#rules[1]",
		},
		{
			name: "deny beats ask",
			policies: []v1alpha1.ToolPolicy{newPolicy("team", "p", forSA("team", "agent"),
				deny("mcp.fs.read_file"), ask("mcp.fs.*"))},
			call: read, want: dDeny, source: "policy:team/p#rules[0]",
		},
		{
			name: "every rule with the winning decision is listed, in order",
			policies: []v1alpha1.ToolPolicy{
				newPolicy("team", "b", forSA("team", "agent"), allow("mcp.**"), allow("mcp.fs.read_file")),
				newPolicy("team", "a", forUser("system:serviceaccount:team:agent"), allow("mcp.*.read_file")),
			},
			call: read, want: dAllow, source: "policy:team/a#rules[0]",
			rules: []string{"policy:team/a#rules[0]", "policy:team/b#rules[0]", "policy:team/b#rules[1]"},
		},
		{
			name: "a rule with globs on two servers is listed once",
			policies: []v1alpha1.ToolPolicy{newPolicy("team", "p", forSA("team", "agent"),
				allow("mcp.fs.read_file", "mcp.*.read_file"))},
			call: read, want: dAllow, rules: []string{"policy:team/p#rules[0]"},
		},
		{
			name: "risks-only rule matches by risk",
			policies: []v1alpha1.ToolPolicy{newPolicy("team", "p", forSA("team", "agent"),
				withToolRule(toolRule(dAllow), risks(v1alpha1.RiskRead)))},
			call: read, want: dAllow,
		},
		{
			name: "risks-only rule leaves other risks alone",
			policies: []v1alpha1.ToolPolicy{newPolicy("team", "p", forSA("team", "agent"),
				withToolRule(toolRule(dAllow), risks(v1alpha1.RiskRead)))},
			call: call("fs", "write_file", v1alpha1.RiskWrite, nil), want: dDeny, source: SourceDefault,
		},
		{
			name: "tools and risks must both match",
			policies: []v1alpha1.ToolPolicy{newPolicy("team", "p", forSA("team", "agent"),
				withToolRule(toolRule(dAllow, "mcp.fs.*"), risks(v1alpha1.RiskRead)))},
			call: call("fs", "write_file", v1alpha1.RiskWrite, nil), want: dDeny, source: SourceDefault,
		},
		{
			name: "a missing risk is network",
			policies: []v1alpha1.ToolPolicy{newPolicy("team", "p", forSA("team", "agent"),
				withToolRule(toolRule(dAllow), risks(v1alpha1.RiskNetwork)))},
			call: call("web", "fetch", "", nil), want: dAllow,
		},
		{
			name:     "a policy governs only the servers of its own namespace",
			policies: []v1alpha1.ToolPolicy{newPolicy("other", "p", forSA("team", "agent"), allow("mcp.**"))},
			call:     read, want: dDeny, source: SourceDefault,
		},
		{
			name:     "a malformed name is denied",
			policies: []v1alpha1.ToolPolicy{newPolicy("team", "p", forSA("team", "agent"), allow("mcp.**"))},
			call:     ToolCall{Name: "mcp.fs-v2.read_file", Server: "fs", Namespace: "team"}, want: dDeny,
			source: SourceDefault, reason: "malformed request",
		},
		{
			name:     "a server name with a dot is malformed",
			policies: []v1alpha1.ToolPolicy{newPolicy("team", "p", forSA("team", "agent"), allow("mcp.*.b.read"))},
			call:     ToolCall{Name: "mcp.a.b.read", Server: "a.b", Namespace: "team"}, want: dDeny,
			source: SourceDefault, reason: "malformed request",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := mustEngine(t, c.policies...)
			got := e.DecideTool(agent, c.call)
			checkResult(t, got, c.want, c.source, c.rules, c.reason)
		})
	}
}

func checkResult(t *testing.T, got Result, want v1alpha1.Decision, source string, rules []string, reason string) {
	t.Helper()
	if got.Decision != want {
		t.Errorf("decision = %s, want %s (reason %q)", got.Decision, want, got.Reason)
	}
	if source != "" && got.SourcedFrom != source {
		t.Errorf("sourcedFrom = %q, want %q", got.SourcedFrom, source)
	}
	if rules != nil {
		var names []string
		for _, r := range got.Rules {
			names = append(names, r.String())
		}
		if strings.Join(names, " ") != strings.Join(rules, " ") {
			t.Errorf("rules = %v, want %v", names, rules)
		}
	}
	if reason != "" && !strings.Contains(got.Reason, reason) {
		t.Errorf("reason = %q, want it to contain %q", got.Reason, reason)
	}
}

func TestDecideToolDestructive(t *testing.T) {
	destroy := call("fs", "delete_tree", v1alpha1.RiskDestructive, nil)
	cases := []struct {
		name   string
		policy v1alpha1.ToolPolicy
		call   ToolCall
		want   v1alpha1.Decision
		modes  []v1alpha1.ApprovalMode
	}{
		{
			name:   "allow is capped at ask, with allow-once only",
			policy: newPolicy("team", "p", forSA("team", "agent"), allow("mcp.**")),
			call:   destroy, want: dAsk, modes: []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowOnce},
		},
		{
			name:   "ask stays ask, without allow-for-session",
			policy: newPolicy("team", "p", forSA("team", "agent"), ask("mcp.**")),
			call:   destroy, want: dAsk, modes: []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowOnce},
		},
		{
			name:   "deny stays deny",
			policy: newPolicy("team", "p", forSA("team", "agent"), allow("mcp.**"), deny("mcp.fs.delete_*")),
			call:   destroy, want: dDeny,
		},
		{
			name:   "no rule denies",
			policy: newPolicy("team", "p", forSA("team", "agent"), allow("mcp.git.*")),
			call:   destroy, want: dDeny,
		},
		{
			name: "a rule on the destructive risk itself still only asks",
			policy: newPolicy("team", "p", forSA("team", "agent"),
				withToolRule(toolRule(dAllow), risks(v1alpha1.RiskDestructive))),
			call: destroy, want: dAsk, modes: []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowOnce},
		},
		{
			name:   "an unknown risk counts as destructive",
			policy: newPolicy("team", "p", forSA("team", "agent"), allow("mcp.**")),
			call:   call("fs", "odd", "catastrophic", nil), want: dAsk, modes: []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowOnce},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := mustEngine(t, c.policy).DecideTool(agent, c.call)
			checkResult(t, got, c.want, "", nil, "")
			if got.RiskAtDecision != v1alpha1.RiskDestructive {
				t.Errorf("riskAtDecision = %q, want destructive", got.RiskAtDecision)
			}
			if c.want == dAsk {
				if got.Approval == nil || len(got.Approval.Modes) != len(c.modes) || (len(c.modes) > 0 && got.Approval.Modes[0] != c.modes[0]) {
					t.Errorf("approval = %+v, want modes %v", got.Approval, c.modes)
				}
			}
		})
	}
}

func TestDecideToolSubjects(t *testing.T) {
	read := call("fs", "read_file", v1alpha1.RiskRead, nil)
	cases := []struct {
		name    string
		subject v1alpha1.Subject
		caller  Subject
		want    v1alpha1.Decision
	}{
		{"ServiceAccount matches itself", sub(v1alpha1.SubjectServiceAccount, "team", "agent"), ServiceAccount("team", "agent"), dAllow},
		{"ServiceAccount of another namespace does not match", sub(v1alpha1.SubjectServiceAccount, "team", "agent"), ServiceAccount("other", "agent"), dDeny},
		{"ServiceAccount of another name does not match", sub(v1alpha1.SubjectServiceAccount, "team", "agent"), ServiceAccount("team", "agent2"), dDeny},
		{"ServiceAccount subject matches the SA's user name", sub(v1alpha1.SubjectServiceAccount, "team", "agent"), SubjectFromUserInfo("system:serviceaccount:team:agent", nil), dAllow},
		{"User subject with an SA user name matches the SA", sub(v1alpha1.SubjectUser, "", "system:serviceaccount:team:agent"), ServiceAccount("team", "agent"), dAllow},
		{"User matches", sub(v1alpha1.SubjectUser, "", "alice"), User("alice"), dAllow},
		{"User is case-sensitive", sub(v1alpha1.SubjectUser, "", "alice"), User("Alice"), dDeny},
		{"User does not match a group of that name", sub(v1alpha1.SubjectUser, "", "devs"), User("bob", "devs"), dDeny},
		{"Group matches a member", sub(v1alpha1.SubjectGroup, "", "devs"), User("bob", "devs"), dAllow},
		{"Group does not match a non-member", sub(v1alpha1.SubjectGroup, "", "devs"), User("bob", "ops"), dDeny},
		{"Group does not match a user of that name", sub(v1alpha1.SubjectGroup, "", "devs"), User("devs"), dDeny},
		{"namespace's SA group matches its SAs without listed groups", sub(v1alpha1.SubjectGroup, "", "system:serviceaccounts:team"), ServiceAccount("team", "any"), dAllow},
		{"namespace's SA group matches listed groups", sub(v1alpha1.SubjectGroup, "", "system:serviceaccounts:team"), User("x", "system:serviceaccounts:team"), dAllow},
		{"namespace's SA group does not match other namespaces", sub(v1alpha1.SubjectGroup, "", "system:serviceaccounts:team"), ServiceAccount("other", "agent"), dDeny},
		{"all SAs group matches every SA", sub(v1alpha1.SubjectGroup, "", "system:serviceaccounts"), ServiceAccount("other", "agent"), dAllow},
		{"all SAs group does not match a user", sub(v1alpha1.SubjectGroup, "", "system:serviceaccounts"), User("alice"), dDeny},
		{"SA group via TokenReview groups", sub(v1alpha1.SubjectGroup, "", "system:authenticated"), SubjectFromUserInfo("system:serviceaccount:team:agent", []string{"system:authenticated"}), dAllow},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := mustEngine(t, newPolicy("team", "p", forSubject(c.subject), allow("mcp.fs.*")))
			got := e.DecideTool(c.caller, read)
			checkResult(t, got, c.want, "", nil, "")
		})
	}
}

func sub(kind v1alpha1.SubjectKind, namespace, name string) v1alpha1.Subject {
	return v1alpha1.Subject{Kind: kind, Namespace: namespace, Name: name}
}

func TestSubjectFromUserInfo(t *testing.T) {
	cases := []struct {
		username string
		want     Subject
	}{
		{"system:serviceaccount:team:agent", ServiceAccount("team", "agent")},
		{"alice", User("alice")},
		{"system:serviceaccount:team", User("system:serviceaccount:team")},
		{"system:serviceaccount::agent", User("system:serviceaccount::agent")},
		{"system:serviceaccount:a:b:c", User("system:serviceaccount:a:b:c")},
	}
	for _, c := range cases {
		got := SubjectFromUserInfo(c.username, nil)
		if got.Kind != c.want.Kind || got.Name != c.want.Name || got.Namespace != c.want.Namespace {
			t.Errorf("SubjectFromUserInfo(%q) = %+v, want %+v", c.username, got, c.want)
		}
		if got.Username() != c.username {
			t.Errorf("Username() = %q, want %q", got.Username(), c.username)
		}
	}
}

func TestDecideToolGlobs(t *testing.T) {
	cases := []struct {
		glob string
		tool string // namespaced
		want v1alpha1.Decision
	}{
		{"mcp.fs.*", "mcp.fs.read", dAllow},
		{"mcp.fs.*", "mcp.fs-v2.read", dDeny},
		{"mcp.fs-v2.*", "mcp.fs.read", dDeny},
		{"mcp.fs-v2.*", "mcp.fs-v2.read", dAllow},
		{"mcp.fs*.*", "mcp.fs-v2.read", dAllow},
		{"mcp.fs.*", "mcp.fs.dir.list", dDeny},
		{"mcp.fs.**", "mcp.fs.dir.list", dAllow},
		{"mcp.fs.dir.*", "mcp.fs.dir.list", dAllow},
		{"mcp.*.read", "mcp.git.read", dAllow},
		{"mcp.*.read", "mcp.fs.dir.read", dDeny},
		{"mcp.**.read", "mcp.fs.dir.read", dAllow},
		{"mcp.?s.read", "mcp.fs.read", dAllow},
		{"mcp.?s.read", "mcp.fs-v2.read", dDeny},
		{"mcp.**", "mcp.a.b", dAllow},
		{"**", "mcp.a.b", dAllow},
	}
	for _, c := range cases {
		server, tool, _ := strings.Cut(strings.TrimPrefix(c.tool, "mcp."), ".")
		e := mustEngine(t, newPolicy("team", "p", forSA("team", "agent"), allow(c.glob)))
		got := e.DecideTool(agent, call(server, tool, v1alpha1.RiskRead, nil))
		if got.Decision != c.want {
			t.Errorf("glob %q on %s: %s, want %s", c.glob, c.tool, got.Decision, c.want)
		}
	}
}

func TestDecideToolConditions(t *testing.T) {
	args := map[string]any{
		"path":    "/data/reports/q3.csv",
		"limit":   float64(250),
		"options": map[string]any{"recursive": true, "depth": float64(3), "tags": []any{"a", "b"}},
		"files":   []any{map[string]any{"name": "a.txt"}, map[string]any{"name": "b.csv"}},
	}
	cases := []struct {
		name   string
		when   string
		args   map[string]any
		want   v1alpha1.Decision
		reason string
		// goOnly: the arguments have no JSON text (a Go value JSON lacks).
		goOnly bool
	}{
		{name: "string prefix true", when: "args.path.startsWith('/data/')", args: args, want: dAllow},
		{name: "string prefix false", when: "args.path.startsWith('/etc/')", args: args, want: dDeny},
		{name: "nested map", when: "args.options.recursive == true && args.options.depth <= 3", args: args, want: dAllow},
		{name: "nested list in map", when: "'b' in args.options.tags", args: args, want: dAllow},
		{name: "list of maps", when: "args.files.all(f, f.name.endsWith('.txt'))", args: args, want: dDeny},
		{name: "list of maps exists", when: "args.files.exists(f, f.name.endsWith('.csv'))", args: args, want: dAllow},
		{name: "JSON number against an int literal", when: "args.limit > 100", args: args, want: dAllow},
		{name: "has() on a missing key", when: "!has(args.recursive)", args: args, want: dAllow},
		{name: "no args at all", when: "size(args) == 0", args: nil, want: dAllow},
		{name: "regex", when: "args.path.matches('^/data/[a-z]+/')", args: args, want: dAllow},
		// A prefix on the raw path lets '..' climb out;
		// on the cleaned path it does not.
		{name: "raw prefix is fooled by dot-dot", when: "args.path.startsWith('/data/public/')", args: map[string]any{"path": "/data/public/../secret/key.txt"}, want: dAllow},
		{name: "cleaned prefix is not", when: "path.clean(args.path).startsWith('/data/public/')", args: map[string]any{"path": "/data/public/../secret/key.txt"}, want: dDeny},
		{name: "cleaned prefix with repeated slashes and dots", when: "path.clean(args.path).startsWith('/data/public/')", args: map[string]any{"path": "/data//public/./notes/../a.txt"}, want: dAllow},
		{name: "cleaned relative path stays relative", when: "path.clean(args.path) == '../etc/passwd'", args: map[string]any{"path": "a/../../etc//passwd"}, want: dAllow},
		{name: "path.clean of a non-string denies", when: "path.clean(args.limit) == '/'", args: args, want: dDeny, reason: "failed"},
		{name: "tool fields", when: "tool.name == 'mcp.fs.read_file' && tool.server == 'fs' && tool.risk == 'read' && tool.namespace == 'team'", args: args, want: dAllow},
		{name: "tool annotations", when: "has(tool.annotations.readOnlyHint) && tool.annotations.readOnlyHint", args: args, want: dAllow},
		{name: "subject fields", when: "subject.kind == 'ServiceAccount' && subject.namespace == 'team' && subject.name == 'agent' && 'system:serviceaccounts:team' in subject.groups && subject.username == 'system:serviceaccount:team:agent'", args: args, want: dAllow},
		{name: "a missing key is an error that denies", when: "args.recursive", args: args, want: dDeny, reason: "condition of policy:team/p#rules[0] failed"},
		{name: "a wrong type is an error that denies", when: "args.path > 3", args: args, want: dDeny, reason: "failed"},
		{name: "a non-bool result denies", when: "args.options.recursive", args: map[string]any{"options": map[string]any{"recursive": "yes"}}, want: dDeny, reason: "not a bool"},
		{name: "an unsupported Go value denies", when: "args.x == 1", args: map[string]any{"x": struct{}{}}, want: dDeny, reason: "failed", goOnly: true},
		{
			name: "running over the cost budget denies",
			when: "args.items.all(x, args.items.all(y, args.items.all(z, x + y + z >= 0)))",
			args: map[string]any{"items": manyNumbers(100)}, want: dDeny, reason: "ran over its cost budget",
		},
	}
	for _, c := range cases {
		// The same arguments decoded by the caller (Args) and left to the
		// engine as JSON text (RawArgs, as the bridge hands them).
		for _, raw := range []bool{false, true} {
			if raw && c.goOnly {
				continue
			}
			t.Run(fmt.Sprintf("%s, raw %v", c.name, raw), func(t *testing.T) {
				e := mustEngine(t, newPolicy("team", "p", forSA("team", "agent"), withToolRule(toolRule(dAllow, "mcp.fs.*"), when(c.when))))
				tc := call("fs", "read_file", v1alpha1.RiskRead, c.args)
				if raw {
					text, err := json.Marshal(c.args)
					if err != nil {
						t.Fatal(err)
					}
					tc.Args, tc.RawArgs = nil, text
				}
				yes := true
				tc.Annotations = &v1alpha1.ToolAnnotations{ReadOnlyHint: &yes}
				got := e.DecideTool(agent, tc)
				checkResult(t, got, c.want, "", nil, c.reason)
				if c.reason != "" && got.SourcedFrom != "policy:team/p#rules[0]" {
					t.Errorf("a failed condition is sourced from %q, want its rule", got.SourcedFrom)
				}
			})
		}
	}
	t.Run("raw arguments that are not an object deny", func(t *testing.T) {
		e := mustEngine(t, newPolicy("team", "p", forSA("team", "agent"), withToolRule(toolRule(dAllow, "mcp.fs.*"), when("size(args) == 0"))))
		tc := call("fs", "read_file", v1alpha1.RiskRead, nil)
		tc.RawArgs = json.RawMessage(`["not", "an", "object"]`)
		checkResult(t, e.DecideTool(agent, tc), dDeny, "", nil, "failed")
	})
}

func manyNumbers(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = float64(i)
	}
	return out
}

func TestDecideToolConditionPrecedence(t *testing.T) {
	e := mustEngine(t, newPolicy("team", "p", forSA("team", "agent"),
		allow("mcp.fs.*"),
		withToolRule(toolRule(dDeny, "mcp.fs.*"), when("args.path.startsWith('/etc/')")),
		withToolRule(toolRule(dAsk, "mcp.fs.*"), when("has(args.overwrite) && args.overwrite")),
	))
	cases := []struct {
		args   map[string]any
		want   v1alpha1.Decision
		source string
	}{
		{map[string]any{"path": "/data/x"}, dAllow, "policy:team/p#rules[0]"},
		{map[string]any{"path": "/etc/passwd"}, dDeny, "policy:team/p#rules[1]"},
		{map[string]any{"path": "/data/x", "overwrite": true}, dAsk, "policy:team/p#rules[2]"},
		{map[string]any{"path": "/etc/passwd", "overwrite": true}, dDeny, "policy:team/p#rules[1]"},
		// The deny rule's condition fails on a missing path: fail closed.
		{map[string]any{}, dDeny, "policy:team/p#rules[1]"},
	}
	for _, c := range cases {
		got := e.DecideTool(agent, call("fs", "write_file", v1alpha1.RiskWrite, c.args))
		if got.Decision != c.want || got.SourcedFrom != c.source {
			t.Errorf("args %v: %s from %s (%s), want %s from %s", c.args, got.Decision, got.SourcedFrom, got.Reason, c.want, c.source)
		}
	}
	// An unconditional deny settles the call: conditions need not run, so a
	// condition that would fail does not change the reason.
	e = mustEngine(t, newPolicy("team", "p", forSA("team", "agent"),
		deny("mcp.fs.*"), withToolRule(toolRule(dAllow, "mcp.fs.*"), when("args.nope"))))
	got := e.DecideTool(agent, call("fs", "read_file", v1alpha1.RiskRead, nil))
	checkResult(t, got, dDeny, "policy:team/p#rules[0]", nil, "denied by")
}

func TestApprovalOfAskingPolicies(t *testing.T) {
	e := mustEngine(t,
		newPolicy("team", "a", forSA("team", "agent"), ask("mcp.fs.*")),
		newPolicy("team", "b", forSA("team", "agent"), ask("mcp.fs.*"), withModes(v1alpha1.ApprovalAllowOnce),
			func(p *v1alpha1.ToolPolicy) { p.Spec.Approval.Timeout.Duration = 30e9 }),
	)
	got := e.DecideTool(agent, call("fs", "write", v1alpha1.RiskWrite, nil))
	if got.Decision != dAsk || got.Approval == nil {
		t.Fatalf("got %+v, want ask with approval", got)
	}
	if len(got.Approval.Modes) != 1 || got.Approval.Modes[0] != v1alpha1.ApprovalAllowOnce || got.Approval.Timeout != 30e9 {
		t.Errorf("approval = %+v, want only AllowOnce (offered by both) and the shorter timeout 30s", got.Approval)
	}
}

func TestApprovalChannels(t *testing.T) {
	ta, el := v1alpha1.ChannelToolApproval, v1alpha1.ChannelElicitation
	for _, c := range []struct {
		name string
		a, b []v1alpha1.ApprovalChannel // nil: the policy is left out or says nothing
		want []v1alpha1.ApprovalChannel
	}{
		{"unset is elicitation only", nil, nil, []v1alpha1.ApprovalChannel{el}},
		{"the policy's order is kept", []v1alpha1.ApprovalChannel{ta, el}, nil, []v1alpha1.ApprovalChannel{ta, el}},
		{"two asking policies: only what both list", []v1alpha1.ApprovalChannel{ta, el}, []v1alpha1.ApprovalChannel{ta}, []v1alpha1.ApprovalChannel{ta}},
		{"two asking policies with nothing in common", []v1alpha1.ApprovalChannel{el}, []v1alpha1.ApprovalChannel{ta}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			policies := []v1alpha1.ToolPolicy{newPolicy("team", "a", forSA("team", "agent"), ask("mcp.fs.*"), withChannels(c.a...))}
			if c.b != nil {
				policies = append(policies, newPolicy("team", "b", forSA("team", "agent"), ask("mcp.fs.*"), withChannels(c.b...)))
			}
			got := mustEngine(t, policies...).DecideTool(agent, call("fs", "write", v1alpha1.RiskWrite, nil))
			if got.Decision != dAsk || got.Approval == nil {
				t.Fatalf("got %+v, want ask with approval", got)
			}
			if !slices.Equal(got.Approval.Channels, c.want) {
				t.Errorf("channels = %v, want %v", got.Approval.Channels, c.want)
			}
		})
	}
}

func TestDestructiveToolsAreAskedThroughTheDecidingPolicysChannels(t *testing.T) {
	ta := []v1alpha1.ApprovalChannel{v1alpha1.ChannelToolApproval}
	for _, rules := range []policyOption{allow("mcp.fs.*"), ask("mcp.fs.*")} {
		e := mustEngine(t, newPolicy("team", "a", forSA("team", "agent"), rules, withChannels(ta...),
			func(p *v1alpha1.ToolPolicy) { p.Spec.Approval.Timeout.Duration = 7 * time.Minute }))
		got := e.DecideTool(agent, call("fs", "rm", v1alpha1.RiskDestructive, nil))
		if got.Decision != dAsk || got.Approval == nil || !slices.Equal(got.Approval.Channels, ta) ||
			got.Approval.Timeout != 7*time.Minute || got.Approval.Allows(v1alpha1.ApprovalAllowSession) {
			t.Errorf("got %+v (approval %+v), want ask through ToolApproval within the policy's 7m, once only", got, got.Approval)
		}
	}
}

func TestDecideResource(t *testing.T) {
	e := mustEngine(t, newPolicy("team", "p", forSA("team", "agent"),
		withResource(v1alpha1.ResourceRule{Servers: []string{"fs"}, URIs: []string{"file:///data/*"}, Decision: dAllow}),
		withResource(v1alpha1.ResourceRule{Servers: []string{"fs"}, URIs: []string{"file:///data/secret/*"}, Decision: dDeny}),
		withResource(v1alpha1.ResourceRule{Servers: []string{"docs*"}, Decision: dAllow}),
		withResource(v1alpha1.ResourceRule{Servers: []string{"wiki"}, Decision: dAsk}),
		withResource(v1alpha1.ResourceRule{Servers: []string{"fs"}, URIs: []string{"file:///data/caf%C3%A9/*"}, Decision: dDeny}),
	))
	cases := []struct {
		server, uri string
		namespace   string
		want        v1alpha1.Decision
		source      string
	}{
		{"fs", "file:///data/a/b.txt", "team", dAllow, "policy:team/p#resources[0]"},
		{"fs", "file:///data/secret/key", "team", dDeny, "policy:team/p#resources[1]"},
		{"fs", "file:///etc/passwd", "team", dDeny, SourceDefault},
		{"fs", "file:///data/../etc/passwd", "team", dDeny, SourceDefault},
		{"fs", "file:///data/%2e%2e/etc/passwd", "team", dDeny, SourceDefault},
		{"fs", "file:///data/..%2Fetc/passwd", "team", dDeny, SourceDefault},
		{"fs", "file:///data/a..b", "team", dAllow, "policy:team/p#resources[0]"},
		{"fs-v2", "file:///data/a", "team", dDeny, SourceDefault},
		{"docs-v2", "https://anything", "team", dAllow, "policy:team/p#resources[2]"},
		{"wiki", "wiki://page", "team", dAsk, "policy:team/p#resources[3]"},
		{"fs", "file:///data/a", "other", dDeny, SourceDefault},
		// Other spellings of a denied resource: the
		// engine decides the canonical form only, so these are denied as
		// they are; the bridge canonicalizes before it asks.
		{"fs", "file:///data/./secret/key", "team", dDeny, SourceDefault},
		{"fs", "file:///data//secret/key", "team", dDeny, SourceDefault},
		{"fs", "file:///data/%73ecret/key", "team", dDeny, SourceDefault},
		{"fs", "FILE:///data/a/b.txt", "team", dDeny, SourceDefault},
		{"fs", "file:///data/a b", "team", dDeny, SourceDefault},
		// Non-ASCII paths: the deny glob is written escaped; the raw
		// spelling is not canonical, the escaped one is denied by the rule.
		{"fs", "file:///data/café/key", "team", dDeny, SourceDefault},
		{"fs", "file:///data/caf%C3%A9/key", "team", dDeny, "policy:team/p#resources[4]"},
	}
	for _, c := range cases {
		got := e.DecideResource(agent, ResourceRead{Server: c.server, Namespace: c.namespace, URI: c.uri})
		if got.Decision != c.want || got.SourcedFrom != c.source || got.RiskAtDecision != v1alpha1.RiskRead {
			t.Errorf("%s %s in %s: %s from %s at %s (%s), want %s from %s at read",
				c.server, c.uri, c.namespace, got.Decision, got.SourcedFrom, got.RiskAtDecision, got.Reason, c.want, c.source)
		}
	}
}

func TestDecidePrompt(t *testing.T) {
	e := mustEngine(t, newPolicy("team", "p", forGroup("devs"),
		withPrompt(v1alpha1.PromptRule{Prompts: []string{"mcp.everything.*"}, Decision: dAllow}),
		withPrompt(v1alpha1.PromptRule{Prompts: []string{"mcp.*.admin_*"}, Decision: dDeny}),
	))
	dev := User("bob", "devs")
	cases := []struct {
		caller Subject
		name   string
		want   v1alpha1.Decision
		source string
	}{
		{dev, "mcp.everything.simple_prompt", dAllow, "policy:team/p#prompts[0]"},
		{dev, "mcp.everything.admin_reset", dDeny, "policy:team/p#prompts[1]"},
		{dev, "mcp.everything-v2.simple_prompt", dDeny, SourceDefault},
		{User("eve"), "mcp.everything.simple_prompt", dDeny, SourceDefault},
	}
	for _, c := range cases {
		server, _, _ := strings.Cut(strings.TrimPrefix(c.name, "mcp."), ".")
		got := e.DecidePrompt(c.caller, PromptGet{Name: c.name, Server: server, Namespace: "team"})
		if got.Decision != c.want || got.SourcedFrom != c.source {
			t.Errorf("%s by %s: %s from %s, want %s from %s", c.name, c.caller.Name, got.Decision, got.SourcedFrom, c.want, c.source)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	sa := forSA("team", "agent")
	cases := []struct {
		name   string
		policy v1alpha1.ToolPolicy
		field  string
		want   string
	}{
		{"CEL undeclared variable", newPolicy("team", "p", sa, allow("mcp.**"), withToolRule(toolRule(dAllow, "mcp.**"), when("argz.path == '/'"))),
			"spec.rules[1].when", "undeclared reference to 'argz'"},
		{"CEL syntax", newPolicy("team", "p", sa, withToolRule(toolRule(dAllow, "mcp.**"), when("args.path.startsWith("))),
			"spec.rules[0].when", "when:1:"},
		{"CEL not a bool", newPolicy("team", "p", sa, withToolRule(toolRule(dAllow, "mcp.**"), when("size(args)"))),
			"spec.rules[0].when", "gives int, but a condition must give a bool"},
		{"CEL blank", newPolicy("team", "p", sa, withToolRule(toolRule(dAllow, "mcp.**"), when("  "))),
			"spec.rules[0].when", "empty CEL expression"},
		{"glob without mcp prefix", newPolicy("team", "p", sa, allow("fs.*")),
			"spec.rules[0].tools[0]", `did you mean "mcp.fs.*"`},
		{"glob with too few segments", newPolicy("team", "p", sa, allow("mcp.fs")),
			"spec.rules[0].tools[0]", "write mcp.<server>.*"},
		{"glob with a star crossing nothing", newPolicy("team", "p", sa, allow("mcp.*")),
			"spec.rules[0].tools[0]", "'*' does not cross a '.'"},
		{"glob with a bad character", newPolicy("team", "p", sa, allow("mcp.fs.read file")),
			"spec.rules[0].tools[0]", "which no MCP name can contain"},
		{"glob with three stars", newPolicy("team", "p", sa, allow("mcp.fs.***")),
			"spec.rules[0].tools[0]", "run of 3 '*'"},
		{"rule without tools or risks", newPolicy("team", "p", sa, withToolRule(toolRule(dAllow))),
			"spec.rules[0]", "needs tools, risks or both"},
		{"unknown decision", newPolicy("team", "p", sa, withToolRule(toolRule("maybe", "mcp.**"))),
			"spec.rules[0].decision", `unknown decision "maybe"`},
		{"unknown risk", newPolicy("team", "p", sa, withToolRule(toolRule(dAllow, "mcp.**"), risks("scary"))),
			"spec.rules[0].risks[0]", `unknown risk "scary"`},
		{"no subjects", newPolicy("team", "p", allow("mcp.**")), "spec.subjects", "at least one subject"},
		{"SA without namespace", newPolicy("team", "p", forSubject(sub(v1alpha1.SubjectServiceAccount, "", "a")), allow("mcp.**")),
			"spec.subjects[0].namespace", "needs its namespace"},
		{"user with namespace", newPolicy("team", "p", forSubject(sub(v1alpha1.SubjectUser, "x", "a")), allow("mcp.**")),
			"spec.subjects[0].namespace", "only for ServiceAccount"},
		{"unknown subject kind", newPolicy("team", "p", forSubject(sub("Robot", "", "a")), allow("mcp.**")),
			"spec.subjects[0].kind", `unknown subject kind "Robot"`},
		{"no rules at all", newPolicy("team", "p", sa), "spec", "at least one of rules, resources, prompts or skills"},
		{"server glob with a dot", newPolicy("team", "p", sa, withResource(v1alpha1.ResourceRule{Servers: []string{"mcp.fs"}, Decision: dAllow})),
			"spec.resources[0].servers[0]", "server names have no dots"},
		{"URI glob with a space", newPolicy("team", "p", sa, withResource(v1alpha1.ResourceRule{Servers: []string{"fs"}, URIs: []string{"file:///a b"}, Decision: dAllow})),
			"spec.resources[0].uris[0]", "space"},
		{"URI glob not in canonical form", newPolicy("team", "p", sa, withResource(v1alpha1.ResourceRule{Servers: []string{"fs"}, URIs: []string{"file:///data/*", "FILE:///data/./secret/*"}, Decision: dDeny})),
			"spec.resources[0].uris[1]", `write "file:///data/secret/*"`},
		{"prompt glob without prefix", newPolicy("team", "p", sa, withPrompt(v1alpha1.PromptRule{Prompts: []string{"everything.*"}, Decision: dAllow})),
			"spec.prompts[0].prompts[0]", "prompt names are namespaced"},
		{"rate limit of zero", newPolicy("team", "p", sa, allow("mcp.**"), withRateLimit(0, 0)),
			"spec.rateLimit.callsPerMinute", "at least 1"},
		{"unknown approval channel", newPolicy("team", "p", sa, allow("mcp.**"), withChannels("Email")),
			"spec.approval.channels[0]", "unknown approval channel"},
		{"unknown approval mode", newPolicy("team", "p", sa, allow("mcp.**"), withModes("AllowForever")),
			"spec.approval.modes[0]", "unknown approval mode"},
		{"unknown injection action on a tool rule", newPolicy("team", "p", sa, withToolRule(toolRule(dAllow, "mcp.**"), onInjection("Warn"))),
			"spec.rules[0].injection", `unknown injection action "Warn": use Flag or Block`},
		{"unknown injection action on a prompt rule", newPolicy("team", "p", sa, withPrompt(v1alpha1.PromptRule{Prompts: []string{"mcp.**"}, Decision: dAllow, Injection: "block"})),
			"spec.prompts[0].injection", `unknown injection action "block"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, errs := CompilePolicy(&c.policy)
			if p != nil {
				t.Errorf("a policy with errors compiled")
			}
			for _, err := range errs {
				if err.Field == c.field && strings.Contains(err.Message, c.want) {
					if err.Policy != "team/p" || !strings.HasPrefix(err.Error(), c.field+": ") {
						t.Errorf("error %q names policy %q", err.Error(), err.Policy)
					}
					return
				}
			}
			t.Errorf("errors %v; want one at %s containing %q", errs, c.field, c.want)
		})
	}
}

func TestCompileLeavesInvalidPoliciesOut(t *testing.T) {
	e, errs := Compile([]v1alpha1.ToolPolicy{
		newPolicy("team", "good", forSA("team", "agent"), allow("mcp.fs.*")),
		newPolicy("team", "bad", forSA("team", "agent"), deny("mcp.fs.*"), withToolRule(toolRule(dDeny, "mcp.**"), when("nope"))),
	})
	if len(errs) != 1 || errs[0].Policy != "team/bad" {
		t.Fatalf("errors = %v, want one for team/bad", errs)
	}
	if len(e.Policies()) != 1 || e.Policies()[0].Name() != "good" {
		t.Fatalf("engine has %d policies, want only the good one", len(e.Policies()))
	}
	got := e.DecideTool(agent, call("fs", "read", v1alpha1.RiskRead, nil))
	checkResult(t, got, dAllow, "policy:team/good#rules[0]", nil, "")
}

func TestMatchesTool(t *testing.T) {
	p, errs := CompilePolicy(ptr.To(newPolicy("team", "p", forSA("team", "agent"),
		allow("mcp.fs.read_*"), withToolRule(toolRule(dDeny), risks(v1alpha1.RiskDestructive)),
		withToolRule(toolRule(dAllow, "mcp.*.search"), when("args.q != ''")))))
	if errs != nil {
		t.Fatal(errs)
	}
	cases := []struct {
		server, name string
		risk         v1alpha1.Risk
		want         bool
	}{
		{"fs", "mcp.fs.read_file", v1alpha1.RiskRead, true},
		{"fs", "mcp.fs.write_file", v1alpha1.RiskWrite, false},
		{"fs", "mcp.fs.rm", v1alpha1.RiskDestructive, true},
		{"git", "mcp.git.search", v1alpha1.RiskRead, true},
		{"fs-v2", "mcp.fs-v2.read_file", v1alpha1.RiskRead, false},
		{"fs", "mcp.git.read_file", v1alpha1.RiskRead, false},
	}
	for _, c := range cases {
		if got := p.MatchesTool(c.server, c.name, c.risk); got != c.want {
			t.Errorf("MatchesTool(%s, %s, %s) = %v, want %v", c.server, c.name, c.risk, got, c.want)
		}
	}
}

// The sample policy users start from must compile and mean what its comments
// say.
func TestSamplePolicy(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "config", "samples", "mcp-operator_v1alpha1_toolpolicy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tp v1alpha1.ToolPolicy
	if err := yaml.UnmarshalStrict(data, &tp); err != nil {
		t.Fatalf("while decoding the sample: %v", err)
	}
	tp.Namespace = "default"
	e := mustEngine(t, tp)
	research := ServiceAccount("default", "research-agent")
	everything := func(tool string, risk v1alpha1.Risk) ToolCall {
		return ToolCall{Name: "mcp.everything." + tool, Server: "everything", Namespace: "default", Risk: risk}
	}
	echo := e.DecideTool(research, everything("echo", v1alpha1.RiskNetwork))
	checkResult(t, echo, dAllow, "policy:default/research-agent#rules[1]", nil, "")
	if read := e.DecideTool(research, everything("get-resource", v1alpha1.RiskRead)); !read.BlockInjection || echo.BlockInjection {
		t.Errorf("read tools block injection (%v), others flag it (%v blocks)", read.BlockInjection, echo.BlockInjection)
	}
	checkResult(t, e.DecideTool(research, everything("get-env", v1alpha1.RiskRead)), dDeny, "policy:default/research-agent#rules[3]", nil, "credentials")
	notes := ToolCall{Name: "mcp.filesystem.write_file", Server: "filesystem", Namespace: "default", Risk: v1alpha1.RiskWrite,
		Args: map[string]any{"path": "/data/notes/today.md"}}
	checkResult(t, e.DecideTool(research, notes), dAsk, "policy:default/research-agent#rules[2]", nil, "")
	notes.Args = map[string]any{"path": "/etc/passwd"}
	checkResult(t, e.DecideTool(research, notes), dDeny, SourceDefault, nil, "")
	// The sample cleans the path: '..' does not climb out of /data/notes/.
	notes.Args = map[string]any{"path": "/data/notes/../../etc/passwd"}
	checkResult(t, e.DecideTool(research, notes), dDeny, SourceDefault, nil, "")
	checkResult(t, e.DecideTool(ServiceAccount("default", "someone-else"), everything("echo", v1alpha1.RiskNetwork)), dDeny, SourceDefault, nil, "")
	checkResult(t, e.DecideResource(research, ResourceRead{Server: "everything", Namespace: "default", URI: "demo://resource/static/document/architecture.md"}), dAllow, "", nil, "")
}
