package textcut

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"abcdef", 3, "abc…"},
		{"héllo", 2, "h…"}, // é is two bytes: byte 2 is inside it
		{"ééé", 3, "é…"},
		{"日本語", 4, "日…"},
		{"日本語", 0, "…"},
		{"abc", -1, "…"},
	} {
		if got := Cut(tc.in, tc.n); got != tc.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestCutBytes(t *testing.T) {
	if got := CutBytes([]byte("日本語"), 5); got != "日…" {
		t.Errorf("CutBytes = %q, want 日…", got)
	}
	if got := CutBytes([]byte("ok"), 5); got != "ok" {
		t.Errorf("CutBytes = %q, want ok", got)
	}
}

func TestBothEnds(t *testing.T) {
	if got := BothEnds("abcdefghij", 4); got != "ab…ij" {
		t.Errorf("BothEnds = %q, want ab…ij", got)
	}
	if got := BothEnds("ééééé", 4); got != "é…é" { // whole characters only
		t.Errorf("BothEnds = %q, want é…é", got)
	}
	if got := BothEnds("short", 10); got != "short" {
		t.Errorf("BothEnds = %q, want short", got)
	}
}

// Every cut of every length is valid UTF-8 and no longer than n plus the
// marker.
func TestCutsAreValidUTF8(t *testing.T) {
	s := strings.Repeat("aé日🙂", 8)
	for n := 0; n <= len(s); n++ {
		for _, got := range []string{Cut(s, n), CutBytes([]byte(s), n), BothEnds(s, n)} {
			if !utf8.ValidString(got) {
				t.Fatalf("cut at %d is not valid UTF-8: %q", n, got)
			}
			if len(got) > n+len(Ellipsis) {
				t.Fatalf("cut at %d is %d bytes", n, len(got))
			}
		}
	}
}
