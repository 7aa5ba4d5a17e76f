package toolsearch

import (
	"encoding/json"
	"fmt"
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
		// Told apart by their names alone.
		{"mcp.opensearch.search", "Search the documents of an index."},
		{"mcp.elasticsearch.search", "Search the documents of an index."},
	}
	for query, want := range map[string]string{
		// A related word at half weight: folder is directory, make is create.
		"make a folder": "mcp.fs.create_directory",
		// An abbreviation read as its phrase.
		"make a new PR for my branch": "mcp.gh.create_pull_request",
		// ticket and bug are issue.
		"file a ticket about the bug": "mcp.tracker.create_issue",
		// A word the tool spells out longer (elastic is in no group of
		// related words: only its being the start of elasticsearch counts).
		"search documents in elastic": "mcp.elasticsearch.search",
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
	// Both tools have the task's words in their names, the same text, and
	// the same length (create_issue_zeta's extra name word weighs what
	// create_issue's three extra text words do), so BM25 ties them; only
	// the share of the name the query asks for (two of three words, two of
	// four) puts create_issue first, although the tie would go to the
	// earlier tool.
	tools := [][2]string{
		{"mcp.t.create_issue_zeta", "A tool."},
		{"mcp.t.create_issue", "A tool: eta theta iota."},
	}
	if got := searchNames(t, tools, "create an issue", 2); !slices.Equal(got, []string{"mcp.t.create_issue", "mcp.t.create_issue_zeta"}) {
		t.Errorf("got %q, want create_issue first", got)
	}
}

func TestAWordOfSeveralMeaningsIsWeakerEvidenceForEach(t *testing.T) {
	// open is in three groups (create, read, go to), folder in one: the
	// tool found through folder's related word ranks above the one found
	// through open's, which would otherwise score the same and come first.
	tools := [][2]string{
		{"mcp.p.create_item", "An item."},
		{"mcp.q.directory_item", "An item."},
	}
	if got := searchNames(t, tools, "open folder", 2); !slices.Equal(got, []string{"mcp.q.directory_item", "mcp.p.create_item"}) {
		t.Errorf("got %q, want directory_item (folder's related word) first", got)
	}
}

func TestAHugeNameKeepsFewTerms(t *testing.T) {
	// A server may send any name; the name's share is computed over at
	// most maxNameTerms distinct words of it, however many it has.
	var b strings.Builder
	b.WriteString("mcp.big.create_issue")
	for i := range 20000 {
		fmt.Fprintf(&b, "_w%d", i)
	}
	ix := Build([]Doc{{Name: b.String()}, {Name: "mcp.small.list_issues"}})
	if got := len(ix.names[0]); got != maxNameTerms {
		t.Errorf("a name of 20,000 distinct words kept %d of them, want %d", got, maxNameTerms)
	}
	if got := ix.names[0][:3]; !slices.Equal(got, []string{"big", "creat", "issu"}) {
		t.Errorf("the name's first terms are %q, want big, creat, issu (mcp left out)", got)
	}
	if got := ix.names[1]; !slices.Equal(got, []string{"small", "list", "issu"}) {
		t.Errorf("a short name's terms are %q", got)
	}
	if hits := ix.Search("create an issue", 1, nil); len(hits) != 1 || hits[0].Doc != 0 {
		t.Errorf("the tool with the huge name is still found first: %v", hits)
	}
}

func TestRelatedEntriesWithAStopWordAreDropped(t *testing.T) {
	// Read with the stop words, "log in" would be the word log, which is
	// not login; without them, a phrase no query's terms can make.
	for key, rel := range relatedTerms.related {
		for _, p := range append([][]string{strings.Fields(key)}, rel...) {
			for _, w := range p {
				if stopWords[w] {
					t.Errorf("related words of %q: %q has the stop word %q", key, p, w)
				}
			}
		}
	}
	if !slices.ContainsFunc(relatedTerms.related["login"], func(p []string) bool { return slices.Equal(p, []string{"signin"}) }) {
		t.Errorf("login's related words %q lack signin", relatedTerms.related["login"])
	}
	for _, p := range relatedTerms.related["login"] {
		if slices.Equal(p, []string{"log"}) {
			t.Errorf("login is related to log: %q", relatedTerms.related["login"])
		}
	}
	table := readRelated("login, log in, signon\nlog, history")
	if got := table.related["login"]; len(got) != 1 || !slices.Equal(got[0], []string{"signon"}) {
		t.Errorf("login's related words %q, want only signon", got)
	}
	if table.senses["log"] != 1 {
		t.Errorf("log is in %d groups, want 1(sign in is dropped, not read as sign)", table.senses["log"])
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
		"scale deployment.apps":         {"scal", "deployment", "app"},
		"upgrade node.js":               {"upgrad", "node", "js"},
		"open config.yaml":              {"open", "config", "file"},
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
		"how many pods are running":      true,
		"how do I create a branch":       false,
		"how to create a branch":         false,
		"do a backup of the database":    false,
		"have the bot post the summary":  false,
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
