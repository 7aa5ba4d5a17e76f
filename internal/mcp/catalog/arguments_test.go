package catalog

import (
	"encoding/json"
	"testing"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

func TestArgumentsSayWhatTheyHold(t *testing.T) {
	schema := `{"type":"object","properties":{
		"path":{"type":"string"},
		"sourceFile":{"type":"string"},
		"target":{"type":"string","description":"Directory to list"},
		"endpoint_url":{"type":"string"},
		"link":{"type":"string","format":"uri"},
		"where":{"type":["string","null"],"format":"path"},
		"content":{"type":"string","description":"Text to write to the file"},
		"paths":{"type":"array","items":{"type":"string"}},
		"count":{"type":"integer","description":"how many paths"},
		"anything":{"description":"a URL or nothing"}
	}}`
	want := []Argument{
		{Name: "anything", Holds: v1alpha1.HoldsURL},
		{Name: "content"},
		{Name: "count"},
		{Name: "endpoint_url", Holds: v1alpha1.HoldsURL},
		{Name: "link", Holds: v1alpha1.HoldsURL},
		{Name: "path", Holds: v1alpha1.HoldsPath},
		{Name: "paths"},
		{Name: "sourceFile", Holds: v1alpha1.HoldsPath},
		{Name: "target", Holds: v1alpha1.HoldsPath},
		{Name: "where", Holds: v1alpha1.HoldsPath},
	}
	got, closed := Arguments(json.RawMessage(schema))
	if !closed {
		t.Error("a schema of properties alone admits others, it says")
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("argument %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, s := range []string{`{"type":"object"}`, `{"type":"object","properties":[]}`, `not json`} {
		if a, _ := Arguments(json.RawMessage(s)); len(a) != 0 {
			t.Errorf("Arguments(%s) = %+v, want none", s, a)
		}
	}
}

// TestArgumentsOfAnOpenSchema: a schema that admits properties it does
// not list, or takes them from elsewhere, lists its own but says they may
// not be all.
func TestArgumentsOfAnOpenSchema(t *testing.T) {
	for _, more := range []string{
		`"additionalProperties":true`, `"additionalProperties":{"type":"string"}`, `"unevaluatedProperties":{}`,
		`"patternProperties":{"^x-":{}}`, `"allOf":[{"properties":{"b":{}}}]`, `"anyOf":[{}]`, `"oneOf":[{}]`,
		`"$ref":"#/$defs/more"`, `"if":{},"then":{"properties":{"b":{}}}`, `"dependentSchemas":{"a":{"properties":{"b":{}}}}`,
	} {
		args, closed := Arguments(json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}},` + more + `}`))
		if closed || len(args) != 1 || args[0].Name != "a" {
			t.Errorf("%s: arguments %+v, all of them: %v; want a, maybe not all", more, args, closed)
		}
	}
	for _, closedBy := range []string{`"additionalProperties":false`, `"unevaluatedProperties":false`, `"required":["a"]`} {
		if _, closed := Arguments(json.RawMessage(`{"type":"object","properties":{"a":{}},` + closedBy + `}`)); !closed {
			t.Errorf("%s: the schema admits others, it says", closedBy)
		}
	}
}

func TestHoldsByName(t *testing.T) {
	cases := map[string]v1alpha1.ArgumentHolds{
		"path": v1alpha1.HoldsPath, "filePath": v1alpha1.HoldsPath, "FILE_NAME": v1alpha1.HoldsPath,
		"working-dir": v1alpha1.HoldsPath, "filename": v1alpha1.HoldsPath, "folder": v1alpha1.HoldsPath,
		"url": v1alpha1.HoldsURL, "baseURL": v1alpha1.HoldsURL, "urlPath": v1alpha1.HoldsURL, "resource_uri": v1alpha1.HoldsURL,
		"message": "", "profile": "", "query": "", "directive": "", "urgent": "",
	}
	for name, want := range cases {
		if got := HoldsByName(name); got != want {
			t.Errorf("HoldsByName(%q) = %q, want %q", name, got, want)
		}
	}
}
