package resourceuri

import (
	"strings"
	"testing"
)

func TestCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		// The attack's spellings of file:///data/secret/key.txt.
		{"file:///data/./secret/key.txt", "file:///data/secret/key.txt"},
		{"file:///data//secret/key.txt", "file:///data/secret/key.txt"},
		{"file:///data/%73ecret/key.txt", "file:///data/secret/key.txt"},
		{"file:///data/public/../secret/key.txt", "file:///data/secret/key.txt"},
		{"file:///data/public/%2e%2e/secret/key.txt", "file:///data/secret/key.txt"},
		{"file:///data/public/.%2E/secret/key.txt", "file:///data/secret/key.txt"},
		{"FILE:///data/secret/key.txt", "file:///data/secret/key.txt"},
		{"file:/data/secret/key.txt", "file:///data/secret/key.txt"},
		{"file://localhost/data/secret/key.txt", "file:///data/secret/key.txt"},
		{"file://LocalHost/data/secret/key.txt", "file:///data/secret/key.txt"},
		{"file:////data///secret////key.txt", "file:///data/secret/key.txt"},
		// Already canonical.
		{"file:///data/secret/key.txt", "file:///data/secret/key.txt"},
		{"test://static-text", "test://static-text"},
		{"demo://resource/static/document/1", "demo://resource/static/document/1"},
		// Scheme and host lower case; path, user info, query keep their case.
		{"HTTPS://Example.COM:8443/A/B?Q=1#F", "https://example.com:8443/A/B?Q=1#F"},
		// Default and empty ports dropped; others kept.
		{"https://example.com:443/a", "https://example.com/a"},
		{"http://example.com:80/a", "http://example.com/a"},
		{"http://example.com:/a", "http://example.com/a"},
		{"https://example.com:80/a", "https://example.com:80/a"},
		{"http://[::1]:80/a", "http://[::1]/a"},
		{"http://[::1]/a", "http://[::1]/a"},
		// Escapes: unreserved decoded, the rest upper case.
		{"https://example.com/a%2db%7e?x=%2f%41", "https://example.com/a-b~?x=%2FA"},
		{"https://ex%41mple.com/", "https://example.com/"},
		{"https://example.com/caf%c3%a9", "https://example.com/caf%C3%A9"},
		{"https://%c3%a9.example/", "https://%C3%A9.example/"},
		// Dot segments: trailing slash kept, never above the root.
		{"https://example.com/a/b/..", "https://example.com/a/"},
		{"https://example.com/a/b/.", "https://example.com/a/b/"},
		{"https://example.com/a/b/", "https://example.com/a/b/"},
		{"https://example.com/../../etc/passwd", "https://example.com/etc/passwd"},
		{"https://example.com/..", "https://example.com/"},
		{"https://example.com", "https://example.com"},
		{"https://example.com?q", "https://example.com?q"},
		// Queries and fragments are not paths.
		{"https://example.com/a?p=../b//c", "https://example.com/a?p=../b//c"},
		// Opaque URIs: scheme and escapes only.
		{"urn:ISBN:0451450523", "urn:ISBN:0451450523"},
		{"mailto:a%2eb@example.com", "mailto:a.b@example.com"},
		{"file:relative/../x", "file:relative/../x"},
		// Non-ASCII text is escaped, byte by byte, upper-case hex: a glob
		// written escaped matches it however it was spelled.
		{"test://notes/café", "test://notes/caf%C3%A9"},
		{"file:///data/café/key", "file:///data/caf%C3%A9/key"},
		{"file:///data/caf%c3%a9/key", "file:///data/caf%C3%A9/key"},
		{"https://é.example/?q=é#é", "https://%C3%A9.example/?q=%C3%A9#%C3%A9"},
	} {
		got, err := Canonical(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestCanonicalRefuses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty"},
		{"/data/secret", "no scheme"},
		{"1file:///x", "no scheme"},
		{":///x", "no scheme"},
		{"file:///data/public/..%2Fsecret/key", "path separator"},
		{"file:///data/public/..%5csecret/key", "path separator"},
		{"file:///data/secret%00.txt", "path separator"},
		{"file:///data/%zz", "malformed"},
		{"file:///data/%4", "malformed"},
		{"file:///data/a b", "space"},
		{"file:///data/a\tb", "control"},
		{"file:///data\\secret", "backslash"},
		{"file:///data/\xff", "UTF-8"},
		{"file:///" + strings.Repeat("a", MaxLen), "longer"},
		{"file://server/data/secret", "host"},
		{"file://127.0.0.1/data/secret", "host"},
		{"https://user@example.com/", "user info"},
		{"https://user:pw@example.com/", "user info"},
		{"https://example.com./", "dot"},
		{"https://example.com.:443/", "dot"},
	} {
		if got, err := Canonical(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Canonical(%q) = %q, %v; want an error saying %q", tc.in, got, err, tc.want)
		}
	}
}

// FuzzCanonical: the form is stable, and a hierarchical path in it has no
// repeated slash, no dot segment and no escape a server could decode into
// either.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{"file:///data/./secret//k", "HTTPS://B.C:1/%7e/../x?y#z", "file:///café/%c3%a9", "urn:a:b", "file:/x/..", "test://h/%2e%2E/%41"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		c, err := Canonical(in)
		if err != nil {
			return
		}
		again, err := Canonical(c)
		if err != nil || again != c {
			t.Fatalf("Canonical(%q) = %q, but Canonical of that = %q, %v", in, c, again, err)
		}
		rest := c[strings.IndexByte(c, ':')+1:]
		rest, _, _ = strings.Cut(rest, "#")
		rest, _, _ = strings.Cut(rest, "?")
		p := rest
		if r, ok := strings.CutPrefix(rest, "//"); ok {
			i := strings.IndexByte(r, '/')
			if i < 0 {
				return
			}
			p = r[i:]
		} else if !strings.HasPrefix(rest, "/") {
			return
		}
		for _, seg := range strings.Split(p, "/")[1:] {
			if seg == "." || seg == ".." {
				t.Fatalf("Canonical(%q) = %q keeps a dot segment", in, c)
			}
		}
		if strings.Contains(p, "//") || strings.Contains(strings.ToUpper(p), "%2E") || strings.Contains(strings.ToUpper(p), "%2F") {
			t.Fatalf("Canonical(%q) = %q keeps a repeated slash or an escaped '.' or '/'", in, c)
		}
	})
}
