package policy

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/policy/resourceuri"
)

// Reasons of decisions no rule made.
const (
	reasonDefault      = "no rule of a policy for this caller matches the request; denied by default"
	reasonDestructive  = "the tool is destructive: a destructive tool is never allowed without asking"
	reasonDotSegment   = "the resource URI holds a '..' path segment, which could escape the paths a policy names"
	reasonNotCanonical = "the resource URI is not in canonical form (package resourceuri): only the form a server will be sent is decided"
)

// Engine answers decisions from compiled policies. It is immutable and safe
// for concurrent use.
type Engine struct {
	// bySubject indexes policies by each subject they name and their own
	// namespace (the namespace of the servers they govern).
	bySubject map[policyKey][]*Policy
	policies  []*Policy
}

type policyKey struct {
	subject   subjectKey
	namespace string
}

// Compile compiles every policy and builds an engine of those that compiled.
// A policy with errors is left out (it is not in force, so its subjects get
// the default from it); its errors are returned.
func Compile(list []v1alpha1.ToolPolicy) (*Engine, []CompileError) {
	var compiled []*Policy
	var errs []CompileError
	for i := range list {
		p, perrs := CompilePolicy(&list[i])
		errs = append(errs, perrs...)
		if p != nil {
			compiled = append(compiled, p)
		}
	}
	return NewEngine(compiled...), errs
}

// NewEngine indexes compiled policies.
func NewEngine(policies ...*Policy) *Engine {
	sorted := append([]*Policy(nil), policies...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].namespace != sorted[j].namespace {
			return sorted[i].namespace < sorted[j].namespace
		}
		return sorted[i].name < sorted[j].name
	})
	e := &Engine{bySubject: map[policyKey][]*Policy{}, policies: sorted}
	for _, p := range sorted {
		for _, s := range p.subjects {
			k := policyKey{subject: s, namespace: p.namespace}
			if list := e.bySubject[k]; len(list) == 0 || list[len(list)-1] != p {
				e.bySubject[k] = append(list, p)
			}
		}
	}
	return e
}

// Policies are the compiled policies, sorted by namespace and name.
func (e *Engine) Policies() []*Policy { return e.policies }

// candidates appends the policies of namespace whose subjects match s, each
// once.
func (e *Engine) candidates(s Subject, namespace string, out []*Policy) []*Policy {
	var keyBuf [16]subjectKey
	for _, k := range s.appendKeys(keyBuf[:0]) {
		for _, p := range e.bySubject[policyKey{subject: k, namespace: namespace}] {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// DecideTool decides one tool call.
func (e *Engine) DecideTool(s Subject, call ToolCall) Result {
	risk := effectiveRisk(call.Risk)
	n, ok := cutName(call.Name, call.Server)
	if !ok {
		return Result{
			Decision: v1alpha1.DecisionDeny, RiskAtDecision: risk, SourcedFrom: SourceDefault, target: toolTarget(call.Name),
			Reason: fmt.Sprintf("malformed request: tool name %q is not mcp.<server>.<tool> of server %q", call.Name, call.Server),
		}
	}
	var matchBuf, condBuf [64]*rule
	matched, conditional := e.matchTool(s, call, n, riskBit(risk), matchBuf[:0], condBuf[:0])
	top := topLevel(matched)
	if len(conditional) > 0 && top != levelDeny {
		// Built only here: handing it to CEL puts it on the heap.
		in := &conditionInput{subject: s, call: call}
		for _, r := range conditional {
			ok, err := r.when.eval(in)
			if err != nil {
				res := Result{
					Decision: v1alpha1.DecisionDeny, Rules: []RuleRef{r.ref}, RiskAtDecision: risk,
					SourcedFrom: r.source, target: toolTarget(call.Name),
					Reason: fmt.Sprintf("the condition of %s failed, which denies the call: %v", r.source, err),
				}
				res.rateLimits = rateLimitsOf(append(matched, conditional...))
				return res
			}
			if ok {
				matched = append(matched, r)
				top = max(top, r.level)
				if top == levelDeny {
					// Nothing can be more restrictive: the remaining
					// conditions need not run.
					break
				}
			}
		}
	}
	res := conclude(matched, top, risk)
	res.target = toolTarget(call.Name)
	if risk == v1alpha1.RiskDestructive {
		capDestructive(&res, matched)
	}
	return res
}

// ToolRules lists the tool rules of the caller's policies that match the
// call by name and risk, whatever their conditions say: the rules that may
// decide it. kubectl mcp can-i shows their lint warnings.
func (e *Engine) ToolRules(s Subject, call ToolCall) []RuleRef {
	n, ok := cutName(call.Name, call.Server)
	if !ok {
		return nil
	}
	matched, conditional := e.matchTool(s, call, n, riskBit(effectiveRisk(call.Risk)), nil, nil)
	refs := make([]RuleRef, 0, len(matched)+len(conditional))
	for _, r := range append(matched, conditional...) {
		refs = append(refs, r.ref)
	}
	return refs
}

// matchTool appends the tool rules of the caller's policies that match the
// call by name and risk: without a condition to matched, with one to
// conditional.
func (e *Engine) matchTool(s Subject, call ToolCall, n name, bit riskSet, matched, conditional []*rule) ([]*rule, []*rule) {
	var polBuf [32]*Policy
	for _, p := range e.candidates(s, call.Namespace, polBuf[:0]) {
		matched, conditional = collectNames(p.tools.byServer[call.Server], n, bit, matched, conditional)
		matched, conditional = collectNames(p.tools.anyServer, n, bit, matched, conditional)
	}
	return matched, conditional
}

// collectNames appends the rules of entries that match n: those without a
// condition to matched, those with one to conditional.
func collectNames(entries []nameEntry, n name, bit riskSet, matched, conditional []*rule) ([]*rule, []*rule) {
	for i := range entries {
		e := &entries[i]
		if !e.matches(n, bit) {
			continue
		}
		if e.rule.when != nil {
			conditional = appendRule(conditional, e.rule)
		} else {
			matched = appendRule(matched, e.rule)
		}
	}
	return matched, conditional
}

// appendRule appends r unless the list has it: a rule with globs on a named
// server and on any server is found in both parts of the index.
func appendRule(list []*rule, r *rule) []*rule {
	if slices.Contains(list, r) {
		return list
	}
	return append(list, r)
}

func topLevel(rules []*rule) level {
	top := levelNone
	for _, r := range rules {
		top = max(top, r.level)
	}
	return top
}

// conclude turns the matched rules into a result: the most restrictive
// decision wins, no rule denies.
func conclude(matched []*rule, top level, risk v1alpha1.Risk) Result {
	if top == levelNone {
		return Result{Decision: v1alpha1.DecisionDeny, RiskAtDecision: risk, SourcedFrom: SourceDefault, Reason: reasonDefault}
	}
	var buf [64]*rule
	winners := buf[:0]
	block := false
	for _, r := range matched {
		if r.level == top {
			winners = append(winners, r)
		}
		// The most protective wins, as for decisions: any matching rule
		// that blocks blocks.
		block = block || r.blockInjection
	}
	sortRules(winners)
	res := Result{
		Decision:       top.decision(),
		Rules:          make([]RuleRef, len(winners)),
		RiskAtDecision: risk,
		SourcedFrom:    winners[0].source,
		Reason:         winners[0].reason,
		BlockInjection: block,
		rateLimits:     rateLimitsOf(matched),
	}
	for i, r := range winners {
		res.Rules[i] = r.ref
	}
	if top == levelAsk {
		res.Approval = approvalOf(winners)
	}
	return res
}

// sortRules orders rules by policy (namespace, name), section and index:
// insertion sort, as the lists are short.
func sortRules(rules []*rule) {
	less := func(a, b *rule) bool {
		if a.ref.Namespace != b.ref.Namespace {
			return a.ref.Namespace < b.ref.Namespace
		}
		if a.ref.Name != b.ref.Name {
			return a.ref.Name < b.ref.Name
		}
		if a.ref.Section != b.ref.Section {
			return a.ref.Section < b.ref.Section
		}
		return a.ref.Index < b.ref.Index
	}
	for i := 1; i < len(rules); i++ {
		for j := i; j > 0 && less(rules[j], rules[j-1]); j-- {
			rules[j], rules[j-1] = rules[j-1], rules[j]
		}
	}
}

// approvalOf combines the approval settings of the policies whose rules ask:
// only the modes and channels all of them offer (in the first policy's
// order), and the shortest timeout. With one policy
// asking (the usual case) its own settings are shared, not copied.
func approvalOf(asking []*rule) *Approval {
	first := &asking[0].policy.approval
	same := true
	for _, r := range asking[1:] {
		same = same && r.policy == asking[0].policy
	}
	if same {
		return first
	}
	a := &Approval{
		Timeout:  first.Timeout,
		Modes:    offeredByAll(first.Modes, asking[1:], func(o *Approval, m v1alpha1.ApprovalMode) bool { return o.Allows(m) }),
		Channels: offeredByAll(first.Channels, asking[1:], func(o *Approval, ch v1alpha1.ApprovalChannel) bool { return o.Offers(ch) }),
	}
	for _, r := range asking[1:] {
		a.Timeout = min(a.Timeout, r.policy.approval.Timeout)
	}
	return a
}

// offeredByAll keeps, in order, the items of the first asking policy that
// every other asking policy offers too.
func offeredByAll[T any](items []T, others []*rule, offers func(*Approval, T) bool) []T {
	var out []T
	for _, x := range items {
		all := true
		for _, r := range others {
			all = all && offers(&r.policy.approval, x)
		}
		if all {
			out = append(out, x)
		}
	}
	return out
}

// capDestructive turns allow into ask for a destructive tool, and never
// offers approval for the whole session: each destructive call is asked.
//
// The question goes through the channels of the policies that decided:
// those of the allowing rules (matched) when allow turns into ask.
func capDestructive(res *Result, matched []*rule) {
	if res.Decision == v1alpha1.DecisionAllow {
		res.Decision = v1alpha1.DecisionAsk
		res.Reason = reasonDestructive
		allowing := approvalOf(matched)
		res.Approval = &Approval{Modes: []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowOnce}, Timeout: allowing.Timeout, Channels: allowing.Channels}
		return
	}
	if res.Decision == v1alpha1.DecisionAsk && res.Approval.Allows(v1alpha1.ApprovalAllowSession) {
		a := &Approval{Timeout: res.Approval.Timeout, Channels: res.Approval.Channels}
		for _, m := range res.Approval.Modes {
			if m != v1alpha1.ApprovalAllowSession {
				a.Modes = append(a.Modes, m)
			}
		}
		res.Approval = a
	}
}

// rateLimitsOf lists, once each, the rate limits of the policies of rules.
func rateLimitsOf(rules []*rule) []*rateLimitSpec {
	var out []*rateLimitSpec
	for _, r := range rules {
		if rl := r.policy.rateLimit; rl != nil && !slices.Contains(out, rl) {
			out = append(out, rl)
		}
	}
	return out
}

// DecidePrompt decides one prompts/get. Prompts are decided at risk read.
func (e *Engine) DecidePrompt(s Subject, get PromptGet) Result {
	return e.decideName(s, get.Name, get.Server, get.Namespace, target{kind: kindPrompt, name: get.Name},
		func(p *Policy) *nameIndex { return &p.prompts })
}

// DecideSkill decides one skill: whether the subject may see it listed
// (skills/list), get its entry (skills/get) and read its files. Skills are
// decided at risk read; no matching rule denies, as everywhere.
func (e *Engine) DecideSkill(s Subject, get SkillGet) Result {
	return e.decideName(s, get.Name, get.Server, get.Namespace, target{kind: kindSkill, name: get.Name},
		func(p *Policy) *nameIndex { return &p.skills })
}

// decideName decides a namespaced name of one of the named kinds without
// conditions (prompts, skills) against the index of each candidate policy.
func (e *Engine) decideName(s Subject, full, server, namespace string, tgt target, index func(*Policy) *nameIndex) Result {
	n, ok := cutName(full, server)
	if !ok {
		return Result{
			Decision: v1alpha1.DecisionDeny, RiskAtDecision: v1alpha1.RiskRead, SourcedFrom: SourceDefault,
			Reason: fmt.Sprintf("malformed request: %s name %q is not mcp.<server>.<%s> of server %q", tgt.kind, full, tgt.kind, server),
		}
	}
	var polBuf [32]*Policy
	var matchBuf [64]*rule
	matched := matchBuf[:0]
	for _, p := range e.candidates(s, namespace, polBuf[:0]) {
		// These rules have no conditions, so nothing lands in the second list.
		x := index(p)
		matched, _ = collectNames(x.byServer[server], n, 0, matched, nil)
		matched, _ = collectNames(x.anyServer, n, 0, matched, nil)
	}
	res := conclude(matched, topLevel(matched), v1alpha1.RiskRead)
	res.target = tgt
	return res
}

// DecideResource decides one resources/read, at risk read. read.URI must be
// in canonical form (resourceuri.Canonical), the form the bridge forwards:
// globs match the string, so any other spelling of a denied resource could
// pass them. One that is not is denied, never matched.
func (e *Engine) DecideResource(s Subject, read ResourceRead) Result {
	if c, err := resourceuri.Canonical(read.URI); err != nil || c != read.URI {
		return Result{Decision: v1alpha1.DecisionDeny, RiskAtDecision: v1alpha1.RiskRead, SourcedFrom: SourceDefault, Reason: reasonNotCanonical}
	}
	if hasDotDotSegment(read.URI) {
		return Result{Decision: v1alpha1.DecisionDeny, RiskAtDecision: v1alpha1.RiskRead, SourcedFrom: SourceDefault, Reason: reasonDotSegment}
	}
	var polBuf [32]*Policy
	var matchBuf [64]*rule
	matched := matchBuf[:0]
	for _, p := range e.candidates(s, read.Namespace, polBuf[:0]) {
		for _, r := range p.resources {
			if r.matches(read) {
				matched = append(matched, &r.rule)
			}
		}
	}
	res := conclude(matched, topLevel(matched), v1alpha1.RiskRead)
	res.target = resourceTarget(read)
	return res
}

func (r *resourceRule) matches(read ResourceRead) bool {
	return anyMatch(r.servers, read.Server) && (len(r.uris) == 0 || anyMatch(r.uris, read.URI))
}

func anyMatch(globs []*Glob, s string) bool {
	for _, g := range globs {
		if g.Match(s) {
			return true
		}
	}
	return false
}

// hasDotDotSegment reports whether a URI's path climbs with '..', written
// plainly or percent-encoded, with '/' or '\' as separators. It errs on the
// side of denying: a '..' before a query or fragment counts too.
func hasDotDotSegment(uri string) bool {
	u := uri
	if strings.Contains(u, "%") {
		u = strings.NewReplacer("%2e", ".", "%2E", ".", "%2f", "/", "%2F", "/", "%5c", "/", "%5C", "/").Replace(u)
	}
	for _, seg := range strings.FieldsFunc(u, func(r rune) bool { return r == '/' || r == '\\' || r == '?' || r == '#' }) {
		if seg == ".." {
			return true
		}
	}
	return false
}
