package toolsearch

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestTerms(t *testing.T) {
	for in, want := range map[string][]string{
		"listIssues":                {"list", "issu"},
		"mcp.github.create_issue":   {"mcp", "github", "creat", "issu"},
		"Creating the repositories": {"creat", "repository"},
		"Running processes":         {"run", "process"},
		"read a file from the disk": {"read", "file", "disk"},
		"HTTPServer v2":             {"httpserver", "v2"},
	} {
		if got := Terms(in); !slices.Equal(got, want) {
			t.Errorf("Terms(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSearchRanksByFieldsAndFilters(t *testing.T) {
	docs := []Doc{
		DocOf("mcp.fs.write_file", json.RawMessage(`{"name":"write_file","description":"Create a new file or overwrite an existing one.","inputSchema":{"type":"object","properties":{"path":{"type":"string"},"content":{"description":"Text to write"}}}}`)),
		DocOf("mcp.fs.read_text_file", json.RawMessage(`{"description":"Read the complete contents of a file as text.","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}}}`)),
		DocOf("mcp.github.create_issue", json.RawMessage(`{"description":"Create a new issue in a GitHub repository","inputSchema":{"type":"object","properties":{"owner":{},"repo":{},"title":{},"body":{}}}}`)),
		DocOf("mcp.github.list_issues", json.RawMessage(`{"description":"List issues in a GitHub repository with filtering options","inputSchema":{"type":"object","properties":{"owner":{},"repo":{},"state":{"description":"open or closed"}}}}`)),
		DocOf("mcp.bad", json.RawMessage(`not json`)),
	}
	ix := Build(docs)
	names := func(hits []Hit) []string {
		var out []string
		for _, h := range hits {
			out = append(out, docs[h.Doc].Name)
		}
		return out
	}
	if got := names(ix.Search("open a new bug report on the repo", 2, nil)); len(got) == 0 || got[0] != "mcp.github.create_issue" {
		t.Errorf("a bug report: got %q, want create_issue first", got)
	}
	if got := names(ix.Search("show me what is written in a text file", 1, nil)); !slices.Equal(got, []string{"mcp.fs.read_text_file"}) {
		t.Errorf("reading a file: got %q", got)
	}
	// keep decides: a doc it refuses is never returned, and the next one
	// takes its place.
	got := names(ix.Search("issues of a repository", 5, func(d int) bool { return docs[d].Name != "mcp.github.list_issues" }))
	if slices.Contains(got, "mcp.github.list_issues") || len(got) == 0 || got[0] != "mcp.github.create_issue" {
		t.Errorf("with list_issues filtered out: got %q", got)
	}
	if got := ix.Search("zebra", 5, nil); len(got) != 0 {
		t.Errorf("a query with no known term matched %v", got)
	}
	if got := ix.Search("file", 0, nil); got != nil {
		t.Errorf("k=0 returned %v", got)
	}
	if got := names(ix.Search("bad", 5, nil)); !slices.Equal(got, []string{"mcp.bad"}) {
		t.Errorf("a definition that is not JSON is still found by its name: %q", got)
	}
}
