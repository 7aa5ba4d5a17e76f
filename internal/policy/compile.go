package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/policy/resourceuri"
)

// CompileError is one thing wrong with a ToolPolicy, named by its field path
// so the author can find it.
type CompileError struct {
	// Policy is namespace/name.
	Policy string
	// Field is the path in the object, such as spec.rules[2].when.
	Field string
	// Message says what is wrong.
	Message string
}

func (e CompileError) Error() string { return e.Field + ": " + e.Message }

// Defaults of spec.approval, as the CRD sets them; repeated here for
// policies that did not pass through the API server.
const defaultApprovalTimeout = 2 * time.Minute

var defaultApprovalModes = []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowOnce, v1alpha1.ApprovalAllowSession}

var defaultApprovalChannels = []v1alpha1.ApprovalChannel{v1alpha1.ChannelElicitation}

// level orders decisions by how restrictive they are; 0 is "no rule".
type level uint8

const (
	levelNone level = iota
	levelAllow
	levelAsk
	levelDeny
)

func levelOf(d v1alpha1.Decision) level {
	switch d {
	case v1alpha1.DecisionAllow:
		return levelAllow
	case v1alpha1.DecisionAsk:
		return levelAsk
	case v1alpha1.DecisionDeny:
		return levelDeny
	}
	return levelNone
}

func (l level) decision() v1alpha1.Decision {
	switch l {
	case levelAllow:
		return v1alpha1.DecisionAllow
	case levelAsk:
		return v1alpha1.DecisionAsk
	}
	return v1alpha1.DecisionDeny
}

// riskSet is a set of risks as bits; 0 means "any risk".
type riskSet uint8

func riskBit(r v1alpha1.Risk) riskSet {
	switch r {
	case v1alpha1.RiskRead:
		return 1
	case v1alpha1.RiskWrite:
		return 2
	case v1alpha1.RiskNetwork:
		return 4
	case v1alpha1.RiskDestructive:
		return 8
	}
	return 0
}

// rule is one compiled rule of any section.
type rule struct {
	ref    RuleRef
	source string // ref.String(), computed once
	level  level
	reason string
	policy *Policy
	// risks and when are set on tool rules only.
	risks riskSet
	when  *Condition
	// blockInjection: a result of a request the rule matches is withheld
	// when the injection scan flags it (tool and prompt rules only).
	blockInjection bool
}

// nameEntry is a rule's claim on tool or prompt names. Under a server of the
// index, its globs match the tail (<name> of mcp.<server>.<name>). Under any
// server, either server and globs match the server's name and the tail (the
// glob was mcp.<server glob>.<tail glob>), or the globs match the whole name
// (the glob crosses dots before the tail, as mcp.** does). No globs: every
// name (a tool rule with risks only).
type nameEntry struct {
	rule   *rule
	server *Glob
	globs  []*Glob
	full   bool
}

// name is a namespaced name cut into its parts, once per decision.
type name struct {
	full, server, tail string
}

// nameIndex finds the rules that may match a namespaced name without
// looking at the rules of other servers.
type nameIndex struct {
	byServer  map[string][]nameEntry
	anyServer []nameEntry
}

func (x *nameIndex) add(server string, e nameEntry) {
	if server == "" {
		x.anyServer = append(x.anyServer, e)
		return
	}
	if x.byServer == nil {
		x.byServer = map[string][]nameEntry{}
	}
	x.byServer[server] = append(x.byServer[server], e)
}

type resourceRule struct {
	rule
	servers []*Glob
	uris    []*Glob // none: every URI
}

type rateLimitSpec struct {
	ref                   RuleRef
	source                string
	policy                string // namespace/name
	callsPerMinute, burst int
}

// Policy is one compiled ToolPolicy.
type Policy struct {
	namespace, name string
	subjects        []subjectKey
	tools           nameIndex
	prompts         nameIndex
	skills          nameIndex
	resources       []*resourceRule
	approval        Approval
	rateLimit       *rateLimitSpec
}

// Namespace and Name of the ToolPolicy.
func (p *Policy) Namespace() string { return p.namespace }

// Name of the ToolPolicy.
func (p *Policy) Name() string { return p.name }

// MatchesTool reports whether some tool rule of the policy matches the tool by
// name and risk, whoever calls it and whatever its `when` says. The
// controller uses it to report the tools a policy reaches.
func (p *Policy) MatchesTool(server, fullName string, risk v1alpha1.Risk) bool {
	n, ok := cutName(fullName, server)
	if !ok {
		return false
	}
	bit := riskBit(effectiveRisk(risk))
	for _, e := range p.tools.byServer[server] {
		if e.matches(n, bit) {
			return true
		}
	}
	for _, e := range p.tools.anyServer {
		if e.matches(n, bit) {
			return true
		}
	}
	return false
}

// matches reports whether the entry covers the name at the risk. Entries
// under a server of the index are only asked about names of that server.
func (e *nameEntry) matches(n name, bit riskSet) bool {
	if e.rule.risks != 0 && e.rule.risks&bit == 0 {
		return false
	}
	if e.globs == nil {
		return true
	}
	s := n.tail
	if e.server != nil {
		if !e.server.Match(n.server) {
			return false
		}
	} else if e.full {
		s = n.full
	}
	for _, g := range e.globs {
		if g.Match(s) {
			return true
		}
	}
	return false
}

// cutName cuts mcp.<server>.<name>, and reports whether full has that form
// for server, whose name (a DNS label) has no dots.
func cutName(full, server string) (name, bool) {
	const prefix = "mcp."
	if server == "" || strings.IndexByte(server, '.') >= 0 || len(full) <= len(prefix)+len(server)+1 ||
		full[:len(prefix)] != prefix || full[len(prefix):len(prefix)+len(server)] != server ||
		full[len(prefix)+len(server)] != '.' {
		return name{}, false
	}
	return name{full: full, server: server, tail: full[len(prefix)+len(server)+1:]}, true
}

// compiler gathers the errors of one policy.
type compiler struct {
	p    *Policy
	errs []CompileError
}

func (c *compiler) fail(field, format string, args ...any) {
	c.errs = append(c.errs, CompileError{
		Policy:  c.p.namespace + "/" + c.p.name,
		Field:   field,
		Message: fmt.Sprintf(format, args...),
	})
}

// CompilePolicy checks and compiles one ToolPolicy. With errors the policy is
// not in force and the returned Policy is nil. It checks what the CRD schema
// checks too, for policies that did not pass through an API server.
func CompilePolicy(tp *v1alpha1.ToolPolicy) (*Policy, []CompileError) {
	c := &compiler{p: &Policy{namespace: tp.Namespace, name: tp.Name}}
	spec := &tp.Spec
	if len(spec.Subjects) == 0 {
		c.fail("spec.subjects", "a policy needs at least one subject")
	}
	for i, s := range spec.Subjects {
		c.subject(fmt.Sprintf("spec.subjects[%d]", i), s)
	}
	if len(spec.Rules)+len(spec.Resources)+len(spec.Prompts)+len(spec.Skills) == 0 {
		c.fail("spec", "a policy needs at least one of rules, resources, prompts or skills")
	}
	for i := range spec.Rules {
		c.toolRule(i, &spec.Rules[i])
	}
	for i := range spec.Resources {
		c.resourceRule(i, &spec.Resources[i])
	}
	for i := range spec.Prompts {
		c.promptRule(i, &spec.Prompts[i])
	}
	for i := range spec.Skills {
		c.skillRule(i, &spec.Skills[i])
	}
	c.approval(&spec.Approval)
	c.rateLimit(spec.RateLimit)
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	return c.p, nil
}

func (c *compiler) subject(field string, s v1alpha1.Subject) {
	switch s.Kind {
	case v1alpha1.SubjectServiceAccount:
		if s.Namespace == "" {
			c.fail(field+".namespace", "a ServiceAccount subject needs its namespace")
			return
		}
	case v1alpha1.SubjectUser, v1alpha1.SubjectGroup:
		if s.Namespace != "" {
			c.fail(field+".namespace", "namespace is only for ServiceAccount subjects")
			return
		}
	default:
		c.fail(field+".kind", "unknown subject kind %q: use ServiceAccount, User or Group", s.Kind)
		return
	}
	if s.Name == "" {
		c.fail(field+".name", "a subject needs a name")
		return
	}
	c.p.subjects = append(c.p.subjects, keyOfPolicySubject(s))
}

// newRule fills what every section's rule has.
func (c *compiler) newRule(field, section string, i int, d v1alpha1.Decision, reason string) *rule {
	r := &rule{
		ref:    RuleRef{Namespace: c.p.namespace, Name: c.p.name, Section: section, Index: i},
		level:  levelOf(d),
		reason: reason,
		policy: c.p,
	}
	r.source = r.ref.String()
	if r.level == levelNone {
		c.fail(field+".decision", "unknown decision %q: use allow, deny or ask", d)
	}
	if r.reason == "" {
		switch r.level {
		case levelAllow:
			r.reason = "allowed by " + r.source
		case levelAsk:
			r.reason = "approval required by " + r.source
		default:
			r.reason = "denied by " + r.source
		}
	}
	return r
}

func (c *compiler) toolRule(i int, tr *v1alpha1.ToolRule) {
	field := fmt.Sprintf("spec.rules[%d]", i)
	r := c.newRule(field, sectionRules, i, tr.Decision, tr.Reason)
	if len(tr.Tools) == 0 && len(tr.Risks) == 0 {
		c.fail(field, "a rule needs tools, risks or both to say what it matches")
	}
	for j, risk := range tr.Risks {
		bit := riskBit(risk)
		if bit == 0 {
			c.fail(fmt.Sprintf("%s.risks[%d]", field, j), "unknown risk %q: use read, write, network or destructive", risk)
		}
		r.risks |= bit
	}
	if tr.When != "" {
		cond, err := CompileCondition(tr.When)
		if err != nil {
			c.fail(field+".when", "%v", err)
		}
		r.when = cond
	}
	r.blockInjection = c.injection(field+".injection", tr.Injection)
	c.names(&c.p.tools, field+".tools", "tool", r, tr.Tools)
}

// injection compiles a rule's injection action; empty is Flag, the CRD's
// default.
func (c *compiler) injection(field string, a v1alpha1.InjectionAction) bool {
	switch a {
	case "", v1alpha1.InjectionFlag:
		return false
	case v1alpha1.InjectionBlock:
		return true
	}
	c.fail(field, "unknown injection action %q: use Flag or Block", a)
	return false
}

func (c *compiler) promptRule(i int, pr *v1alpha1.PromptRule) {
	field := fmt.Sprintf("spec.prompts[%d]", i)
	r := c.newRule(field, sectionPrompts, i, pr.Decision, "")
	r.blockInjection = c.injection(field+".injection", pr.Injection)
	if len(pr.Prompts) == 0 {
		c.fail(field+".prompts", "a prompt rule needs at least one prompt glob")
		return
	}
	c.names(&c.p.prompts, field+".prompts", "prompt", r, pr.Prompts)
}

func (c *compiler) skillRule(i int, sr *v1alpha1.SkillRule) {
	field := fmt.Sprintf("spec.skills[%d]", i)
	r := c.newRule(field, sectionSkills, i, sr.Decision, "")
	if r.level == levelAsk {
		// A skill is loaded by the agent's host: no call waits for a person.
		c.fail(field+".decision", "a skill rule decides allow or deny, not ask")
	}
	if len(sr.Skills) == 0 {
		c.fail(field+".skills", "a skill rule needs at least one skill glob")
		return
	}
	c.names(&c.p.skills, field+".skills", "skill", r, sr.Skills)
}

// names compiles the globs of a tool or prompt rule into the index: a glob
// with a literal server segment goes under that server, the rest under any
// server, split into server and tail globs where they can be. No globs (a
// tool rule with risks only) matches every name.
func (c *compiler) names(x *nameIndex, field, what string, r *rule, globs []string) {
	if len(globs) == 0 {
		x.add("", nameEntry{rule: r})
		return
	}
	byServer := map[string][]*Glob{}
	var order []string
	for j, pattern := range globs {
		f := fmt.Sprintf("%s[%d]", field, j)
		g, err := CompileGlob(pattern, NameGlob)
		if err != nil {
			c.fail(f, "%v", err)
			continue
		}
		if msg := nameGlobProblem(pattern, what); msg != "" {
			c.fail(f, "%s", msg)
			continue
		}
		serverPattern, tailPattern, ok := splitServerGlob(pattern)
		if !ok {
			x.add("", nameEntry{rule: r, globs: []*Glob{g}, full: true})
			continue
		}
		// Both parts of a glob that compiled compile too.
		tail, err := CompileGlob(tailPattern, NameGlob)
		if err != nil {
			c.fail(f, "%v", err)
			continue
		}
		if hasWildcard(serverPattern) {
			server, err := CompileGlob(serverPattern, NameGlob)
			if err != nil {
				c.fail(f, "%v", err)
				continue
			}
			x.add("", nameEntry{rule: r, server: server, globs: []*Glob{tail}})
			continue
		}
		if _, seen := byServer[serverPattern]; !seen {
			order = append(order, serverPattern)
		}
		byServer[serverPattern] = append(byServer[serverPattern], tail)
	}
	for _, server := range order {
		x.add(server, nameEntry{rule: r, globs: byServer[server]})
	}
}

// nameGlobProblem explains why a glob can match no namespaced name, or is
// "" when it may match some.
func nameGlobProblem(pattern, what string) string {
	const prefix = "mcp."
	literal := pattern
	if i := strings.IndexAny(pattern, "*?"); i >= 0 {
		literal = pattern[:i]
	}
	if len(literal) >= len(prefix) && !strings.HasPrefix(literal, prefix) ||
		len(literal) < len(prefix) && !strings.HasPrefix(prefix, literal) {
		return fmt.Sprintf("%q can never match: %s names are namespaced as mcp.<server>.<%s>; did you mean %q?", pattern, what, what, prefix+pattern)
	}
	if !strings.Contains(pattern, "**") && strings.Count(pattern, ".") < 2 {
		return fmt.Sprintf("%q can never match: %s names are namespaced as mcp.<server>.<%s>, and '*' does not cross a '.'; write mcp.<server>.* for every %s of a server or mcp.** for all", pattern, what, what, what)
	}
	return ""
}

// splitServerGlob splits mcp.<server>.<tail> when <server> is one name
// segment ('**' in it could cross into the tail).
func splitServerGlob(pattern string) (server, tail string, ok bool) {
	after, ok := strings.CutPrefix(pattern, "mcp.")
	if !ok {
		return "", "", false
	}
	server, tail, ok = strings.Cut(after, ".")
	if !ok || server == "" || tail == "" || strings.Contains(server, "**") {
		return "", "", false
	}
	return server, tail, true
}

func (c *compiler) resourceRule(i int, rr *v1alpha1.ResourceRule) {
	field := fmt.Sprintf("spec.resources[%d]", i)
	r := &resourceRule{rule: *c.newRule(field, sectionResources, i, rr.Decision, "")}
	if len(rr.Servers) == 0 {
		c.fail(field+".servers", "a resource rule needs at least one server glob (use '*' for every server)")
	}
	for j, pattern := range rr.Servers {
		g, err := CompileGlob(pattern, NameGlob)
		if err == nil && strings.Contains(pattern, ".") {
			err = fmt.Errorf("%q can never match: server names have no dots", pattern)
		}
		if err != nil {
			c.fail(fmt.Sprintf("%s.servers[%d]", field, j), "%v", err)
			continue
		}
		r.servers = append(r.servers, g)
	}
	for j, pattern := range rr.URIs {
		g, err := CompileGlob(pattern, URIGlob)
		if err != nil {
			c.fail(fmt.Sprintf("%s.uris[%d]", field, j), "%v", err)
			continue
		}
		// URIs are decided in canonical form only, so a glob in another
		// form would never match: a deny rule that silently denies nothing.
		if canonical, err := resourceuri.Canonical(pattern); err == nil && canonical != pattern {
			c.fail(fmt.Sprintf("%s.uris[%d]", field, j), "%q is not in canonical form and would match no URI (URIs are decided in canonical form: lower-case scheme and host, no dot segments or repeated slashes, no escaped unreserved characters); write %q", pattern, canonical)
			continue
		}
		r.uris = append(r.uris, g)
	}
	c.p.resources = append(c.p.resources, r)
}

func (c *compiler) approval(a *v1alpha1.ApprovalSpec) {
	c.p.approval = Approval{Modes: defaultApprovalModes, Timeout: defaultApprovalTimeout, Channels: defaultApprovalChannels}
	if a.Timeout.Duration != 0 {
		if a.Timeout.Duration < time.Second || a.Timeout.Duration > time.Hour {
			c.fail("spec.approval.timeout", "approval timeout must be between 1s and 1h, not %s", a.Timeout.Duration)
		}
		c.p.approval.Timeout = a.Timeout.Duration
	}
	if len(a.Modes) > 0 {
		c.p.approval.Modes = knownOnce(c, "spec.approval.modes", "approval mode", a.Modes, v1alpha1.ApprovalAllowOnce, v1alpha1.ApprovalAllowSession)
	}
	if len(a.Channels) > 0 {
		c.p.approval.Channels = knownOnce(c, "spec.approval.channels", "approval channel", a.Channels, v1alpha1.ChannelElicitation, v1alpha1.ChannelToolApproval)
	}
}

// knownOnce returns the items that are among known, each once, in order; an
// unknown item is a compile error at its index.
func knownOnce[T ~string](c *compiler, field, what string, items []T, known ...T) []T {
	var out []T
	for j, x := range items {
		switch {
		case !slices.Contains(known, x):
			names := make([]string, len(known))
			for i, k := range known {
				names[i] = string(k)
			}
			c.fail(fmt.Sprintf("%s[%d]", field, j), "unknown %s %q: use %s", what, x, strings.Join(names, " or "))
		case !slices.Contains(out, x):
			out = append(out, x)
		}
	}
	return out
}

func (c *compiler) rateLimit(rl *v1alpha1.RateLimit) {
	if rl == nil {
		return
	}
	if rl.CallsPerMinute < 1 {
		c.fail("spec.rateLimit.callsPerMinute", "must be at least 1, not %d", rl.CallsPerMinute)
		return
	}
	if rl.Burst < 0 {
		c.fail("spec.rateLimit.burst", "must be at least 1, not %d", rl.Burst)
		return
	}
	spec := &rateLimitSpec{
		ref:            RuleRef{Namespace: c.p.namespace, Name: c.p.name, Section: sectionRateLimit},
		policy:         c.p.namespace + "/" + c.p.name,
		callsPerMinute: int(rl.CallsPerMinute),
		burst:          int(rl.Burst),
	}
	if spec.burst == 0 {
		spec.burst = spec.callsPerMinute
	}
	spec.source = spec.ref.String()
	c.p.rateLimit = spec
}
