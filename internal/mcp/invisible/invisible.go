// Package invisible removes the characters a person reading a text does not
// see but a model does: Unicode tag characters (U+E0000–U+E007F, which spell
// out a hidden copy of ASCII text), zero-width characters and bidirectional
// controls. What servers say reaches agents, logs and status without them,
// and the text the tag characters spelled is given back, decoded, so that it
// can be scanned (and recorded) like any other text.
package invisible

import (
	"strings"
	"unicode/utf8"
)

// Is says whether r is removed: zero-width characters, bidi controls, the
// soft hyphen, the BOM used as a zero-width no-break space, and tag
// characters. (Removing the zero-width joiner also splits emoji sequences
// such as a family into their people: a price paid for text no one can
// hide words in.)
func Is(r rune) bool {
	switch {
	case r >= 0x200B && r <= 0x200F, // zero-width space, non-joiner, joiner; LRM, RLM
		r >= 0x202A && r <= 0x202E,   // bidi embeddings and overrides
		r >= 0x2060 && r <= 0x2064,   // word joiner, invisible operators
		r >= 0x2066 && r <= 0x2069,   // bidi isolates
		r == 0xFEFF,                  // zero-width no-break space
		r == 0x00AD,                  // soft hyphen
		r == 0x061C,                  // Arabic letter mark
		r >= 0xE0000 && r <= 0xE007F: // tag characters
		return true
	}
	return false
}

// Found is what Strip removed from one text.
type Found struct {
	// Removed counts the characters removed.
	Removed int
	// Hidden is the text the tag characters spelled (U+E0020–U+E007E stand
	// for ASCII 0x20–0x7E), empty when there were none.
	Hidden string
}

// Strip returns s without invisible characters, and what it removed. It
// returns s itself, and a zero Found, when there is none: a text without any
// byte that can start one costs one pass over its bytes.
func Strip(s string) (string, Found) {
	first := firstCandidate(s)
	if first < 0 {
		return s, Found{}
	}
	// Bytes that are not UTF-8 become U+FFFD (as they would in JSON): kept
	// raw, the bytes on both sides of a removed character could join into
	// a new one, an invisible one among them (FuzzStrip checks this).
	if !utf8.ValidString(s) {
		first = 0
	}
	var f Found
	var sb, hidden strings.Builder
	sb.Grow(len(s))
	sb.WriteString(s[:first])
	for i := first; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case Is(r):
			f.Removed++
			if r >= 0xE0020 && r <= 0xE007E {
				hidden.WriteByte(byte(r - 0xE0000))
			}
		case r == utf8.RuneError && n == 1:
			sb.WriteRune(utf8.RuneError)
		default:
			sb.WriteString(s[i : i+n])
		}
		i += n
	}
	if f.Removed == 0 {
		return s, Found{}
	}
	f.Hidden = hidden.String()
	return sb.String(), f
}

// firstCandidate is the index of the first byte that can start an invisible
// character's UTF-8 encoding, or -1. Every one starts with 0xC2 (U+00AD),
// 0xD8 (U+061C), 0xE2 (U+2000–U+2FFF), 0xEF (U+FEFF) or 0xF3 (tags).
func firstCandidate(s string) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case 0xC2, 0xD8, 0xE2, 0xEF, 0xF3:
			return i
		}
	}
	return -1
}

// Contains says whether s holds an invisible character.
func Contains(s string) bool {
	for i := firstCandidate(s); i >= 0 && i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if Is(r) {
			return true
		}
		i += n
	}
	return false
}

// Tags spells ASCII text in tag characters, the way hidden instructions are
// written; for tests and examples.
func Tags(ascii string) string {
	var sb strings.Builder
	for i := 0; i < len(ascii); i++ {
		sb.WriteRune(0xE0000 + rune(ascii[i]))
	}
	return sb.String()
}
