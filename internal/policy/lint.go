package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/google/cel-go/common/overloads"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/catalog"
)

// Warning is something in a policy that compiles but is probably not what
// its author meant. The policy is in force all the same.
type Warning struct {
	// Rule is the index of the tool rule in spec.rules.
	Rule int
	// Field is the path in the object, such as spec.rules[2].when.
	Field string
	// Message says what is wrong and how to write it safely.
	Message string
}

func (w Warning) String() string { return w.Field + ": " + w.Message }

// Catalog is what the lints know of one MCPServer of the policy's
// namespace: its published tools as its status lists them.
type Catalog struct {
	// Server is the MCPServer's name.
	Server string
	// Tools are status.tools; none while the server has published nothing.
	Tools []v1alpha1.ToolStatus
	// Complete says Tools is the whole catalog (status.toolCount tools).
	Complete bool
}

// CatalogsOf are the catalogs of the MCPServers of namespace, as their
// status publishes them; never nil, so that no servers reads as "none
// exist" rather than "not known".
func CatalogsOf(namespace string, servers []v1alpha1.MCPServer) []Catalog {
	out := []Catalog{}
	for i := range servers {
		s := &servers[i]
		if s.Namespace != namespace {
			continue
		}
		out = append(out, Catalog{
			Server: s.Name,
			Tools:  s.Status.Tools,
			// A status whose list was cut says so with a larger count.
			Complete: int(s.Status.ToolCount) <= len(s.Status.Tools),
		})
	}
	return out
}

// maxNamed bounds the tools or arguments a warning names.
const maxNamed = 5

// Lint looks for what is easy to write wrong in a compiled policy. With nil
// catalogs it lints what the object alone shows (a prefix test on an
// argument whose name says it is a path or URL; an allow of risk
// destructive); with the catalogs of the namespace's MCPServers (empty:
// there are none) it also reads the tools each rule matches. Warnings come in rule order and are
// deterministic for the same input.
func (p *Policy) Lint(spec *v1alpha1.ToolPolicySpec, catalogs []Catalog) []Warning {
	var out []Warning
	for i := range spec.Rules {
		out = append(out, p.lintRule(i, &spec.Rules[i], catalogs)...)
	}
	return out
}

func (p *Policy) lintRule(i int, tr *v1alpha1.ToolRule, catalogs []Catalog) []Warning {
	field := fmt.Sprintf("spec.rules[%d]", i)
	var out []Warning
	warn := func(f, format string, args ...any) {
		out = append(out, Warning{Rule: i, Field: f, Message: fmt.Sprintf(format, args...)})
	}
	matched, allKnown := p.toolsOfRule(i, catalogs)

	if tr.Decision == v1alpha1.DecisionAllow {
		if msg := allowDestructive(tr, matched); msg != "" {
			warn(field, "%s", msg)
		}
	}
	if catalogs != nil {
		for _, msg := range namedServerProblems(tr, catalogs, len(matched)) {
			warn(field+".tools", "%s", msg)
		}
	}
	if tr.When == "" {
		return out
	}
	reads, tests := readArgs(tr.When)
	if allKnown && len(matched) > 0 {
		for _, read := range reads {
			if msg := argumentNoToolHas(read, matched); msg != "" {
				warn(field+".when", "%s", msg)
			}
		}
	}
	for _, t := range tests {
		msg := rawPrefixTest(t, matched)
		if t.cleanedBy != "" {
			msg = openPrefix(t)
		}
		if msg != "" {
			warn(field+".when", "%s", msg)
		}
	}
	return out
}

// toolsOfRule lists the published tools rule i matches by name and risk,
// and whether every catalog was complete and every matched tool's
// arguments are known (a tool listing none, or the status's full 64, may
// take others).
func (p *Policy) toolsOfRule(i int, catalogs []Catalog) ([]*v1alpha1.ToolStatus, bool) {
	var out []*v1alpha1.ToolStatus
	allKnown := true
	for c := range catalogs {
		cat := &catalogs[c]
		if !p.ruleMayReach(i, cat.Server) {
			continue
		}
		for t := range cat.Tools {
			tool := &cat.Tools[t]
			if !p.ruleMatchesTool(i, cat.Server, tool.Name, tool.Risk) {
				continue
			}
			out = append(out, tool)
			if n := len(tool.Arguments); n == 0 || n >= maxStatusArguments {
				allKnown = false
			}
		}
		if !cat.Complete {
			allKnown = false
		}
	}
	return out, allKnown
}

// maxStatusArguments is the CRD's MaxItems of a tool's status.arguments: a
// tool that lists that many may have more.
const maxStatusArguments = 64

// ruleMatchesTool is MatchesTool for the one tool rule at index i.
func (p *Policy) ruleMatchesTool(i int, server, fullName string, risk v1alpha1.Risk) bool {
	n, ok := cutName(fullName, server)
	if !ok {
		return false
	}
	bit := riskBit(effectiveRisk(risk))
	for _, entries := range [][]nameEntry{p.tools.byServer[server], p.tools.anyServer} {
		for _, e := range entries {
			if e.rule.ref.Index == i && e.matches(n, bit) {
				return true
			}
		}
	}
	return false
}

// ruleMayReach reports whether rule i may match some tool of server,
// whatever tools it has.
func (p *Policy) ruleMayReach(i int, server string) bool {
	for _, e := range p.tools.byServer[server] {
		if e.rule.ref.Index == i {
			return true
		}
	}
	for _, e := range p.tools.anyServer {
		if e.rule.ref.Index == i && (e.server == nil || e.server.Match(server)) {
			return true
		}
	}
	return false
}

// allowDestructive: an allow never allows a destructive tool (the engine
// asks instead), so an allow that reaches some, or names the risk, does not
// do what it says.
func allowDestructive(tr *v1alpha1.ToolRule, matched []*v1alpha1.ToolStatus) string {
	const how = "a destructive tool is never allowed, only asked about (each call on its own); " +
		"to ask, write a separate rule with decision: ask and risks: [destructive]; " +
		"to leave them out, give this rule risks: [read, write, network]"
	if slices.Contains(tr.Risks, v1alpha1.RiskDestructive) {
		return "decision allow with risks: [destructive] cannot allow: " + how
	}
	var names []string
	for _, m := range matched {
		if effectiveRisk(m.Risk) == v1alpha1.RiskDestructive {
			names = append(names, m.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("this allow reaches %d destructive %s (%s), which it cannot allow: calls of %s are asked about, not allowed; %s",
		len(names), plural(len(names), "tool", "tools"), someOf(names), them(len(names)), how)
}

// namedServerProblems: the rule names MCPServers (mcp.<server>.… with a
// literal server) and matches no tool of any of them, or names one that
// does not exist. A server that has published nothing yet, or whose list is
// cut, is given the benefit of the doubt.
func namedServerProblems(tr *v1alpha1.ToolRule, catalogs []Catalog, nMatched int) []string {
	var named []string
	for _, g := range tr.Tools {
		server, _, ok := splitServerGlob(g)
		if ok && !hasWildcard(server) && !slices.Contains(named, server) {
			named = append(named, server)
		}
	}
	if len(named) == 0 {
		return nil
	}
	var out []string
	var published []string
	unknown := false
	for _, s := range named {
		i := slices.IndexFunc(catalogs, func(c Catalog) bool { return c.Server == s })
		switch {
		case i < 0:
			out = append(out, fmt.Sprintf("MCPServer %q does not exist in this namespace, so the rule matches none of its tools (a policy applies to the servers of its own namespace); check the name in mcp.<server>.<tool>", s))
			unknown = true
		case len(catalogs[i].Tools) == 0 || !catalogs[i].Complete:
			unknown = true
		default:
			for _, t := range catalogs[i].Tools {
				published = append(published, t.Name)
			}
		}
	}
	if nMatched == 0 && !unknown {
		narrowed := ""
		if len(tr.Risks) > 0 {
			narrowed = " at the risks it names"
		}
		out = append(out, fmt.Sprintf("the rule matches no tool of the servers it names%s; they publish %s. Tool globs match namespaced names mcp.<server>.<tool> and '*' does not cross a '.'; compare with kubectl get mcps -o jsonpath='{.items[*].status.tools[*].name}'",
			narrowed, someOf(published)))
	}
	return out
}

// argumentNoToolHas: the condition reads args.<key>, which none of the
// tools the rule matches declares; at call time a missing key is an error,
// which denies, and has(args.<key>) is always false.
func argumentNoToolHas(read argRead, matched []*v1alpha1.ToolStatus) string {
	key := read.key
	var have []string
	for _, m := range matched {
		for _, a := range m.Arguments {
			if a.Name == key {
				return ""
			}
			if !slices.Contains(have, a.Name) {
				have = append(have, a.Name)
			}
		}
	}
	slices.Sort(have)
	what := fmt.Sprintf("none of the %d %s the rule matches takes an argument %q (they take %s)", len(matched), plural(len(matched), "tool", "tools"), key, someOf(have))
	if read.onlyHas {
		return fmt.Sprintf("the condition tests has(args.%s), but %s: it is always false; check the spelling", key, what)
	}
	return fmt.Sprintf("the condition reads args.%s, but %s: a missing argument is an error at call time, which denies; check the spelling, or guard it with has(args.%s)",
		key, what, key)
}

// prefixTest is a string test in a condition on an argument.
type prefixTest struct {
	fn      string // startsWith, endsWith or matches
	arg     string // the argument's name
	subject string // how the condition names it: args.<arg>, or the variable of a comprehension over it
	lit     string // the literal tested against, when it is one
	// cleanedBy is path.clean or uri.canonical when the test is on the
	// argument's cleaned form; empty when it is on the argument as sent.
	cleanedBy string
}

// rawPrefixTest: a prefix or suffix test on a raw path or URL is passed by
// spellings that name something else (/data/public/../secret,
// https://example.com.evil.test); the argument is a path or URL when a tool
// the rule matches says so in its schema, or else when its name says so.
func rawPrefixTest(t prefixTest, matched []*v1alpha1.ToolStatus) string {
	holds := v1alpha1.ArgumentHolds("")
	for _, m := range matched {
		for _, a := range m.Arguments {
			if a.Name == t.arg && a.Holds != "" {
				holds = a.Holds
			}
		}
	}
	if holds == "" {
		holds = catalog.HoldsByName(t.arg)
	}
	test := fmt.Sprintf("%s.%s(%s)", t.subject, t.fn, quoteCEL(t.lit))
	if t.subject != "args."+t.arg {
		test += fmt.Sprintf(" (on each of args.%s)", t.arg)
	}
	// Only a prefix needs the '/' that ends a directory or host: a suffix
	// test with one added would never hold, and following the advice would
	// switch the rule off.
	lit, slash := t.lit, ""
	if t.fn == overloads.StartsWith {
		lit = safePrefix(t.lit)
	}
	switch holds {
	case v1alpha1.HoldsPath:
		if t.fn == overloads.StartsWith {
			slash = ", with a prefix that ends in '/'"
		}
		return fmt.Sprintf("%s tests a raw path: %s. Clean it first: path.clean(%s).%s(%s)%s; for absolute paths also require path.clean(%s).startsWith('/')",
			test, pathExample(t), t.subject, t.fn, quoteCEL(lit), slash, t.subject)
	case v1alpha1.HoldsURL:
		if t.fn == overloads.StartsWith {
			slash = ", with a prefix that ends in '/' after the host"
		}
		return fmt.Sprintf("%s tests a raw URL: https://example.com.evil.test/ and https://example.com@evil.test/ pass startsWith('https://example.com'), and ../ segments reach past a path prefix. Compare the canonical form: uri.canonical(%s).%s(%s)%s (uri.canonical lower-cases scheme and host, removes dot segments and refuses user info)",
			test, t.subject, t.fn, quoteCEL(lit), slash)
	}
	return ""
}

// openPrefix: a prefix of a cleaned path or canonical URL that does not end
// in '/' is passed by a sibling whose name goes on (/data/publicity passes
// startsWith('/data/public'), https://example.com.evil.test/ passes
// startsWith('https://example.com')).
func openPrefix(t prefixTest) string {
	if t.lit == "" || strings.HasSuffix(t.lit, "/") {
		return ""
	}
	test := fmt.Sprintf("%s(%s).startsWith(%s)", t.cleanedBy, t.subject, quoteCEL(t.lit))
	sibling := t.lit + "-old"
	if _, rest, ok := strings.Cut(t.lit, "://"); t.cleanedBy == "uri.canonical" && ok && !strings.Contains(rest, "/") {
		sibling = t.lit + ".evil.test/"
	}
	return fmt.Sprintf("%s is passed by %s, which is not under it: end the prefix in '/': %s(%s).startsWith(%s)",
		test, sibling, t.cleanedBy, t.subject, quoteCEL(t.lit+"/"))
}

// pathExample shows a path that passes the test and names something else.
func pathExample(t prefixTest) string {
	if t.fn == overloads.StartsWith && strings.HasPrefix(t.lit, "/") {
		escape := strings.TrimSuffix(t.lit, "/") + "/../secret/key.txt"
		return fmt.Sprintf("%s passes it and names %s", escape, path.Clean(escape))
	}
	return "a path with .. segments (/data/public/../secret/key.txt) passes a test that its cleaned form (/data/secret/key.txt) fails, and /x/key.pem/. ends in something else than the file it names"
}

// safePrefix is the literal of a startsWith test with the '/' a directory
// or host prefix needs; other literals stay as they are.
func safePrefix(lit string) string {
	if lit == "" || strings.HasSuffix(lit, "/") || strings.ContainsAny(lit, "^$*+?()[]|\\") {
		return lit
	}
	return lit + "/"
}

// quoteCEL writes s as a CEL string literal, or "..." for an expression
// that was not a literal.
func quoteCEL(s string) string {
	if s == "" {
		return "..."
	}
	if !strings.ContainsAny(s, "'\\\n") {
		return "'" + s + "'"
	}
	return fmt.Sprintf("%q", s)
}

// someOf names up to maxNamed items, saying how many more there are.
func someOf(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	if len(items) <= maxNamed {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:maxNamed], ", "), len(items)-maxNamed)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func them(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}
