package toolname

import (
	"regexp"
	"strings"
	"testing"
)

func TestValidateUpstream(t *testing.T) {
	valid := []string{"a", "read_file", "get-sum", "ns.tool", strings.Repeat("x", 128), "A.b-C_9"}
	invalid := []string{"", strings.Repeat("x", 129), "has space", "slash/name", "ünï", "semi;colon", "tab\t"}
	for _, n := range valid {
		if err := ValidateUpstream(n); err != nil {
			t.Errorf("ValidateUpstream(%q) = %v, want ok", n, err)
		}
	}
	for _, n := range invalid {
		if err := ValidateUpstream(n); err == nil {
			t.Errorf("ValidateUpstream(%q) accepted an invalid name", n)
		}
	}
}

func TestNamespacedRoundTrip(t *testing.T) {
	n := Namespaced("files", "ns.read.file")
	if n != "mcp.files.ns.read.file" {
		t.Fatalf("Namespaced = %q", n)
	}
	s, tool, ok := SplitNamespaced(n)
	if !ok || s != "files" || tool != "ns.read.file" {
		t.Fatalf("SplitNamespaced(%q) = %q %q %v", n, s, tool, ok)
	}
	for _, bad := range []string{"files.x", "mcp.", "mcp.files", "mcp..x", "mcp.files."} {
		if _, _, ok := SplitNamespaced(bad); ok {
			t.Errorf("SplitNamespaced(%q) accepted it", bad)
		}
	}
}

var clientRule = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestUnderscore(t *testing.T) {
	cases := []struct {
		name     string
		in       string
		want     string // exact, or "" to check only the rule and the suffix
		wantHash bool
	}{
		{"short plain", "mcp.files.read_file", "mcp__files__read_file", false},
		{"dash kept", "mcp.every-thing.get-sum", "mcp__every-thing__get-sum", false},
		{"dot gets a hash", "mcp.files.ns.read", "", true},
		{"long gets cut", "mcp." + strings.Repeat("s", 63) + "." + strings.Repeat("t", 128), "", true},
		{"exactly 64 stays", "mcp.abc." + strings.Repeat("t", 64-len("mcp__abc__")), "mcp__abc__" + strings.Repeat("t", 64-len("mcp__abc__")), false},
	}
	hashSuffix := regexp.MustCompile(`_[0-9a-f]{8}$`)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Underscore(tc.in)
			if !clientRule.MatchString(got) {
				t.Fatalf("Underscore(%q) = %q breaks ^[a-zA-Z0-9_-]{1,64}$", tc.in, got)
			}
			if tc.want != "" && got != tc.want {
				t.Fatalf("Underscore(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if tc.wantHash != hashSuffix.MatchString(got) {
				t.Fatalf("Underscore(%q) = %q: hash suffix present=%v, want %v", tc.in, got, !tc.wantHash, tc.wantHash)
			}
			if again := Underscore(tc.in); again != got {
				t.Fatalf("not stable: %q then %q", got, again)
			}
		})
	}
	// Names that differ only past the cut, or by '.' versus '_', stay apart.
	long := "mcp.s." + strings.Repeat("t", 100)
	if Underscore(long+"a") == Underscore(long+"b") {
		t.Error("two long names that differ after the cut render the same")
	}
	if Underscore("mcp.s.a.b") == Underscore("mcp.s.a_b") {
		t.Error("a.b and a_b render the same")
	}
}

func TestTableReversesAndReportsCollisions(t *testing.T) {
	dotted := "mcp.s.a.b"
	// A literal tool whose name equals the other's hashed rendering.
	impostor := "mcp.s." + strings.TrimPrefix(Underscore(dotted), "mcp__s__")
	names := []string{"mcp.s.read", dotted, impostor, "mcp.other.read"}
	tab := NewTable(names)
	for _, n := range []string{"mcp.s.read", "mcp.other.read"} {
		got, ok := tab.Lookup(Underscore(n))
		if !ok || got != n {
			t.Errorf("Lookup(Underscore(%q)) = %q, %v", n, got, ok)
		}
	}
	if _, ok := tab.Lookup(Underscore(dotted)); ok {
		t.Error("a colliding rendering was resolved to one of its names")
	}
	c := tab.Collisions()[Underscore(dotted)]
	if len(c) != 2 || c[0] != dotted && c[1] != dotted {
		t.Errorf("Collisions = %v, want both %q and %q", tab.Collisions(), dotted, impostor)
	}
}

func TestMatchGlob(t *testing.T) {
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "anything", true},
		{"*", "", true},
		{"write_*", "write_file", true},
		{"write_*", "read_file", false},
		{"*_file", "move_file", true},
		{"?ead_file", "read_file", true},
		{"?ead_file", "ead_file", false},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"[x]", "[x]", true},
		{"a/b", "a/b", true},
		{"read_file", "read_file", true},
		{"read_file", "read_files", false},
	}
	for _, tc := range cases {
		if got := MatchGlob(tc.pattern, tc.name); got != tc.want {
			t.Errorf("MatchGlob(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}
