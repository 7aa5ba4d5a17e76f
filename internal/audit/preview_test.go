package audit

import (
	"strconv"
	"strings"
	"testing"
)

func TestStructurePreview(t *testing.T) {
	var many strings.Builder
	many.WriteString(`{`)
	for i := range 70 {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`"k` + strconv.Itoa(i) + `":` + strconv.Itoa(i))
	}
	many.WriteString(`}`)
	for _, tc := range []struct{ name, in, want string }{
		{"nesting cut by depth", `{"a":{"b":{"c":{"d":1}},"l":[1,2,3,4,5]}}`, `{"a":{"b":{"c":{…1 keys}},"l":[1,2,3,… +2 items]}}`},
		{"padding in front does not hide the path", `{"p1":"` + strings.Repeat("a", 100) + `","p2":"` + strings.Repeat("b", 100) + `","path":"/etc/shadow"}`,
			`{"p1":"` + strings.Repeat("a", 32) + `…"(100 bytes),"p2":"` + strings.Repeat("b", 32) + `…"(100 bytes),"path":"/etc/shadow"}`},
		{"nested objects show few keys", `{"o":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6}}`, `{"o":{"a":1,"b":2,"c":3,"d":4,… +2 keys}}`},
		{"long key and number", `{"` + strings.Repeat("k", 40) + `":` + strings.Repeat("9", 40) + `}`, `{"` + strings.Repeat("k", 32) + `…":` + strings.Repeat("9", 32) + `…}`},
		{"array at the top", `["x",{"y":[true,null]}]`, `["x",{"y":[true,null]}]`},
	} {
		got := structurePreview([]byte(tc.in))
		want := tc.want + " (" + strconv.Itoa(len(tc.in)) + " bytes)"
		if got != want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, want)
		}
	}
	// Every top-level key is named, up to previewKeyNames; values for the first previewKeys.
	got := structurePreview([]byte(many.String()))
	if !strings.Contains(got, `"k15":15,"k16":…`) || !strings.Contains(got, `"k63":…,… +6 keys}`) {
		t.Errorf("many keys: %s", got)
	}
}
