package redact

import (
	"regexp/syntax"
	"unicode/utf8"
)

// leadLen is how many of a match's first bytes leads describes.
const leadLen = 12

// byteClass is a set of bytes.
type byteClass [4]uint64

func (c *byteClass) has(b byte) bool { return c[b/64]&(1<<(b%64)) != 0 }
func (c *byteClass) add(b byte)      { c[b/64] |= 1 << (b % 64) }

// leads are the bytes each of the first bytes of a match may be: a rule
// run at a keyword is tried only when the text there fits, since a regexp
// costs a hundred nanoseconds or more even when it fails at once. ("s." of
// Vault's tokens is the start of every "s.cache" in Go; "ey" of a JWT is in
// every "key".)
type leads []byteClass

// fits says whether s may start a match: a byte past the text's end fits.
func (l leads) fits(s string) bool {
	for k := 0; k < len(l) && k < len(s); k++ {
		if !l[k].has(s[k]) {
			return false
		}
	}
	return true
}

// leadsOf computes the leads of re by running its program over every byte
// at once: the classes of the instructions reached after k bytes make the
// class of byte k. Where a match may end or a rune may be longer than a
// byte, any byte may follow, and the leads stop there.
func leadsOf(re *syntax.Regexp) leads {
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil
	}
	var out leads
	states := closure(prog, []uint32{uint32(prog.Start)})
	for len(out) < leadLen && len(states) > 0 {
		var class byteClass
		var next []uint32
		for _, pc := range states {
			inst := &prog.Inst[pc]
			switch inst.Op {
			case syntax.InstMatch:
				return out
			case syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
				return out // a rune of several bytes may come: stop here
			case syntax.InstRune, syntax.InstRune1:
				if takesNonASCII(inst) {
					return out
				}
				took := false
				for b := range utf8.RuneSelf {
					if inst.MatchRune(rune(b)) {
						class.add(byte(b))
						took = true
					}
				}
				if took {
					next = append(next, inst.Out)
				}
			}
		}
		out = append(out, class)
		states = closure(prog, next)
	}
	return out
}

// takesNonASCII says whether inst reads a rune past ASCII. The non-ASCII
// case variants of ASCII letters that (?i) adds (the long s, the Kelvin
// sign) don't count: no credential is written with them.
func takesNonASCII(inst *syntax.Inst) bool {
	if len(inst.Rune) == 1 {
		return inst.Rune[0] >= utf8.RuneSelf
	}
	for i := 0; i+1 < len(inst.Rune); i += 2 {
		lo, hi := inst.Rune[i], inst.Rune[i+1]
		if hi >= utf8.RuneSelf && !(lo == hi && (lo == '\u017f' || lo == '\u212a')) {
			return true
		}
	}
	return false
}

// closure adds to pcs the instructions reachable without reading a byte
// (every empty-width assertion counts as passed) and keeps those that read
// one or end a match.
func closure(prog *syntax.Prog, pcs []uint32) []uint32 {
	seen := map[uint32]bool{}
	var out []uint32
	for len(pcs) > 0 {
		pc := pcs[len(pcs)-1]
		pcs = pcs[:len(pcs)-1]
		if seen[pc] {
			continue
		}
		seen[pc] = true
		inst := &prog.Inst[pc]
		switch inst.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			pcs = append(pcs, inst.Out, inst.Arg)
		case syntax.InstCapture, syntax.InstEmptyWidth, syntax.InstNop:
			pcs = append(pcs, inst.Out)
		case syntax.InstFail:
		default:
			out = append(out, pc)
		}
	}
	return out
}
