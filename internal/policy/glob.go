package policy

import (
	"fmt"
	"strings"
)

// GlobSyntax says which characters a glob may hold and which character its
// single wildcards do not cross.
type GlobSyntax int

const (
	// NameGlob matches namespaced names (mcp.<server>.<name>) and server
	// names: '*' and '?' stop at '.', '**' crosses it.
	NameGlob GlobSyntax = iota
	// URIGlob matches resource URIs: '*' (or '**') matches any run, '?' any
	// one character.
	URIGlob
)

// maxGlobLen bounds a glob so matching stays cheap whatever a policy holds;
// the CRD allows 512 characters for names and 2048 for URIs.
const maxGlobLen = 2048

type tokenKind uint8

const (
	tokLiteral tokenKind = iota
	tokOne               // ?
	tokStar              // * (does not cross the separator)
	tokAny               // ** (crosses everything)
)

type token struct {
	kind tokenKind
	c    byte
}

type globShape uint8

const (
	shapeExact    globShape = iota // no wildcard
	shapeAnyRun                    // prefix, then one '**', then suffix
	shapeStarRun                   // prefix, then one '*', then suffix
	shapeSegments                  // '*' and '?' only, split at '.': segment by segment
	shapeAnyStars                  // every star crosses everything: greedy matching
	shapeMixed                     // '*' and '**' together: run the automaton
)

// Glob is a compiled glob pattern. Matching costs at most the text's length
// times the pattern's, so no pattern can make it slow, and allocates only for
// patterns that mix '*' and '**' with more than 63 characters between their
// first and last wildcard.
type Glob struct {
	pattern string
	shape   globShape
	// prefix is the literal text before the first wildcard, suffix the
	// literal text after the last one.
	prefix, suffix string
	// middle holds the tokens from the first wildcard to the last, inclusive.
	middle []token
	// segments are the dot-separated parts of a shapeSegments glob.
	segments []segment
	// sep is the character '*' and '?' do not match; 0 for none.
	sep byte
}

// segment is one dot-free part of a name glob: a literal, a literal and a
// trailing '*', a lone '*', or tokens with '*' and '?' (which here cannot meet
// a '.').
type segment struct {
	shape   globShape // shapeExact, shapeStarRun (prefix*), shapeAnyRun (*), or shapeSegments (toks)
	literal string
	toks    []token
}

// String is the pattern the glob was compiled from.
func (g *Glob) String() string { return g.pattern }

// CompileGlob checks a pattern against the syntax and compiles it. Its
// errors say what is wrong in words a policy author can act on.
func CompileGlob(pattern string, syntax GlobSyntax) (*Glob, error) {
	if pattern == "" {
		return nil, fmt.Errorf("empty glob")
	}
	if len(pattern) > maxGlobLen {
		return nil, fmt.Errorf("glob is %d characters long, more than %d", len(pattern), maxGlobLen)
	}
	g := &Glob{pattern: pattern}
	if syntax == NameGlob {
		g.sep = '.'
	}
	var toks []token
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch c {
		case '*':
			n := 1
			for i+1 < len(pattern) && pattern[i+1] == '*' {
				n++
				i++
			}
			if n > 2 {
				return nil, fmt.Errorf("glob %q has a run of %d '*': use '*' (within one name segment) or '**' (across segments)", pattern, n)
			}
			if n == 2 || g.sep == 0 {
				toks = append(toks, token{kind: tokAny})
			} else {
				toks = append(toks, token{kind: tokStar})
			}
		case '?':
			toks = append(toks, token{kind: tokOne})
		default:
			if err := checkGlobChar(pattern, c, syntax); err != nil {
				return nil, err
			}
			toks = append(toks, token{kind: tokLiteral, c: c})
		}
	}
	first, last := -1, -1
	for i, t := range toks {
		if t.kind != tokLiteral {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		g.shape = shapeExact
		return g, nil
	}
	g.prefix = literalText(toks[:first])
	g.suffix = literalText(toks[last+1:])
	g.middle = toks[first : last+1]
	switch {
	case len(g.middle) == 1 && g.middle[0].kind == tokAny:
		g.shape = shapeAnyRun
	case len(g.middle) == 1 && g.middle[0].kind == tokStar:
		g.shape = shapeStarRun
	case !hasKind(g.middle, tokStar):
		g.shape = shapeAnyStars
	case !hasKind(g.middle, tokAny):
		g.shape = shapeSegments
		g.segments = splitSegments(toks, g.sep)
	default:
		g.shape = shapeMixed
	}
	return g, nil
}

func hasKind(toks []token, kind tokenKind) bool {
	for _, t := range toks {
		if t.kind == kind {
			return true
		}
	}
	return false
}

// splitSegments cuts the tokens at each literal separator. Neither '*' nor
// '?' matches the separator here, so a text matches only if its separators
// line up with these, segment by segment.
func splitSegments(toks []token, sep byte) []segment {
	var segs []segment
	start := 0
	for i := 0; i <= len(toks); i++ {
		if i < len(toks) && !(toks[i].kind == tokLiteral && toks[i].c == sep) {
			continue
		}
		part := toks[start:i]
		wild := 0
		for j, t := range part {
			if t.kind != tokLiteral {
				wild = j + 1
				break
			}
		}
		switch {
		case wild == 0:
			segs = append(segs, segment{shape: shapeExact, literal: literalText(part)})
		case len(part) == 1 && part[0].kind == tokStar:
			segs = append(segs, segment{shape: shapeAnyRun})
		case wild == len(part) && part[wild-1].kind == tokStar:
			segs = append(segs, segment{shape: shapeStarRun, literal: literalText(part[:wild-1])})
		default:
			segs = append(segs, segment{shape: shapeSegments, toks: part})
		}
		start = i + 1
	}
	return segs
}

func checkGlobChar(pattern string, c byte, syntax GlobSyntax) error {
	if syntax == NameGlob {
		if isNameChar(c) {
			return nil
		}
		return fmt.Errorf("glob %q holds %q, which no MCP name can contain (names use letters, digits, '_', '-' and '.'; wildcards are '*', '**' and '?')", pattern, string(rune(c)))
	}
	if c <= ' ' || c >= 0x7f {
		return fmt.Errorf("glob %q holds a space, control or non-ASCII character: write them percent-encoded, as a URI holds them", pattern)
	}
	return nil
}

// isNameChar reports whether c may appear in an MCP tool or prompt name or
// a server name.
func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}

func literalText(toks []token) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteByte(t.c)
	}
	return b.String()
}

// Match reports whether the glob matches all of s.
func (g *Glob) Match(s string) bool {
	if g.shape == shapeExact {
		return s == g.pattern
	}
	if len(s) < len(g.prefix)+len(g.suffix) || !strings.HasPrefix(s, g.prefix) || !strings.HasSuffix(s, g.suffix) {
		return false
	}
	mid := s[len(g.prefix) : len(s)-len(g.suffix)]
	switch g.shape {
	case shapeAnyRun:
		return true
	case shapeStarRun:
		return strings.IndexByte(mid, g.sep) < 0
	case shapeAnyStars:
		return matchGreedy(g.middle, g.sep, mid)
	case shapeSegments:
		return g.matchSegments(s)
	}
	return matchTokens(g.middle, g.sep, mid)
}

func (g *Glob) matchSegments(s string) bool {
	for i, seg := range g.segments {
		part := s
		if i < len(g.segments)-1 {
			end := strings.IndexByte(s, g.sep)
			if end < 0 {
				return false
			}
			part, s = s[:end], s[end+1:]
		} else if strings.IndexByte(s, g.sep) >= 0 {
			return false
		}
		switch seg.shape {
		case shapeExact:
			if part != seg.literal {
				return false
			}
		case shapeStarRun:
			if !strings.HasPrefix(part, seg.literal) {
				return false
			}
		case shapeSegments:
			if !matchGreedy(seg.toks, 0, part) {
				return false
			}
		}
	}
	return true
}

// matchGreedy is the classic wildcard match for patterns whose stars all
// match any run: on a mismatch, let the last star take one more character.
// Linear in practice, len(s)*len(toks) at worst, and it never allocates.
func matchGreedy(toks []token, sep byte, s string) bool {
	ti, si := 0, 0
	starT, starS := -1, 0
	for si < len(s) {
		if ti < len(toks) {
			switch t := toks[ti]; {
			case t.kind == tokStar || t.kind == tokAny:
				starT, starS = ti, si
				ti++
				continue
			case t.kind == tokLiteral && t.c == s[si], t.kind == tokOne && (sep == 0 || s[si] != sep):
				ti++
				si++
				continue
			}
		}
		if starT < 0 {
			return false
		}
		starS++
		si, ti = starS, starT+1
	}
	for ti < len(toks) && (toks[ti].kind == tokStar || toks[ti].kind == tokAny) {
		ti++
	}
	return ti == len(toks)
}

// matchTokens runs the pattern as a nondeterministic automaton over s: state
// j means "the first j tokens matched". No backtracking, so the cost is
// bounded by len(s)*len(toks).
func matchTokens(toks []token, sep byte, s string) bool {
	n := len(toks)
	var bufA, bufB [64]bool
	cur, next := bufA[:], bufB[:]
	if n+1 > len(bufA) {
		cur, next = make([]bool, n+1), make([]bool, n+1)
	}
	cur, next = cur[:n+1], next[:n+1]
	cur[0] = true
	closeOverEmpty(toks, cur)
	for i := 0; i < len(s); i++ {
		c := s[i]
		crossesSep := sep != 0 && c == sep
		clear(next)
		alive := false
		for j := 0; j < n; j++ {
			if !cur[j] {
				continue
			}
			switch t := toks[j]; t.kind {
			case tokLiteral:
				if t.c == c {
					next[j+1], alive = true, true
				}
			case tokOne:
				if !crossesSep {
					next[j+1], alive = true, true
				}
			case tokStar:
				if !crossesSep {
					next[j], alive = true, true
				}
			case tokAny:
				next[j], alive = true, true
			}
		}
		if !alive {
			return false
		}
		closeOverEmpty(toks, next)
		cur, next = next, cur
	}
	return cur[n]
}

// closeOverEmpty adds the states reached by letting stars match nothing.
func closeOverEmpty(toks []token, states []bool) {
	for j, t := range toks {
		if states[j] && (t.kind == tokStar || t.kind == tokAny) {
			states[j+1] = true
		}
	}
}

// hasWildcard reports whether s holds a glob wildcard.
func hasWildcard(s string) bool {
	return strings.ContainsAny(s, "*?")
}
