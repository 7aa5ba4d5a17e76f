package policy

import (
	"regexp"
	"strings"
	"testing"
)

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		pattern string
		syntax  GlobSyntax
		text    string
		want    bool
	}{
		// one name segment: '*' stops at dots, so fs never covers fs-v2.
		{"mcp.fs.*", NameGlob, "mcp.fs.read_file", true},
		{"mcp.fs.*", NameGlob, "mcp.fs-v2.read_file", false},
		{"mcp.fs-v2.*", NameGlob, "mcp.fs-v2.read_file", true},
		{"mcp.fs-v2.*", NameGlob, "mcp.fs.read_file", false},
		{"mcp.fs*.read", NameGlob, "mcp.fs-v2.read", true},
		{"mcp.fs.*", NameGlob, "mcp.fs.a.b", false},
		{"mcp.fs.**", NameGlob, "mcp.fs.a.b", true},
		{"mcp.fs.*.b", NameGlob, "mcp.fs.a.b", true},
		{"mcp.fs.*", NameGlob, "mcp.fs.", true},
		{"mcp.*.read", NameGlob, "mcp.git.read", true},
		{"mcp.*.read", NameGlob, "mcp.a.b.read", false},
		{"mcp.**.read", NameGlob, "mcp.a.b.read", true},
		{"mcp.**", NameGlob, "mcp.x.y", true},
		{"**", NameGlob, "anything.at.all", true},
		{"mcp.fs.read?", NameGlob, "mcp.fs.read1", true},
		{"mcp.fs.read?", NameGlob, "mcp.fs.read", false},
		{"mcp.fs.read?", NameGlob, "mcp.fs.read.", false},
		{"mcp.fs.read_file", NameGlob, "mcp.fs.read_file", true},
		{"mcp.fs.read_file", NameGlob, "mcp.fs.read_files", false},
		{"mcp.fs.*_file", NameGlob, "mcp.fs.read_file", true},
		{"mcp.fs.*_file", NameGlob, "mcp.fs._file", true},
		{"mcp.fs.*_file", NameGlob, "mcp.fs.read_file.x", false},
		{"mcp.fs.*a*a*", NameGlob, "mcp.fs.banana", true},
		{"mcp.fs.*a*a*", NameGlob, "mcp.fs.bnn", false},
		{"a*a", NameGlob, "a", false},
		{"*", NameGlob, "", true},
		{"*", NameGlob, ".", false},
		// '*' and '**' together.
		{"mcp.*.**", NameGlob, "mcp.fs.a.b", true},
		{"mcp.*.**", NameGlob, "mcp.fs", false},
		{"mcp.**.*_x", NameGlob, "mcp.a.b.c_x", true},
		{"mcp.**.*_x", NameGlob, "mcp.a.b.c.x", false},
		{"mcp.**.?", NameGlob, "mcp.a.b.c", true},
		// Segment shapes: a lone '*', literal then '*', general.
		{"mcp.*.read_*", NameGlob, "mcp.fs.read_file", true},
		{"mcp.*.read_*", NameGlob, "mcp.fs.write_file", false},
		{"mcp.f?.*e*", NameGlob, "mcp.fs.read", true},
		{"mcp.f?.*e*", NameGlob, "mcp.fs.list", false},
		{"mcp.*.*", NameGlob, "mcp.fs", false},
		// Names are case-sensitive.
		{"mcp.fs.Read", NameGlob, "mcp.fs.read", false},
		// URIs: '*' crosses '/', '**' is the same.
		{"file:///data/*", URIGlob, "file:///data/a/b/c.txt", true},
		{"file:///data/**", URIGlob, "file:///data/a/b/c.txt", true},
		{"file:///data/*", URIGlob, "file:///etc/passwd", false},
		{"file:///data/*.txt", URIGlob, "file:///data/x/y.txt", true},
		{"file:///data/?.txt", URIGlob, "file:///data/a.txt", true},
		{"file:///data/?.txt", URIGlob, "file:///data/ab.txt", false},
		{"*://example.com/*", URIGlob, "https://example.com/a", true},
		{"file:///*/x/*.txt", URIGlob, "file:///a/b/x/c/d.txt", true},
		{"file:///*/x/*.txt", URIGlob, "file:///a/b/y/c/d.txt", false},
	}
	for _, c := range cases {
		g, err := CompileGlob(c.pattern, c.syntax)
		if err != nil {
			t.Fatalf("CompileGlob(%q): %v", c.pattern, err)
		}
		if got := g.Match(c.text); got != c.want {
			t.Errorf("%q.Match(%q) = %v, want %v", c.pattern, c.text, got, c.want)
		}
		if got := globRegexp(c.pattern, c.syntax).MatchString(c.text); got != c.want {
			t.Errorf("reference regexp of %q on %q = %v, want %v (the test's reference is wrong)", c.pattern, c.text, got, c.want)
		}
	}
}

func TestGlobLongPattern(t *testing.T) {
	// More tokens than the automaton's stack buffer holds.
	pattern := "mcp.fs." + strings.Repeat("a?", 40) + "*"
	g, err := CompileGlob(pattern, NameGlob)
	if err != nil {
		t.Fatal(err)
	}
	if !g.Match("mcp.fs." + strings.Repeat("ab", 40) + "tail") {
		t.Error("long pattern does not match its text")
	}
	if g.Match("mcp.fs." + strings.Repeat("ab", 39)) {
		t.Error("long pattern matches a text one pair short")
	}
}

func TestCompileGlobErrors(t *testing.T) {
	cases := []struct {
		pattern string
		syntax  GlobSyntax
		want    string
	}{
		{"", NameGlob, "empty glob"},
		{"mcp.fs.***", NameGlob, "run of 3 '*'"},
		{"mcp.fs.read file", NameGlob, "which no MCP name can contain"},
		{"mcp.fs/read", NameGlob, "which no MCP name can contain"},
		{"mcp.fs.[ab]", NameGlob, "which no MCP name can contain"},
		{"file:///a b", URIGlob, "space, control or non-ASCII"},
		{"file:///a\x00", URIGlob, "space, control or non-ASCII"},
		{"file:///caf\u00e9", URIGlob, "space, control or non-ASCII"},
		{strings.Repeat("a", maxGlobLen+1), URIGlob, "more than 2048"},
	}
	for _, c := range cases {
		_, err := CompileGlob(c.pattern, c.syntax)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CompileGlob(%q) error = %v, want one containing %q", c.pattern, err, c.want)
		}
	}
}

// globRegexp is an independent reference for the glob semantics, built on
// the standard library's regexp; the fuzz target compares the two.
func globRegexp(pattern string, syntax GlobSyntax) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`\A(?s:`)
	one, star := `[^.]`, `[^.]*`
	if syntax == URIGlob {
		one, star = `.`, `.*`
	}
	for i := 0; i < len(pattern); i++ {
		switch {
		case strings.HasPrefix(pattern[i:], "**"):
			b.WriteString(`.*`)
			i++
		case pattern[i] == '*':
			b.WriteString(star)
		case pattern[i] == '?':
			b.WriteString(one)
		default:
			b.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
		}
	}
	b.WriteString(`)\z`)
	return regexp.MustCompile(b.String())
}

// FuzzGlob checks the automaton against the regexp reference: same answer
// for every pattern that compiles and every text, and no panic on anything.
func FuzzGlob(f *testing.F) {
	seeds := []struct{ pattern, text string }{
		{"mcp.fs.*", "mcp.fs-v2.read"},
		{"mcp.**.x?", "mcp.a.b.xy"},
		{"mcp.fs.*a*a*", "mcp.fs.banana"},
		{"*?*", "."},
		{"file:///data/*", "file:///data/../etc"},
		{"a**b*c?d", "a.b.c.d"},
	}
	for _, s := range seeds {
		f.Add(s.pattern, s.text, false)
		f.Add(s.pattern, s.text, true)
	}
	f.Fuzz(func(t *testing.T, pattern, text string, uri bool) {
		syntax := NameGlob
		if uri {
			syntax = URIGlob
		}
		g, err := CompileGlob(pattern, syntax)
		if err != nil || !isASCII(text) {
			// '?' matches one byte; the reference one rune: they agree on
			// ASCII, which is what names and URIs are.
			return
		}
		want := globRegexp(pattern, syntax).MatchString(text)
		if got := g.Match(text); got != want {
			t.Fatalf("%q.Match(%q) = %v, the reference says %v", pattern, text, got, want)
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
