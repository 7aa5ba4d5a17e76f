// Package textcut shortens text for people to read (log lines, previews,
// error messages, status fields) without cutting a character in two: a
// string cut inside a UTF-8 sequence is invalid, which the API server
// refuses and terminals print as garbage.
package textcut

import (
	"strings"
	"unicode/utf8"
)

// Ellipsis marks where text was cut.
const Ellipsis = "…"

// Cut returns s when it is at most n bytes long, and otherwise its longest
// prefix of whole characters within n bytes followed by Ellipsis.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Prefix(s, n) + Ellipsis
}

// Prefix is the longest prefix of s of whole characters within n bytes,
// unmarked: for a field with a byte bound that says elsewhere that it may
// be cut, or a caller that marks the cut its own way.
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Tail returns s when it is at most n bytes long, and otherwise Ellipsis
// followed by its longest suffix of whole characters within n bytes: the
// end of a log says what went wrong last.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	from := len(s) - max(n, 0)
	for from < len(s) && !utf8.RuneStart(s[from]) {
		from++
	}
	return Ellipsis + s[from:]
}

// Chars is s cut to at most n characters (not bytes: an API field's
// maxLength counts characters), unmarked, with invalid UTF-8 replaced so
// the result is always valid.
func Chars(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for at := range s {
		if i == n {
			return s[:at]
		}
		i++
	}
	return s
}

// CutBytes is Cut of a byte slice.
func CutBytes(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return Cut(string(b[:max(n, 0)+1]), n)
}

// BothEnds keeps about n bytes of s, half from each end (whole characters),
// joined by Ellipsis when cut: the end of a text often says as much as its
// start (a path, an error's cause).
func BothEnds(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	head := n / 2
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	tail := len(s) - (n - n/2)
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return s[:head] + Ellipsis + s[tail:]
}
