package redact

import (
	"math"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"
)

// glAllowlist and glRule hold gitleaks' rules as gitleaks_rules.go writes
// them (see hack/gitleaksgen).
type glAllowlist struct {
	And       bool   // every criterion must hold (gitleaks' condition AND)
	Other     bool   // it also names paths or commits, which a result never has
	Target    string // what Regexes test: "" the secret, "match" or "line"
	Regexes   []string
	StopWords []string // lower-case
}

type glRule struct {
	ID         string
	Regex      string
	Group      int // the group holding the secret; 0: the first non-empty one
	Entropy    float64
	Keywords   []string // lower-case; a rule without keywords runs on every text
	Allowlists []glAllowlist
}

// The matching works in two steps, as gitleaks' does: a pass over the text
// looks for the rules' keywords, and a rule's regexp runs only near one of
// its keywords. gitleaks runs a regexp over the whole text when its keyword
// is anywhere in it; here the regexp runs at the keyword (anchored) when
// every match of the rule starts with one of its keywords, and otherwise in
// a window around it, so a text costs one pass plus a little per keyword.

// windowBefore and windowAfter bound the text searched around a keyword when
// the match may start before it; windowMaxLen bounds a rule's match length in
// the window's size (a match reaching the window's end is searched again in
// the rest of the text).
const (
	windowBefore = 128
	windowAfter  = 128
	windowMaxLen = 1024
)

type glAllow struct {
	and       bool
	target    string
	regexes   []*regexp.Regexp
	stopWords []string
}

type glMatcher struct {
	kind     Kind
	re       *regexp.Regexp // the rule's own regexp, for windows
	anchored *regexp.Regexp // ^(?:re) without a leading identifier run; nil: search in windows
	boundary bool           // anchored matches start at a word boundary (\b)
	leads    leads          // what the first bytes of an anchored match may be
	idRun    bool           // the rule starts with identifierRun, which anchored leaves out
	named    bool           // its groups are named parts of the match, not the secret
	assign   int            // > 0: an assignment rule (assignment), whose value is at least this long
	nameLen  int            // for assign: the longest name, keyword included
	maxLen   int            // longest match, at most windowMaxLen
	// holds are strings (lower-case), one of which every match holds: a
	// window without any is not searched. A rule whose keyword is in its
	// value (New Relic's "nrak") needs its name too ("newrelic"), which
	// the text around most keywords found lacks; its regexp costs up to a
	// millisecond a window.
	holds   []string
	group   int
	entropy float64
	allow   []glAllow
}

// keywordIndex finds the rules' keywords: for each case-folded pair of
// bytes, the keywords that start with it.
type keywordIndex struct {
	pairs  [1 << 16 / 64]uint64 // the pairs of byPair, as bits: 8 KiB stay in the L1 cache
	byPair [1 << 16]uint16      // index+1 into groups
	groups [][]keyword
	thirds [][4]uint64 // for each group, the (lower-case) third bytes of its keywords; all for a two-byte keyword
	always []int       // rules without keywords
	rules  []glRule
	// matchers are the rules' compiled regexps, each compiled when its rule
	// first runs (rule): all of them hold about 4 MB, and most texts reach
	// none, so a bridge pays only for the rules its results call on.
	matchers []lazyMatcher
	global   func() []glAllow
}

type lazyMatcher struct {
	once sync.Once
	m    glMatcher
}

type keyword struct {
	lit   string // lower-case
	rules []int
}

// gitleaksGeneric is gitleaks' rule for any name that says key, token,
// password or secret, with a value of high entropy.
var gitleaksGeneric = func() Kind {
	for i, r := range gitleaksRules {
		if r.ID == "generic-api-key" {
			return firstGitleaksKind + Kind(i)
		}
	}
	panic("gitleaks has no generic-api-key rule")
}()

// gitleaks returns the rules' keyword index, built on first use (the first
// Redactor, Shapes at program start): the keywords only; each rule's regexps
// are compiled when a text first reaches it.
var gitleaks = sync.OnceValue(func() *keywordIndex { return compileGitleaks(gitleaksRules, gitleaksGlobal) })

func compileGitleaks(rules []glRule, global []glAllowlist) *keywordIndex {
	ix := &keywordIndex{
		rules:    rules,
		matchers: make([]lazyMatcher, len(rules)),
		global:   sync.OnceValue(func() []glAllow { return compileAllowlists(global) }),
	}
	byLit := map[string]int{}
	for i, r := range rules {
		if len(r.Keywords) == 0 {
			ix.always = append(ix.always, i)
		}
		for _, k := range r.Keywords {
			g, ok := byLit[k]
			if !ok {
				pair := uint16(k[0])<<8 | uint16(k[1])
				ix.pairs[pair/64] |= 1 << (pair % 64)
				if ix.byPair[pair] == 0 {
					ix.groups = append(ix.groups, nil)
					ix.thirds = append(ix.thirds, [4]uint64{})
					ix.byPair[pair] = uint16(len(ix.groups))
				}
				gi := int(ix.byPair[pair]) - 1
				if len(k) == 2 {
					ix.thirds[gi] = [4]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
				} else {
					ix.thirds[gi][k[2]/64] |= 1 << (k[2] % 64)
				}
				ix.groups[gi] = append(ix.groups[gi], keyword{lit: k})
				g = gi<<16 | (len(ix.groups[gi]) - 1)
				byLit[k] = g
			}
			kw := &ix.groups[g>>16][g&0xffff]
			kw.rules = append(kw.rules, i)
		}
	}
	return ix
}

// rule returns rule ri's matcher, compiled on its first call; safe for
// concurrent use.
func (ix *keywordIndex) rule(ri int) *glMatcher {
	lm := &ix.matchers[ri]
	lm.once.Do(func() { lm.m = compileRule(ix.rules[ri], firstGitleaksKind+Kind(ri)) })
	return &lm.m
}

func compileRule(r glRule, kind Kind) glMatcher {
	m := glMatcher{
		kind:    kind,
		re:      regexp.MustCompile(r.Regex),
		group:   r.Group,
		entropy: r.Entropy,
		allow:   compileAllowlists(r.Allowlists),
	}
	m.anchored, m.boundary, m.maxLen = anchor(r.Regex, r.Keywords)
	if m.anchored == nil {
		m.holds = required(r.Regex)
	}
	if m.anchored != nil {
		tree, err := syntax.Parse(m.anchored.String(), syntax.Perl)
		if err != nil {
			panic(err) // it compiled
		}
		m.leads = leadsOf(tree)
	}
	m.idRun = m.anchored != nil && strings.HasPrefix(strings.TrimPrefix(r.Regex, "(?i)"), identifierRun)
	m.assign, m.nameLen = assignedValueLen(r.Regex, r.Keywords)
	for _, name := range m.re.SubexpNames() {
		m.named = m.named || name != ""
	}
	return m
}

func compileAllowlists(as []glAllowlist) []glAllow {
	var out []glAllow
	for _, a := range as {
		if a.And && a.Other {
			continue // holds only for some files or commits
		}
		c := glAllow{and: a.And, target: a.Target, stopWords: a.StopWords}
		for _, re := range a.Regexes {
			c.regexes = append(c.regexes, regexp.MustCompile(re))
		}
		if len(c.regexes) > 0 || len(c.stopWords) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// assignment is how gitleaks' generated rules for a name and a value go on
// after the name: an operator, then the value. Some rules close a group of
// their own between the blanks and the operator (wrappedAssignment).
const (
	assignment        = `(?:[ \t\w.-]{0,20})[\s'"]{0,3}(?:=|>|:{1,3}=|\|\||:|=>|\?=|,)[\x60'"\s=]{0,5}(`
	wrappedAssignment = `(?:[ \t\w.-]{0,20})[\s'"]{0,3})(?:=|>|:{1,3}=|\|\||:|=>|\?=|,)[\x60'"\s=]{0,5}(`
)

// assignedValueLen returns, for a rule made of a name, an assignment and a
// value, whose keywords are all names (so a keyword found is followed by
// the assignment), the shortest value it matches and the longest name; 0
// for other rules (a keyword of the value, as
// "live_" of Lob's keys, says nothing of what follows it).
func assignedValueLen(re string, keywords []string) (valueLen, nameLen int) {
	at, wrapped := strings.Index(re, assignment), false
	if at < 0 {
		at, wrapped = strings.Index(re, wrappedAssignment), true
	}
	if at < 0 || !strings.HasPrefix(strings.TrimPrefix(re, "(?i)"), identifierRun) {
		return 0, 0
	}
	name := re[:at]
	if wrapped {
		name += ")"
	}
	nameRe, err := regexp.Compile("(?i)" + name)
	if err != nil {
		return 0, 0
	}
	for _, k := range keywords {
		if !nameRe.MatchString(k) {
			return 0, 0
		}
	}
	// The name itself, without the runs of name bytes before it.
	bare := strings.ReplaceAll(strings.TrimPrefix(name, "(?i)"), identifierRun, "")
	bareTree, err := syntax.Parse(bare, syntax.Perl|syntax.FoldCase)
	if err != nil {
		return 0, 0
	}
	tree, err := syntax.Parse(re, syntax.Perl)
	if err != nil || tree.Op != syntax.OpConcat {
		return 0, 0 // an alternation: the rule also matches other text
	}
	var value *syntax.Regexp
	var walk func(*syntax.Regexp)
	walk = func(r *syntax.Regexp) {
		if r.Op == syntax.OpCapture && r.Cap == 1 {
			value = r
		}
		for _, sub := range r.Sub {
			walk(sub)
		}
	}
	walk(tree)
	if value == nil {
		return 0, 0
	}
	return max(1, shortest(value.Simplify())), longest(bareTree.Simplify())
}

// shortest is the length in bytes of re's shortest match.
func shortest(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		return len(string(re.Rune))
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1
	case syntax.OpCapture, syntax.OpPlus:
		return shortest(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min * shortest(re.Sub[0])
	case syntax.OpConcat:
		n := 0
		for _, s := range re.Sub {
			n += shortest(s)
		}
		return n
	case syntax.OpAlternate:
		n := math.MaxInt32
		for _, s := range re.Sub {
			n = min(n, shortest(s))
		}
		return n
	}
	return 0
}

// mayAssign says, cheaply, whether the name found at s[at:] may be followed
// by an assignment of a value at least n bytes long, as assignment
// describes: the name (up to nameLen bytes from the keyword on) and up to 20
// more name bytes or blanks, up to 3 blanks or quotes, an operator, up to 5 quotes or
// blanks, and then n bytes that are neither blanks nor quotes. It never says
// no to a match.
func mayAssign(s string, at, n, nameLen int) bool {
	i, limit := at, min(len(s), at+nameLen+20)
	for i < limit && isNameRunByte[s[i]] {
		i++
	}
	for j := 0; j < 3 && i < len(s) && isBlankOrQuote[s[i]]; j++ {
		i++
	}
	if i == len(s) || !isOperatorByte[s[i]] {
		return false
	}
	for i < len(s) && isOperatorByte[s[i]] {
		i++
	}
	for j := 0; j < 5 && i < len(s) && (isBlankOrQuote[s[i]] || s[i] == '`' || s[i] == '='); j++ {
		i++
	}
	from := i
	for i < len(s) && i-from < n && !isBlankOrQuote[s[i]] && s[i] != '`' {
		i++
	}
	return i-from >= n
}

// Byte classes of mayAssign, as tables: it runs at every keyword.
var (
	isNameRunByte  = byteSet(func(b byte) bool { return isWordByte(b) || b == ' ' || b == '\t' || b == '.' || b == '-' })
	isBlankOrQuote = byteSet(func(b byte) bool { return strings.IndexByte(" \t\r\n\v\f'\"", b) >= 0 })
	isOperatorByte = byteSet(func(b byte) bool { return strings.IndexByte("=>:|?,", b) >= 0 })
)

func byteSet(in func(byte) bool) (set [256]bool) {
	for b := range set {
		set[b] = in(byte(b))
	}
	return set
}

// identifierRun is how gitleaks' generated rules start: the rest of the
// name before the identifier the rule looks for.
const identifierRun = `[\w.-]{0,50}?`

// anchor returns the regexp to run at a keyword when every match of re
// starts with one of the keywords (or with an identifierRun before one,
// which can match nothing), whether such a match starts with \b, and the
// longest match of re (at most windowMaxLen).
func anchor(re string, keywords []string) (*regexp.Regexp, bool, int) {
	full, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		panic(err) // the rules are compiled by regexp.MustCompile first
	}
	maxLen := min(longest(full.Simplify()), windowMaxLen)
	if len(keywords) == 0 {
		return nil, false, maxLen
	}
	flags, rest, tree, err := afterIdentifierRun(re)
	if err != nil {
		return nil, false, maxLen
	}
	boundary := tree.Op == syntax.OpConcat && len(tree.Sub) > 0 && tree.Sub[0].Op == syntax.OpWordBoundary
	starts, ok := prefixes(tree, 8)
	if !ok {
		return nil, false, maxLen
	}
	for _, p := range starts {
		if !startsWithKeyword(p, keywords) {
			return nil, false, maxLen
		}
	}
	return regexp.MustCompile(`^(?:` + flags + rest + `)`), boundary, maxLen
}

// afterIdentifierRun splits re into its flags and what follows its leading
// identifier run (which can match nothing), and parses the latter.
func afterIdentifierRun(re string) (flags, rest string, tree *syntax.Regexp, err error) {
	rest = re
	if strings.HasPrefix(rest, "(?i)") {
		flags, rest = "(?i)", rest[len("(?i)"):]
	}
	rest = strings.TrimPrefix(rest, identifierRun)
	tree, err = syntax.Parse(flags+rest, syntax.Perl)
	if err != nil {
		return "", "", nil, err
	}
	return flags, rest, tree.Simplify(), nil
}

// required returns strings, lower-cased, one of which every match of re
// holds: the starts of what follows its leading identifier run, or nil
// when there is no short list of them.
func required(re string) []string {
	_, _, tree, err := afterIdentifierRun(re)
	if err != nil {
		return nil
	}
	starts, ok := prefixes(tree, 8)
	if !ok || slices.Contains(starts, "") {
		return nil
	}
	return starts
}

// holdsAny says whether s holds one of lits (lower-case), in any case.
func holdsAny(s string, lits []string) bool {
	for i := range s {
		for _, l := range lits {
			if toLower[s[i]] == l[0] && hasPrefixFold(s[i:], l) {
				return true
			}
		}
	}
	return false
}

func startsWithKeyword(p string, keywords []string) bool {
	for _, k := range keywords {
		if strings.HasPrefix(p, k) || strings.HasPrefix(k, p) && len(p) >= 2 {
			return true
		}
	}
	return false
}

// prefixes lists, lower-cased, strings one of which starts every match of
// re, each up to n bytes long; ok is false when there is no such short list.
func prefixes(re *syntax.Regexp, n int) (out []string, ok bool) {
	const most = 64
	switch re.Op {
	case syntax.OpLiteral:
		s := strings.ToLower(string(re.Rune))
		return []string{s[:min(len(s), n)]}, true
	case syntax.OpCharClass:
		var rs []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				rs = append(rs, strings.ToLower(string(r)))
				if len(rs) > 8 {
					return nil, false
				}
			}
		}
		return dedupe(rs), true
	case syntax.OpCapture:
		return prefixes(re.Sub[0], n)
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			ps, ok := prefixes(sub, n)
			if !ok {
				return nil, false
			}
			out = append(out, ps...)
		}
		if len(out) > most {
			return nil, false
		}
		return dedupe(out), true
	case syntax.OpConcat:
		subs := re.Sub
		for len(subs) > 0 && subs[0].Op == syntax.OpWordBoundary {
			subs = subs[1:]
		}
		if len(subs) == 0 {
			return nil, false
		}
		out, ok = prefixes(subs[0], n)
		if !ok {
			return nil, false
		}
		// Extend the prefixes with what follows while each is the whole
		// match of its part (a literal or a small class).
		for _, next := range subs[1:] {
			if !fixed(subs[0]) {
				break
			}
			more, ok := prefixes(next, n)
			if !ok || len(out)*len(more) > most {
				break
			}
			var ext []string
			for _, a := range out {
				for _, b := range more {
					ext = append(ext, (a + b)[:min(len(a)+len(b), n)])
				}
			}
			out = dedupe(ext)
			if !fixed(next) {
				break
			}
			subs = subs[1:]
		}
		return out, true
	case syntax.OpRepeat, syntax.OpPlus:
		if re.Op == syntax.OpRepeat && re.Min < 1 {
			return nil, false
		}
		return prefixes(re.Sub[0], n)
	}
	return nil, false
}

// fixed says whether re always matches a string prefixes lists whole.
func fixed(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpLiteral, syntax.OpCharClass:
		return true
	case syntax.OpCapture:
		return fixed(re.Sub[0])
	}
	return false
}

func dedupe(ss []string) []string {
	seen := map[string]bool{}
	out := ss[:0]
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// longest is the length in bytes of re's longest match, math.MaxInt32 when
// unbounded.
func longest(re *syntax.Regexp) int {
	const inf = math.MaxInt32
	add := func(a, b int) int { return min(a+b, inf) }
	switch re.Op {
	case syntax.OpLiteral:
		n := 0
		for _, r := range re.Rune {
			n += max(len(string(r)), len(strings.ToUpper(string(r))))
		}
		return n
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 4
	case syntax.OpCapture, syntax.OpQuest:
		return longest(re.Sub[0])
	case syntax.OpStar, syntax.OpPlus:
		return inf
	case syntax.OpRepeat:
		if re.Max < 0 {
			return inf
		}
		return min(re.Max*longest(re.Sub[0]), inf)
	case syntax.OpConcat:
		n := 0
		for _, s := range re.Sub {
			n = add(n, longest(s))
		}
		return n
	case syntax.OpAlternate:
		n := 0
		for _, s := range re.Sub {
			n = max(n, longest(s))
		}
		return n
	}
	return 0
}

var toLower = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
		if i >= 'A' && i <= 'Z' {
			t[i] = byte(i) + 'a' - 'A'
		}
	}
	return t
}()

// grams are the first three bytes of the keywords, for the scan's one test
// a position.
func (ix *keywordIndex) grams() *gramSet {
	var set gramSet
	for _, g := range ix.groups {
		for _, k := range g {
			set.add(k.lit, true, ix.thirdByte(k))
		}
	}
	return &set
}

// thirdByte is what may follow a two-byte keyword ("ey" of a JWT takes a
// letter or digit) when each of its rules tells, or nil. It compiles the
// rules of two-byte keywords (a few) to know.
func (ix *keywordIndex) thirdByte(k keyword) *byteClass {
	if len(k.lit) != 2 {
		return nil
	}
	var third byteClass
	for _, ri := range k.rules {
		l := ix.rule(ri).leads
		if len(l) < 3 {
			return nil
		}
		for i := range third {
			third[i] |= l[2][i]
		}
	}
	return &third
}

// matcher runs the rules at the keywords found in one text.
type matcher struct {
	ix *keywordIndex
	// last is where each rule last ran at a keyword, plus one, so a rule
	// runs once at a place two of its keywords share ("access" and
	// "accesskey"). An array, not a map: a text with no keyword allocates
	// nothing.
	last [numGitleaksRules]int32
	// reach is where each anchored rule's last match ends, accepted or
	// not: like a regexp's FindAll (and gitleaks), a rule finds no match
	// starting inside its own last one, and a text repeating a keyword does
	// not run the rule again over what it already matched at each.
	reach [numGitleaksRules]int32
	// windows are the parts of the text a rule without an anchor is still
	// to search, one a rule: the windows around its keywords, joined where
	// they overlap and searched once (at done or when the next keyword's
	// window is apart), so a text dense with a keyword ("secret_access_key="
	// repeated) is searched once, not once a keyword.
	windows []window
}

// window is s[from:to], to be searched with rule.
type window struct {
	rule     int
	from, to int
}

// at runs the rules whose keywords start at s[i:].
func (m *matcher) at(s string, i int, spans []span) []span {
	ix := m.ix
	pair := uint16(toLower[s[i]])<<8 | uint16(toLower[s[i+1]])
	if ix.pairs[pair/64]&(1<<(pair%64)) == 0 {
		return spans
	}
	g := ix.byPair[pair] - 1
	if i+2 < len(s) {
		if c := toLower[s[i+2]]; ix.thirds[g][c/64]&(1<<(c%64)) == 0 {
			return spans
		}
	}
	for _, kw := range ix.groups[g] {
		if !hasPrefixFold(s[i:], kw.lit) {
			continue
		}
		for _, ri := range kw.rules {
			if m.last[ri] == int32(i+1) || int32(i) < m.reach[ri] {
				continue
			}
			m.last[ri] = int32(i + 1)
			if r := ix.rule(ri); r.anchored == nil {
				if r.assign == 0 || mayAssign(s, i, r.assign, r.nameLen) {
					spans = m.window(s, ri, max(0, i-windowBefore), min(len(s), i+r.maxLen+windowAfter), spans)
				}
				continue
			}
			var end int
			spans, end = ix.matchAt(s, i, ri, spans)
			m.reach[ri] = max(m.reach[ri], int32(end))
		}
	}
	return spans
}

// window adds s[from:to] to what rule ri is to search: joined to its
// window still open when they overlap, else searching that one now.
func (m *matcher) window(s string, ri, from, to int, spans []span) []span {
	for k := range m.windows {
		w := &m.windows[k]
		if w.rule != ri {
			continue
		}
		if from <= w.to {
			w.to = max(w.to, to)
			return spans
		}
		spans = m.ix.search(s, w.from, w.to, ri, spans)
		w.from, w.to = from, to
		return spans
	}
	m.windows = append(m.windows, window{ri, from, to})
	return spans
}

// done searches the windows still open and runs the rules without
// keywords, which run on every text.
func (m *matcher) done(s string, spans []span) []span {
	for _, w := range m.windows {
		spans = m.ix.search(s, w.from, w.to, w.rule, spans)
	}
	for _, ri := range m.ix.always {
		spans = m.ix.search(s, 0, len(s), ri, spans)
	}
	return spans
}

// find appends the secrets gitleaks' rules find in s.
func (ix *keywordIndex) find(s string, spans []span) []span {
	m := matcher{ix: ix}
	for i := 0; i+1 < len(s); i++ {
		spans = m.at(s, i, spans)
	}
	return m.done(s, spans)
}

func hasPrefixFold(s, lower string) bool {
	if len(s) < len(lower) {
		return false
	}
	for j := 0; j < len(lower); j++ {
		if toLower[s[j]] != lower[j] {
			return false
		}
	}
	return true
}

// matchAt runs anchored rule ri at the keyword found at s[at:]. It also
// returns where the rule's match ends (at when it has none), accepted or
// not: like gitleaks, which searches a text for a rule's matches one after
// another, a rule looks for none inside its own match.
func (ix *keywordIndex) matchAt(s string, at, ri int, spans []span) ([]span, int) {
	m := ix.rule(ri)
	if m.assign > 0 && !mayAssign(s, at, m.assign, m.nameLen) {
		return spans, at
	}
	if m.boundary && at > 0 && isWordByte(s[at-1]) == isWordByte(s[at]) || !m.leads.fits(s[at:]) {
		return spans, at
	}
	end := min(len(s), at+m.maxLen)
	loc := m.anchored.FindStringSubmatchIndex(s[at:end])
	if loc != nil && at+loc[1] == end && end < len(s) {
		end = len(s) // it may go on past the window
		loc = m.anchored.FindStringSubmatchIndex(s[at:end])
	}
	if loc == nil {
		return spans, at
	}
	matchEnd := at + loc[1]
	if m.idRun {
		// The match starts with the rest of the name the identifier ends
		// ("public_" of "public_key"), which allowlists look at.
		from := at
		for from > 0 && at-from < 50 && (isWordByte(s[from-1]) || s[from-1] == '.' || s[from-1] == '-') {
			from--
		}
		loc = append([]int{loc[0], loc[1] + at - from}, loc[2:]...)
		for i := 2; i < len(loc); i++ {
			if loc[i] >= 0 {
				loc[i] += at - from
			}
		}
		at = from
	}
	return ix.accept(s, at, loc, ri, spans), matchEnd
}

// search runs rule ri on s[from:to].
func (ix *keywordIndex) search(s string, from, to, ri int, spans []span) []span {
	m := ix.rule(ri)
	if len(m.holds) > 0 && !holdsAny(s[from:to], m.holds) {
		return spans
	}
	for from < to {
		loc := m.re.FindStringSubmatchIndex(s[from:to])
		if loc == nil {
			return spans
		}
		if from+loc[1] == to && to < len(s) {
			to = len(s)
			continue // it may go on past the window: search the rest
		}
		spans = ix.accept(s, from, loc, ri, spans)
		from += max(loc[1], loc[0]+1)
	}
	return spans
}

// accept adds the secret of a match (loc, relative to s[base:]) unless
// gitleaks would not report it: too little entropy, or allowed.
func (ix *keywordIndex) accept(s string, base int, loc []int, ri int, spans []span) []span {
	m := ix.rule(ri)
	mStart, mEnd := base+loc[0], base+loc[1]
	for mEnd > mStart && s[mEnd-1] == '\n' {
		mEnd--
	}
	for mStart < mEnd && s[mStart] == '\n' {
		mStart++
	}
	start, end := mStart, mEnd
	if n := len(loc) / 2; n > 1 && !m.named {
		if m.group > 0 {
			if m.group >= n || loc[2*m.group] < 0 {
				return spans
			}
			start, end = base+loc[2*m.group], base+loc[2*m.group+1]
		} else {
			for g := 1; g < n; g++ {
				if loc[2*g] >= 0 && loc[2*g+1] > loc[2*g] {
					start, end = base+loc[2*g], base+loc[2*g+1]
					break
				}
			}
		}
	}
	if end <= start {
		return spans
	}
	secret := s[start:end]
	if m.entropy != 0 && shannon(secret) <= m.entropy {
		return spans
	}
	if allowed(ix.global(), s, secret, mStart, mEnd) || allowed(m.allow, s, secret, mStart, mEnd) {
		return spans
	}
	return append(spans, span{start, end, m.kind})
}

func allowed(lists []glAllow, s, secret string, mStart, mEnd int) bool {
	for _, a := range lists {
		target := secret
		switch a.target {
		case "match":
			target = s[mStart:mEnd]
		case "line":
			target = line(s, mStart, mEnd)
		}
		byRegex := false
		for _, re := range a.regexes {
			if re.MatchString(target) {
				byRegex = true
				break
			}
		}
		byWord := false
		if len(a.stopWords) > 0 {
			lower := strings.ToLower(secret)
			for _, w := range a.stopWords {
				if strings.Contains(lower, w) {
					byWord = true
					break
				}
			}
		}
		if a.and {
			if (len(a.regexes) == 0 || byRegex) && (len(a.stopWords) == 0 || byWord) {
				return true
			}
		} else if byRegex || byWord {
			return true
		}
	}
	return false
}

// line is the line holding s[start:end], at most a few KiB of it.
func line(s string, start, end int) string {
	const most = 4096
	from := strings.LastIndexByte(s[max(0, start-most):start], '\n')
	if from < 0 {
		from = max(0, start-most)
	} else {
		from += max(0, start-most) + 1
	}
	to := strings.IndexByte(s[end:min(len(s), end+most)], '\n')
	if to < 0 {
		to = min(len(s), end+most)
	} else {
		to += end
	}
	return s[from:to]
}

// shannon is the entropy of s in bits per byte, as gitleaks computes it.
func shannon(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	n, e := float64(len(s)), 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			e -= p * math.Log2(p)
		}
	}
	return e
}
