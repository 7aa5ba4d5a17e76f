package output

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// EscapeMarkers makes a server's text unable to claim another source: the
// marker the bridge puts before an item says which server and tool wrote
// it, and a server could otherwise write "\n[mcp:other:tool] ..." so that
// a later line looks like another server's. Every look-alike of "[mcp:"
// gets a backslash before its colon ("[mcp\:other:tool]"), so the only
// marker in an item is the bridge's own at its start.
//
// A look-alike is whatever a reader could take for "[mcp:" once each rune
// is folded to what it reads as (foldRune: fullwidth forms, zero-width and
// other invisible characters, odd spaces, Cyrillic and Greek twins); the
// backslash goes into the original text before the rune read as the colon.
func EscapeMarkers(text string) string {
	colons := markerColons(text)
	if len(colons) == 0 {
		return text
	}
	var b strings.Builder
	b.Grow(len(text) + len(colons))
	last := 0
	for _, at := range colons {
		b.WriteString(text[last:at])
		b.WriteByte('\\')
		last = at
	}
	b.WriteString(text[last:])
	return b.String()
}

// markerColons returns the byte offset in text of the colon of each marker
// look-alike.
func markerColons(text string) []int {
	var colons []int
	for at, r := range text {
		if r == '[' || r >= utf8.RuneSelf && foldRune(r) == "[" {
			if colon, ok := markerAfter(text, at+utf8.RuneLen(r)); ok {
				colons = append(colons, colon)
			}
		}
	}
	return colons
}

// maxMarkerRunes bounds how far after a bracket a marker is looked for: no
// reader takes a bracket, a page of spaces and "mcp:" for a marker, and the
// bound keeps a text full of brackets linear.
const maxMarkerRunes = 64

// markerAfter reports whether the folded text from byte i reads " *mcp *:",
// and where in text the rune that folds to its colon is.
func markerAfter(text string, i int) (int, bool) {
	matched, runes := 0, 0 // matched: how much of "mcp" was read
	for at, r := range text[i:] {
		if runes++; runes > maxMarkerRunes {
			return 0, false
		}
		for _, c := range []byte(foldRune(r)) {
			switch {
			case c == ' ' && (matched == 0 || matched == 3):
			case matched < 3 && c == "mcp"[matched]:
				matched++
			case matched == 3 && c == ':':
				return i + at, true
			default:
				return 0, false
			}
		}
	}
	return 0, false
}

// EscapeMarkersJSON escapes marker look-alikes in every string of a JSON
// document, keys included: a resource's text, a resource_link's name and
// description, structuredContent, error data, a sampling request's
// messages; a model reads a key as text too. Two keys of one object that
// escaping makes equal would leave the reader to pick one, so that document
// is an error (ErrKeysCollide) rather than an ambiguous one. doc is
// returned as it is when nothing changes.
func EscapeMarkersJSON(doc []byte) ([]byte, error) {
	keyChanged := false
	out, err := rawjson.RewriteStrings(doc, func(s, _ string, isKey bool) (string, bool) {
		e := EscapeMarkers(s)
		changed := len(e) != len(s)
		keyChanged = keyChanged || isKey && changed
		return e, changed
	})
	if err != nil || !keyChanged {
		return out, err
	}
	if err := rawjson.Check(out); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeysCollide, err)
	}
	return out, nil
}

// ErrKeysCollide is wrapped by the error of a document two of whose keys
// are one once marker look-alikes are escaped.
var ErrKeysCollide = errors.New("keys are equal once marker look-alikes are escaped")

// foldRune is what a reader takes r for: NFKC (fullwidth "［ｍｃｐ：" is
// "[mcp:"), lower case, invisible format characters (zero-width spaces,
// soft hyphens) and combining marks nothing, every space one space, and the
// look-alikes below their ASCII twin.
func foldRune(r rune) string {
	switch {
	case r < utf8.RuneSelf && unicode.IsSpace(r):
		return " "
	case r < utf8.RuneSelf:
		return string(unicode.ToLower(r))
	case unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Mn, r):
		return ""
	case unicode.IsSpace(r):
		return " "
	}
	if l, ok := lookAlikes[r]; ok {
		return l
	}
	folded := norm.NFKC.String(string(r))
	// NFKC maps some forms onto a look-alike rather than onto ASCII: the
	// small form "﹝" is "〔", which reads as "[".
	if l, ok := lookAlikes[[]rune(folded)[0]]; ok && utf8.RuneCountInString(folded) == 1 {
		return l
	}
	return strings.ToLower(folded)
}

// lookAlikes are letters and punctuation NFKC leaves alone that read as the
// characters of "[mcp:".
var lookAlikes = map[rune]string{
	// m
	'м': "m", 'М': "m", 'ᴍ': "m", 'ṃ': "m", 'ɱ': "m",
	// c
	'с': "c", 'С': "c", 'ϲ': "c", 'Ϲ': "c", 'ᴄ': "c", 'ⅽ': "c", 'ς': "c",
	// p
	'р': "p", 'Р': "p", 'ρ': "p", 'Ρ': "p", 'ᴘ': "p", 'ϱ': "p",
	// :
	'꞉': ":", 'ː': ":", '˸': ":", '∶': ":", '։': ":", '׃': ":", '᛬': ":", '⁚': ":",
	// [
	'⁅': "[", '〔': "[", '❲': "[", '⟦': "[", '【': "[", '〚': "[", '⦋': "[",
	'〖': "[", '〘': "[", '⦗': "[", '⟬': "[", '⦍': "[", '⦏': "[", '⸢': "[", '⸤': "[",
}
