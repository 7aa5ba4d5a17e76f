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
	got := Arguments(json.RawMessage(schema))
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("argument %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, s := range []string{`{"type":"object"}`, `{"type":"object","properties":[]}`, `not json`} {
		if a := Arguments(json.RawMessage(s)); len(a) != 0 {
			t.Errorf("Arguments(%s) = %+v, want none", s, a)
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
