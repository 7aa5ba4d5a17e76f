package toolsearch

import (
	"encoding/json"
	"slices"
	"strings"
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
		"the latest news":           {"latest", "news"},
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

// searchNames indexes tools given as name → description, among others on
// unrelated matters (so a word's rarity means what it does in a real
// catalog), and returns the names Search ranks for query, best first.
func searchNames(t *testing.T, tools [][2]string, query string, k int) []string {
	t.Helper()
	for _, other := range []string{"weather forecast", "stock quote", "translate text", "resize image",
		"convert currency", "play music", "book flight", "order pizza", "count words", "roll dice"} {
		words := strings.Fields(other)
		tools = append(tools, [2]string{"mcp.other." + words[0] + "_" + words[1], "Gives the " + other + "."})
	}
	docs := make([]Doc, len(tools))
	for i, tl := range tools {
		def, _ := json.Marshal(map[string]string{"description": tl[1]})
		docs[i] = DocOf(tl[0], def)
	}
	var out []string
	for _, h := range Build(docs).Search(query, k, nil) {
		out = append(out, docs[h.Doc].Name)
	}
	return out
}

func TestRelatedWordsAbbreviationsAndPrefixes(t *testing.T) {
	tools := [][2]string{
		{"mcp.fs.create_directory", "Create a new directory."},
		{"mcp.fs.list_directory", "List a directory's entries."},
		{"mcp.git.git_pull", "Pull changes from a remote."},
		{"mcp.gh.create_pull_request", "Create a new pull request in a repository."},
		{"mcp.gh.get_pull_request", "Get details of a pull request."},
		{"mcp.tracker.create_issue", "Create a new issue in a project."},
		{"mcp.mongodb.find", "Run a find query against a MongoDB collection."},
		{"mcp.sql.find", "Run a query against a SQL table."},
	}
	for query, want := range map[string]string{
		// A related word at half weight: folder is directory, make is create.
		"make a folder": "mcp.fs.create_directory",
		// An abbreviation read as its phrase.
		"make a new PR for my branch": "mcp.gh.create_pull_request",
		// ticket and bug are issue.
		"file a ticket about the bug": "mcp.tracker.create_issue",
		// A word the tool spells out longer.
		"query documents in mongo": "mcp.mongodb.find",
	} {
		if got := searchNames(t, tools, query, 3); len(got) == 0 || got[0] != want {
			t.Errorf("%q: got %q, want %s first", query, got, want)
		}
	}
}

func TestTheWordItselfOutranksARelatedWord(t *testing.T) {
	tools := [][2]string{
		{"mcp.a.open_directory", "Open a directory in the viewer."},
		{"mcp.b.open_folder", "Open a folder in the viewer."},
	}
	if got := searchNames(t, tools, "open folder", 2); !slices.Equal(got, []string{"mcp.b.open_folder", "mcp.a.open_directory"}) {
		t.Errorf("got %q: the tool that says folder first, the one that says directory second", got)
	}
}

func TestAgentPhrasingChangesNothing(t *testing.T) {
	tools := [][2]string{
		{"mcp.gh.list_issues", "List issues in a repository."},
		{"mcp.gh.create_issue", "Create a new issue in a repository."},
		{"mcp.support.please_help", "Hey, please help: let us know, just try it."},
	}
	plain := searchNames(t, tools, "list the issues", 3)
	asked := searchNames(t, tools, "Hey, can you please help me, I need to list the issues", 3)
	if !slices.Equal(plain, asked) || plain[0] != "mcp.gh.list_issues" {
		t.Errorf("plain %q, in agent phrasing %q: want the same, list_issues first", plain, asked)
	}
}

func TestANameThatSaysTheTaskRanksFirst(t *testing.T) {
	tools := [][2]string{
		{"mcp.t.get_documents", "Get documents, filtered by issue and sorted by created date: issue documents created by users."},
		{"mcp.t.create_issue", "Create a new issue with a title, a description, an assignee, a priority, labels, a project, a cycle, a due date, an estimate, subscribers, a template and a parent, in a team."},
	}
	if got := searchNames(t, tools, "create an issue", 2); len(got) == 0 || got[0] != "mcp.t.create_issue" {
		t.Errorf("got %q, want create_issue first", got)
	}
}

func TestNeighbouringWordsCountTogether(t *testing.T) {
	tools := [][2]string{
		{"mcp.a.search", "Search the knowledge base; the graph of a request is drawn."},
		{"mcp.b.search", "Search the knowledge graph."},
	}
	if got := searchNames(t, tools, "knowledge graph", 2); len(got) == 0 || got[0] != "mcp.b.search" {
		t.Errorf("got %q, want the tool that says knowledge graph first", got)
	}
}

func TestAMatchWeighingNothingIsListedOnce(t *testing.T) {
	// Two query words that each match the same doc must not list it
	// twice, whatever they score.
	tools := [][2]string{{"mcp.fs.create_directory", "Create a new directory."}}
	if got := searchNames(t, tools, "make create new folder directory", 5); !slices.Equal(got, []string{"mcp.fs.create_directory"}) {
		t.Errorf("got %q", got)
	}
}

func TestAFileNameOrAnAddressInAQuery(t *testing.T) {
	for in, want := range map[string][]string{
		"look at the source of main.go": {"look", "sourc", "main", "file"},
		"open https://example.com/a":    {"open", "url"},
		"go to www.example.org":         {"go", "url"},
		"scrape example.com please":     {"scrap", "url"},
		"version 1.31, e.g. notes.md":   {"version", "1", "31", "note", "file"},
		"explain spec.replicas":         {"explain", "spec", "replica"},
	} {
		if got := queryTerms(in); !slices.Equal(got, want) {
			t.Errorf("queryTerms(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAQuestionAsksToRead(t *testing.T) {
	for q, want := range map[string]bool{
		"What pods are running?":         true,
		"what's in the src folder":       true,
		"Is CI green on my pull request": true,
		"which tabs are open":            true,
		"delete the failed job":          false,
		"show the history":               false,
		"":                               false,
	} {
		if got := isQuestion(q); got != want {
			t.Errorf("isQuestion(%q) = %v, want %v", q, got, want)
		}
	}
	// Between a tool that tells and one that changes, equally matched by
	// a question's words, the one that tells ranks first.
	tools := [][2]string{
		{"mcp.k8s.delete_pods", "Pods in a namespace."},
		{"mcp.k8s.list_pods", "Pods in a namespace."},
	}
	if got := searchNames(t, tools, "what pods are in the namespace", 2); len(got) == 0 || got[0] != "mcp.k8s.list_pods" {
		t.Errorf("got %q, want list_pods first", got)
	}
}
