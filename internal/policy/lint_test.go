package policy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// lintCatalogs are the namespace the lint table is run against: a file
// server (read_file takes path, write_file path and content, delete_file
// is destructive) and a fetcher (fetch takes url).
func lintCatalogs() []Catalog {
	path := v1alpha1.ToolArgument{Name: "path", Holds: v1alpha1.HoldsPath}
	return []Catalog{
		{Server: "fs", Complete: true, Tools: []v1alpha1.ToolStatus{
			{Name: "mcp.fs.delete_file", Risk: v1alpha1.RiskDestructive, Arguments: []v1alpha1.ToolArgument{path}},
			{Name: "mcp.fs.read_file", Risk: v1alpha1.RiskRead, Arguments: []v1alpha1.ToolArgument{path}},
			{Name: "mcp.fs.write_file", Risk: v1alpha1.RiskWrite, Arguments: []v1alpha1.ToolArgument{{Name: "content"}, path}},
		}},
		{Server: "web", Complete: true, Tools: []v1alpha1.ToolStatus{
			{Name: "mcp.web.fetch", Risk: v1alpha1.RiskNetwork, Arguments: []v1alpha1.ToolArgument{{Name: "target", Holds: v1alpha1.HoldsURL}}},
		}},
		// Not probed yet: nothing is known of its tools.
		{Server: "git"},
	}
}

func TestLint(t *testing.T) {
	cases := []struct {
		name string
		rule []ruleOption
		// noCatalogs lints the object alone, as at apply time.
		noCatalogs bool
		// want are substrings, one warning each, in order; none: no warning.
		want []string
		// field of the first warning.
		field string
	}{
		{name: "raw path prefix",
			rule:  []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.fs.read_file"), when("args.path.startsWith('/data/public/')")},
			want:  []string{"args.path.startsWith('/data/public/') tests a raw path: /data/public/../secret/key.txt passes it and names /data/secret/key.txt. Clean it first: path.clean(args.path).startsWith('/data/public/')"},
			field: "spec.rules[0].when"},
		{name: "raw path prefix without its slash gets one in the advice",
			rule: []ruleOption{toolRule(v1alpha1.DecisionDeny, "mcp.fs.*"), when("args['path'].startsWith('/etc')")},
			want: []string{"path.clean(args.path).startsWith('/etc/')"}},
		{name: "cleaned path is fine",
			rule: []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.fs.read_file"), when("path.clean(args.path).startsWith('/data/public/')")}},
		{name: "suffix test on a raw path",
			rule: []ruleOption{toolRule(v1alpha1.DecisionDeny, "mcp.fs.read_file"), when("args.path.endsWith('.pem')")},
			want: []string{"args.path.endsWith('.pem') tests a raw path"}},
		{name: "anchored regex on a raw path, global form",
			rule: []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.fs.read_file"), when("matches(args.path, '^/data/')")},
			want: []string{"args.path.matches('^/data/') tests a raw path"}},
		{name: "unanchored regex is not a prefix test",
			rule: []ruleOption{toolRule(v1alpha1.DecisionDeny, "mcp.fs.read_file"), when("args.path.matches('secret')")}},
		{name: "raw path by name alone, at apply time",
			noCatalogs: true,
			rule:       []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.fs.read_file"), when("args.filePath.startsWith('/srv/')")},
			want:       []string{"args.filePath.startsWith('/srv/') tests a raw path"}},
		{name: "schema says URL though the name does not",
			rule: []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.web.fetch"), when("args.target.startsWith('https://example.com')")},
			want: []string{"tests a raw URL: https://example.com.evil.test/ and https://example.com@evil.test/ pass startsWith('https://example.com'), and ../ segments reach past a path prefix. Compare the canonical form: uri.canonical(args.target).startsWith('https://example.com/')"}},
		{name: "canonical URL is fine",
			rule: []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.web.fetch"), when("uri.canonical(args.target).startsWith('https://example.com/')")}},
		{name: "cleaned path with a prefix not ending in '/'",
			rule: []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.fs.read_file"), when("path.clean(args.path).startsWith('/data/public')")},
			want: []string{"path.clean(args.path).startsWith('/data/public') is passed by /data/public-old, which is not under it: end the prefix in '/': path.clean(args.path).startsWith('/data/public/')"}},
		{name: "canonical URL with a prefix ending at the host",
			rule: []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.web.fetch"), when("uri.canonical(args.target).startsWith('https://example.com')")},
			want: []string{"uri.canonical(args.target).startsWith('https://example.com') is passed by https://example.com.evil.test/, which is not under it: end the prefix in '/': uri.canonical(args.target).startsWith('https://example.com/')"}},
		{name: "canonical URL with a path prefix not ending in '/'",
			rule: []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.web.fetch"), when("uri.canonical(args.target).startsWith('https://example.com/docs')")},
			want: []string{"is passed by https://example.com/docs-old"}},
		{name: "comprehension over a list of raw paths",
			noCatalogs: true,
			rule:       []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.fs.read_files"), when("args.paths.exists(p, p.startsWith('/data/'))")},
			want:       []string{"p.startsWith('/data/') (on each of args.paths) tests a raw path: /data/../secret/key.txt passes it and names /secret/key.txt. Clean it first: path.clean(p).startsWith('/data/')"}},
		{name: "comprehension over a list of raw URLs",
			noCatalogs: true,
			rule:       []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.web.fetch_all"), when("args['urls'].all(u, u.matches('^https://example[.]com/'))")},
			want:       []string{"u.matches('^https://example[.]com/') (on each of args.urls) tests a raw URL"}},
		{name: "comprehension over cleaned paths with an open prefix",
			noCatalogs: true,
			rule:       []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.fs.read_files"), when("args.paths.all(p, path.clean(p).startsWith('/data'))")},
			want:       []string{"path.clean(p).startsWith('/data') is passed by /data-old"}},
		{name: "comprehension over cleaned paths is fine",
			noCatalogs: true,
			rule:       []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.fs.read_files"), when("args.paths.all(p, path.clean(p).startsWith('/data/'))")}},
		{name: "comprehension over something else than an argument",
			noCatalogs: true,
			rule:       []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.fs.read_files"), when("['/a'].all(path, path.startsWith('/a'))")}},
		{name: "anchored regex after flags",
			rule: []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.fs.read_file"), when("args.path.matches('(?i)^/data/')")},
			want: []string{"args.path.matches('(?i)^/data/') tests a raw path"}},
		{name: "prefix test on an argument that is neither",
			rule: []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.fs.write_file"), when("args.content.startsWith('#')")}},
		{name: "has() is not a prefix test",
			rule: []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.fs.read_file"), when("has(args.path) && path.clean(args.path) == '/a'")}},
		{name: "allow reaching destructive tools through a wildcard",
			rule:  []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.fs.*")},
			want:  []string{"this allow reaches 1 destructive tool (mcp.fs.delete_file), which it cannot allow: calls of it are asked about, not allowed; a destructive tool is never allowed"},
			field: "spec.rules[0]"},
		{name: "allow narrowed by risk",
			rule: []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.fs.*"), risks(v1alpha1.RiskRead, v1alpha1.RiskWrite)}},
		{name: "ask reaching destructive tools is what it should be",
			rule: []ruleOption{toolRule(v1alpha1.DecisionAsk, "mcp.**")}},
		{name: "allow of risk destructive, at apply time",
			noCatalogs: true,
			rule:       []ruleOption{toolRule(v1alpha1.DecisionAllow), risks(v1alpha1.RiskDestructive)},
			want:       []string{"decision allow with risks: [destructive] cannot allow"}},
		{name: "glob that matches no tool of its server",
			rule:  []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.fs.read")},
			want:  []string{"the rule matches no tool of the servers it names; they publish mcp.fs.delete_file, mcp.fs.read_file, mcp.fs.write_file"},
			field: "spec.rules[0].tools"},
		{name: "risks that no tool of the named server has",
			rule: []ruleOption{toolRule(v1alpha1.DecisionDeny, "mcp.web.*"), risks(v1alpha1.RiskDestructive)},
			want: []string{"the rule matches no tool of the servers it names at the risks it names"}},
		{name: "server that does not exist",
			rule: []ruleOption{toolRule(v1alpha1.DecisionDeny, "mcp.fss.read_file")},
			want: []string{`MCPServer "fss" does not exist in this namespace`}},
		{name: "server that published nothing yet gets the benefit of the doubt",
			rule: []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.git.log")}},
		{name: "wildcard server names none",
			rule: []ruleOption{toolRule(v1alpha1.DecisionDeny, "mcp.*.nothing")}},
		{name: "when reads an argument no matched tool has",
			rule:  []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.fs.read_file", "mcp.fs.write_file"), when("path.clean(args.file) == '/a'")},
			want:  []string{`the condition reads args.file, but none of the 2 tools the rule matches takes an argument "file" (they take content, path)`},
			field: "spec.rules[0].when"},
		{name: "has() of an argument no matched tool has",
			rule: []ruleOption{toolRule(v1alpha1.DecisionDeny, "mcp.fs.read_file"), when("has(args.file)")},
			want: []string{`the condition tests has(args.file), but none of the 1 tool the rule matches takes an argument "file" (they take path): it is always false; check the spelling`}},
		{name: "an argument read in has() and outside it",
			rule: []ruleOption{toolRule(v1alpha1.DecisionDeny, "mcp.fs.read_file"), when("has(args.file) && args.file == 'x'")},
			want: []string{"the condition reads args.file, but none of the 1 tool the rule matches takes an argument \"file\" (they take path): a missing argument is an error"}},
		{name: "when reads an argument one matched tool has",
			rule: []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.fs.read_file", "mcp.fs.write_file"), when("size(args.content) < 100")}},
		{name: "arguments unknown when a matched tool's are",
			rule: []ruleOption{toolRule(v1alpha1.DecisionDeny, "mcp.**"), when("args.nope == 1")}},
		{name: "object alone: no catalog lints",
			noCatalogs: true,
			rule:       []ruleOption{toolRule(v1alpha1.DecisionAllow, "mcp.nowhere.*"), when("args.nope == 1")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tp := newPolicy("team", "p", forSA("team", "agent"), withToolRule(tc.rule...))
			p, errs := CompilePolicy(&tp)
			if len(errs) > 0 {
				t.Fatalf("did not compile: %v", errs)
			}
			var catalogs []Catalog
			if !tc.noCatalogs {
				catalogs = lintCatalogs()
			}
			got := p.Lint(&tp.Spec, catalogs)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d warnings, want %d: %v", len(got), len(tc.want), got)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i].Message, w) {
					t.Errorf("warning %d:\n%s\nwant it to contain\n%s", i, got[i].Message, w)
				}
			}
			if tc.field != "" && got[0].Field != tc.field {
				t.Errorf("field %q, want %q", got[0].Field, tc.field)
			}
		})
	}
}

// TestLintAdviceIsSafe checks the advice of the path and URL lints against
// the engine: the condition the warning suggests denies the escape the
// warning names, where the condition it warns about allowed it.
func TestLintAdviceIsSafe(t *testing.T) {
	cases := []struct {
		decision                  v1alpha1.Decision
		unsafe, safe, arg, escape string
	}{
		{v1alpha1.DecisionAllow, "args.path.startsWith('/data/public/')", "path.clean(args.path).startsWith('/data/public/')", "path", "/data/public/../secret/key.txt"},
		{v1alpha1.DecisionAllow, "args.url.startsWith('https://example.com')", "uri.canonical(args.url).startsWith('https://example.com/')", "url", "https://example.com.evil.test/x"},
		{v1alpha1.DecisionAllow, "args.url.startsWith('https://example.com')", "uri.canonical(args.url).startsWith('https://example.com/')", "url", "https://example.com@evil.test/x"},
		{v1alpha1.DecisionAllow, "args.url.startsWith('https://example.com/docs/')", "uri.canonical(args.url).startsWith('https://example.com/docs/')", "url", "https://example.com/docs/../admin"},
		// A cleaned path or canonical URL whose prefix does not end in '/'.
		{v1alpha1.DecisionAllow, "path.clean(args.path).startsWith('/data/public')", "path.clean(args.path).startsWith('/data/public/')", "path", "/data/publicity/x"},
		{v1alpha1.DecisionAllow, "uri.canonical(args.url).startsWith('https://example.com')", "uri.canonical(args.url).startsWith('https://example.com/')", "url", "https://example.com.evil.test/x"},
		// A deny on a suffix: the advice must keep denying the file it names.
		{v1alpha1.DecisionDeny, "args.path.endsWith('.pem')", "path.clean(args.path).endsWith('.pem')", "path", "/x/key.pem/."},
		{v1alpha1.DecisionDeny, "args.path.endsWith('.pem')", "path.clean(args.path).endsWith('.pem')", "path", "/x/key.pem"},
	}
	// A deny case also allows everything else, so that what the condition
	// lets through is allowed.
	policy := func(d v1alpha1.Decision, cond string) v1alpha1.ToolPolicy {
		opts := []policyOption{forSA("team", "agent"), withToolRule(toolRule(d, "mcp.srv.*"), when(cond))}
		if d == v1alpha1.DecisionDeny {
			opts = append(opts, allow("mcp.srv.*"))
		}
		return newPolicy("team", "p", opts...)
	}
	for _, tc := range cases {
		tp := policy(tc.decision, tc.unsafe)
		ws := mustCompile(t, &tp).Lint(&tp.Spec, nil)
		if len(ws) != 1 || !strings.Contains(ws[0].Message, tc.safe) {
			t.Fatalf("%s: warnings %v, want advice %s", tc.unsafe, ws, tc.safe)
		}
		if tc.decision != v1alpha1.DecisionAllow && strings.Contains(ws[0].Message, "ends in '/'") {
			t.Errorf("%s: a suffix test is advised a '/': %s", tc.unsafe, ws[0].Message)
		}
		args := map[string]any{tc.arg: tc.escape}
		c := call("srv", "x", v1alpha1.RiskRead, args)
		raw := mustEngine(t, tp).DecideTool(agent, c).Decision
		if tc.decision == v1alpha1.DecisionAllow && raw != v1alpha1.DecisionAllow {
			t.Fatalf("%s denied %s: the lint warns about nothing", tc.unsafe, tc.escape)
		}
		safe := policy(tc.decision, tc.safe)
		if r := mustEngine(t, safe).DecideTool(agent, c); r.Decision != v1alpha1.DecisionDeny {
			t.Errorf("the advice %s let %s through (the warned condition: %s)", tc.safe, tc.escape, raw)
		}
		if ws := mustCompile(t, &safe).Lint(&safe.Spec, nil); len(ws) != 0 {
			t.Errorf("the advice %s is itself warned about: %v", tc.safe, ws)
		}
	}
}

func mustCompile(t *testing.T, tp *v1alpha1.ToolPolicy) *Policy {
	t.Helper()
	p, errs := CompilePolicy(tp)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return p
}

// BenchmarkLint is the controller's cost of linting one policy of 50 rules
// (half with a condition) against 10 servers of 100 tools each, beside
// compiling it (BenchmarkCompilePolicy): the two run on every reconcile.
func BenchmarkLint(b *testing.B) {
	tp, catalogs := lintBenchInput()
	p, errs := CompilePolicy(&tp)
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	b.ReportAllocs()
	for b.Loop() {
		p.Lint(&tp.Spec, catalogs)
	}
}

func BenchmarkCompilePolicy(b *testing.B) {
	tp, _ := lintBenchInput()
	b.ReportAllocs()
	for b.Loop() {
		CompilePolicy(&tp)
	}
}

func lintBenchInput() (v1alpha1.ToolPolicy, []Catalog) {
	var catalogs []Catalog
	for s := range 10 {
		server := fmt.Sprintf("srv%d", s)
		c := Catalog{Server: server, Complete: true}
		for i := range 100 {
			c.Tools = append(c.Tools, v1alpha1.ToolStatus{
				Name: fmt.Sprintf("mcp.%s.tool_%d", server, i), Risk: v1alpha1.RiskRead,
				Arguments: []v1alpha1.ToolArgument{{Name: "path", Holds: v1alpha1.HoldsPath}, {Name: "limit"}},
			})
		}
		catalogs = append(catalogs, c)
	}
	var opts []policyOption
	for i := range 50 {
		r := []ruleOption{toolRule(v1alpha1.DecisionAllow, fmt.Sprintf("mcp.srv%d.tool_*", i%10))}
		if i%2 == 0 {
			r = append(r, when("path.clean(args.path).startsWith('/data/') && args.limit < 100"))
		}
		opts = append(opts, withToolRule(r...))
	}
	return newPolicy("team", "p", append([]policyOption{forSA("team", "agent")}, opts...)...), catalogs
}
