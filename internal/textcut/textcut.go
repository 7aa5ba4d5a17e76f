// Package textcut shortens text for people to read (log lines, previews,
// error messages, status fields) without cutting a character in two: a
// string cut inside a UTF-8 sequence is invalid, which the API server
// refuses and terminals print as garbage.
package textcut

import "unicode/utf8"

// Ellipsis marks where text was cut.
const Ellipsis = "…"

// Cut returns s when it is at most n bytes long, and otherwise its longest
// prefix of whole characters within n bytes followed by Ellipsis.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + Ellipsis
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
