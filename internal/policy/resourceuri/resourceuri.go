// Package resourceuri puts a resource URI into the one form policies are
// decided on, so that spellings which mean the same resource to a server
// cannot be decided differently: file:///data/./secret/key,
// file:///data//secret/key and file:///data/%73ecret/key are all
// file:///data/secret/key here, and a rule denying file:///data/secret/*
// denies each. The bridge forwards the canonical form it decided on, never
// the agent's spelling.
//
// The form is RFC 3986 §6.2.2 (syntax-based normalization) plus what file
// servers do with paths:
//
//   - scheme and host in lower case;
//   - percent-encoded unreserved characters (A-Z a-z 0-9 - . _ ~) decoded,
//     other escapes with upper-case hex digits, and every byte of non-ASCII
//     text escaped (café is caf%C3%A9), so that a glob, which is written
//     escaped, matches the resource however the agent spelled it;
//   - default ports dropped (http 80, https 443);
//   - in a hierarchical path (after an authority, or starting with '/'),
//     repeated slashes collapsed and dot segments removed;
//   - file:/p and file://localhost/p written file:///p (RFC 8089).
//
// What cannot be put into one form is refused rather than guessed at:
// control characters, spaces, backslashes, malformed escapes, escapes
// of '/', '\' or NUL in a path (a server that decodes them would see
// another path than the policy did), user info (user@host: a second name
// for the same host), hosts ending in a dot (example.com. is example.com),
// and file: URIs naming a host other than localhost (which file that is
// depends on the server).
package resourceuri

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// MaxLen bounds the URIs accepted.
const MaxLen = 8192

// Canonical returns the canonical form of uri, or an error saying why it
// has none. Canonical(Canonical(u)) == Canonical(u).
func Canonical(uri string) (string, error) {
	if err := checkChars(uri); err != nil {
		return "", err
	}
	colon := strings.IndexByte(uri, ':')
	if colon <= 0 || !validScheme(uri[:colon]) {
		return "", errors.New("it has no scheme (a URI starts with a scheme such as file: or https:)")
	}
	scheme, rest := strings.ToLower(uri[:colon]), uri[colon+1:]

	rest, fragment, hasFragment := strings.Cut(rest, "#")
	rest, query, hasQuery := strings.Cut(rest, "?")
	var authority, p string
	hasAuthority := strings.HasPrefix(rest, "//")
	if hasAuthority {
		rest = rest[2:]
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			authority, p = rest[:i], rest[i:]
		} else {
			authority = rest
		}
	} else {
		p = rest
	}

	var err error
	if authority, err = normalizeEscapes(authority, false); err != nil {
		return "", fmt.Errorf("in its authority: %w", err)
	}
	if authority, err = normalizeAuthority(scheme, lowerHost(authority)); err != nil {
		return "", err
	}
	if p, err = normalizeEscapes(p, true); err != nil {
		return "", fmt.Errorf("in its path: %w", err)
	}
	if query, err = normalizeEscapes(query, false); err != nil {
		return "", fmt.Errorf("in its query: %w", err)
	}
	if fragment, err = normalizeEscapes(fragment, false); err != nil {
		return "", fmt.Errorf("in its fragment: %w", err)
	}
	if hasAuthority || strings.HasPrefix(p, "/") {
		p = cleanPath(p)
	}
	if scheme == "file" {
		if authority != "" && authority != "localhost" {
			return "", fmt.Errorf("it names the host %q in a file: URI (only none or localhost is decidable)", authority)
		}
		if authority == "localhost" || !hasAuthority && strings.HasPrefix(p, "/") {
			authority, hasAuthority = "", true
		}
	}

	var b strings.Builder
	b.Grow(len(uri))
	b.WriteString(scheme)
	b.WriteByte(':')
	if hasAuthority {
		b.WriteString("//")
		b.WriteString(authority)
	}
	b.WriteString(p)
	if hasQuery {
		b.WriteByte('?')
		b.WriteString(query)
	}
	if hasFragment {
		b.WriteByte('#')
		b.WriteString(fragment)
	}
	return b.String(), nil
}

func checkChars(uri string) error {
	switch {
	case uri == "":
		return errors.New("it is empty")
	case len(uri) > MaxLen:
		return fmt.Errorf("it is longer than %d bytes", MaxLen)
	case !utf8.ValidString(uri):
		return errors.New("it is not valid UTF-8")
	}
	for i := 0; i < len(uri); i++ {
		switch c := uri[i]; {
		case c <= ' ' || c == 0x7f:
			return fmt.Errorf("it holds the control character or space %q at byte %d", c, i)
		case c == '\\':
			return fmt.Errorf("it holds a backslash at byte %d (some servers read it as a path separator)", i)
		}
	}
	return nil
}

// validScheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
func validScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isAlpha(c):
		case i > 0 && (isDigit(c) || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// normalizeEscapes decodes escaped unreserved characters, writes the
// other escapes in upper case and escapes every byte >= 0x80. In a path,
// escapes of '/', '\' and NUL are refused.
func normalizeEscapes(s string, inPath bool) (string, error) {
	if !strings.Contains(s, "%") && isASCII(s) {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			fmt.Fprintf(&b, "%%%02X", s[i])
			continue
		}
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return "", fmt.Errorf("a malformed percent-escape at %q", s[i:min(i+3, len(s))])
		}
		c := unhex(s[i+1])<<4 | unhex(s[i+2])
		switch {
		case isUnreserved(c):
			b.WriteByte(c)
		case inPath && (c == '/' || c == '\\' || c == 0):
			return "", fmt.Errorf("an escaped %q (%%%02X), which a server may read as a path separator or the end of the path", c, c)
		default:
			b.WriteByte('%')
			b.WriteString(strings.ToUpper(s[i+1 : i+3]))
		}
		i += 2
	}
	return b.String(), nil
}

// defaultPorts are the ports a scheme's URIs name when they name none.
var defaultPorts = map[string]string{"http": "80", "https": "443"}

// normalizeAuthority refuses user info and a host ending in a dot, and
// drops an empty or default port: each is another spelling of one server.
func normalizeAuthority(scheme, authority string) (string, error) {
	if strings.Contains(authority, "@") {
		return "", errors.New("it holds user info (user@host), which names the same host another way")
	}
	host, port := authority, ""
	if i := strings.LastIndexByte(authority, ':'); i >= 0 && i > strings.LastIndexByte(authority, ']') {
		host, port = authority[:i], authority[i+1:]
	}
	if strings.HasSuffix(host, ".") {
		return "", fmt.Errorf("its host %q ends in a dot (the same host as without it)", host)
	}
	if port == "" || port == defaultPorts[scheme] {
		return host, nil
	}
	return host + ":" + port, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// lowerHost lowers the host of an authority ([userinfo@]host[:port]),
// escapes excepted (their hex digits stay upper case); user info is
// case-sensitive and stays.
func lowerHost(authority string) string {
	at := strings.LastIndexByte(authority, '@')
	b := []byte(authority)
	for i := at + 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '%':
			i += 2
		case c >= 'A' && c <= 'Z':
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// cleanPath collapses repeated slashes and removes dot segments, keeping a
// trailing slash (RFC 3986 §5.2.4: "/a/b/.." is "/a/"). An empty path stays
// empty.
func cleanPath(p string) string {
	if p == "" {
		return ""
	}
	cleaned := path.Clean(p)
	last := p[strings.LastIndexByte(p, '/')+1:]
	if cleaned != "/" && (strings.HasSuffix(p, "/") || last == "." || last == "..") {
		cleaned += "/"
	}
	return cleaned
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isHex(c byte) bool   { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
func isUnreserved(c byte) bool {
	return isAlpha(c) || isDigit(c) || c == '-' || c == '.' || c == '_' || c == '~'
}

func unhex(c byte) byte {
	switch {
	case isDigit(c):
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
