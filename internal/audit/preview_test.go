package audit

import (
	"strconv"
	"strings"
	"testing"
)

func TestStructurePreview(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"nesting cut by depth", `{"a":{"b":{"c":{"d":1}},"l":[1,2,3,4,5]}}`, `{"a":{"b":{"c":{…1 keys}},"l":[1,2,3,4,5]}}`},
		{"padding in front does not hide the path", `{"p1":"` + strings.Repeat("a", 100) + `","p2":"` + strings.Repeat("b", 100) + `","path":"/etc/shadow"}`,
			`{"p1":"` + strings.Repeat("a", 41) + `…` + strings.Repeat("a", 42) + `"(100 bytes),"p2":"` + strings.Repeat("b", 41) + `…` + strings.Repeat("b", 42) + `"(100 bytes),"path":"/etc/shadow"}`},
		{"long key and number", `{"` + strings.Repeat("k", 300) + `":` + strings.Repeat("9", 300) + `}`,
			`{"` + strings.Repeat("k", 42) + `…` + strings.Repeat("k", 43) + `":` + strings.Repeat("9", 84) + `…` + strings.Repeat("9", 84) + `}`},
		{"array at the top", `["x",{"y":[true,null]}]`, `["x",{"y":[true,null]}]`},
	} {
		got := structurePreview([]byte(tc.in), 256)
		want := tc.want + " (" + strconv.Itoa(len(tc.in)) + " bytes)"
		if got != want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, want)
		}
	}
}

// TestPaddingCannotHideTheArguments: the arguments
// that matter show in the preview however they are padded: at the end of
// a long string, after a long member, after many members.
func TestPaddingCannotHideTheArguments(t *testing.T) {
	pad := strings.Repeat("x", 4000)
	var many strings.Builder
	many.WriteString(`{`)
	for i := range 100 {
		many.WriteString(`"pad` + strconv.Itoa(i) + `":"` + pad + `",`)
	}
	many.WriteString(`"path":"/etc/shadow"}`)
	for name, args := range map[string]string{
		"the end of a long string":  `{"command":"` + pad + `; cat /etc/shadow"}`,
		"after a long member":       `{"pad":"` + pad + `","path":"/etc/shadow"}`,
		"after many members":        many.String(),
		"at the end of a long list": `{"paths":["` + strings.Repeat(pad+`","`, 50) + `/etc/shadow"]}`,
		"nested after padding":      `{"pad":"` + pad + `","opts":{"pad":"` + pad + `","path":"/etc/shadow"}}`,
	} {
		got := structurePreview([]byte(args), 256)
		if !strings.Contains(got, "/etc/shadow") {
			t.Errorf("%s: the preview hides /etc/shadow: %s", name, got)
		}
		if len(got) > 2*256 {
			t.Errorf("%s: a preview of %d bytes for a budget of 256: %s", name, len(got), got)
		}
	}
}

// A key longer than its member's share, with an object under it, must not
// leave the value a negative budget (a panic serving the request), and a
// string of control characters, escaped in six bytes each, must not take many
// times its budget.
func TestPreviewOfOddShapes(t *testing.T) {
	var keys strings.Builder
	keys.WriteString(`{`)
	for i := range 12 {
		keys.WriteString(`"k` + strconv.Itoa(i) + `":{"bbbbbbbbbbbbbbbb":{"ccccc":"xx"}},`)
	}
	keys.WriteString(`"spec":{"containerSpec":{"imageName":"nginx"}}}`)
	if got := structurePreview([]byte(keys.String()), 256); !strings.Contains(got, "spec") || len(got) > 2*256 {
		t.Errorf("many members with long keys: %s", got)
	}
	controls := `{"s":"` + strings.Repeat(`\u0001`, 400) + `"}`
	if got := structurePreview([]byte(controls), 256); len(got) > 256+64 {
		t.Errorf("a string of control characters: a preview of %d bytes for a budget of 256: %s", len(got), got)
	}
	// A key is measured as written too: cut before it was escaped, a key
	// of control characters took six times its share.
	for name, args := range map[string]string{
		"a key of control characters":     `{"` + strings.Repeat(`\u0001`, 400) + `":1}`,
		"many keys of control characters": `{"` + strings.Repeat(`\u0002`, 60) + `":1,"` + strings.Repeat(`\u0003`, 60) + `":2,"` + strings.Repeat(`\u0004`, 60) + `":3,"path":"/etc/shadow"}`,
	} {
		if got := structurePreview([]byte(args), 256); len(got) > 256+64 {
			t.Errorf("%s: a preview of %d bytes for a budget of 256: %s", name, len(got), got)
		}
	}
}

// FuzzStructurePreview: any JSON, any budget: no panic, and a preview of
// bounded size.
func FuzzStructurePreview(f *testing.F) {
	f.Add([]byte(`{"a":{"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb":{"c":"xx"}},"b":[1,2,{"d":"\u0001\u0002"}]}`), 64)
	f.Add([]byte(`["`+strings.Repeat("é", 100)+`"]`), 16)
	f.Fuzz(func(t *testing.T, data []byte, budget int) {
		budget = 16 + abs(budget)%1024
		got := structurePreview(data, budget)
		if len(got) > 8*budget+64 {
			t.Fatalf("a preview of %d bytes for a budget of %d", len(got), budget)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
