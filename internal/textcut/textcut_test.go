package textcut

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCuts(t *testing.T) {
	fns := map[string]func(string, int) string{"Cut": Cut, "Prefix": Prefix, "Tail": Tail, "Chars": Chars}
	for _, tc := range []struct {
		fn   string
		in   string
		n    int
		want string
	}{
		{"Cut", "short", 10, "short"},
		{"Cut", "exactly", 7, "exactly"},
		{"Cut", "abcdef", 3, "abc…"},
		{"Cut", "héllo", 2, "h…"}, // é is two bytes: byte 2 is inside it
		{"Cut", "ééé", 3, "é…"},
		{"Cut", "日本語", 4, "日…"},
		{"Cut", "日本語", 0, "…"},
		{"Cut", "abc", -1, "…"},
		{"Prefix", "short", 10, "short"},
		{"Prefix", "abcdef", 3, "abc"},
		{"Prefix", "héllo", 2, "h"},
		{"Prefix", "日本語", 4, "日"},
		{"Prefix", "abc", -1, ""},
		{"Tail", "short", 10, "short"},
		{"Tail", "abcdef", 3, "…def"},
		{"Tail", "日本語", 4, "…語"}, // byte 5 is inside 本
		{"Tail", "abc", 0, "…"},
		{"Tail", "abc", -1, "…"},
		{"Chars", "short", 10, "short"},
		{"Chars", "abcdef", 3, "abc"},
		{"Chars", "日本語テキスト", 3, "日本語"}, // characters, not bytes
		{"Chars", "a\xffb", 10, "a\uFFFDb"},
		{"Chars", "", 5, ""},
	} {
		if got := fns[tc.fn](tc.in, tc.n); got != tc.want {
			t.Errorf("%s(%q, %d) = %q, want %q", tc.fn, tc.in, tc.n, got, tc.want)
		}
	}
	if got := Chars(strings.Repeat("é", 600), 512); utf8.RuneCountInString(got) != 512 || !utf8.ValidString(got) {
		t.Errorf("Chars cut to %d characters, valid=%v", utf8.RuneCountInString(got), utf8.ValidString(got))
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
		for _, got := range []string{Cut(s, n), CutBytes([]byte(s), n), BothEnds(s, n), Prefix(s, n), Tail(s, n)} {
			if !utf8.ValidString(got) {
				t.Fatalf("cut at %d is not valid UTF-8: %q", n, got)
			}
			if len(got) > n+len(Ellipsis) {
				t.Fatalf("cut at %d is %d bytes", n, len(got))
			}
		}
	}
}
