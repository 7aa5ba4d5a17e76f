// Command search measures the bridge's tool search on real servers' tool
// lists (catalog/servers, see README.md) and two query sets of tasks with
// the tools that do them: recall@5 and MRR on the real catalog, for the set
// the ranker was tuned on (queries/queries.tsv) and for a held-out set it
// was not (queries/heldout.tsv); on a catalog of 800 tools, the tokens an
// agent reads before its first call with the whole catalog and with
// search, and how long a find takes in process (ranking, policy filter,
// redaction, rendering: no HTTP, session or audit). It exits 1 when a
// target is missed or a reading is missing.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tiktoken-go/tokenizer"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/policy"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
	"github.com/mcp-operator/mcp-operator/internal/redact"
	"github.com/mcp-operator/mcp-operator/internal/toolsearch"
)

// Targets.
const (
	minRecall    = 0.9
	minQueries   = 100
	minHeldOut   = 100
	minFewer     = 10.0
	maxFindP50   = 2 * time.Millisecond
	bigCatalog   = 800
	k            = 5
	findRepeats  = 20
	stagingTitle = "-staging"
)

func main() {
	dir := flag.String("dir", ".", "the folder with catalog/ and queries/")
	verbose := flag.Bool("v", false, "print each tuning query that misses (never a held-out one)")
	tune := flag.Bool("tune", false, "measure the tuning set alone, printing its misses, for work on the ranker that must not see the held-out figures")
	flag.Parse()
	if *tune {
		if err := tuneOnly(*dir); err != nil {
			fmt.Fprintln(os.Stderr, "bench-search:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*dir, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "bench-search:", err)
		os.Exit(1)
	}
}

// tool is one tool of the catalog under the name the bridge gives it.
type tool struct {
	server, name string // name: mcp.<server>.<tool>
	listed       json.RawMessage
}

type query struct {
	text   string
	expect []string
}

func run(dir string, verbose bool) error {
	real, servers, err := loadCatalog(filepath.Join(dir, "catalog", "servers"))
	if err != nil {
		return err
	}
	queries, err := loadQueries(filepath.Join(dir, "queries", "queries.tsv"), real)
	if err != nil {
		return err
	}
	heldOut, err := loadQueries(filepath.Join(dir, "queries", "heldout.tsv"), real)
	if err != nil {
		return err
	}
	if len(queries) < minQueries || len(heldOut) < minHeldOut {
		return fmt.Errorf("%d queries and %d held-out ones: want at least %d and %d", len(queries), len(heldOut), minQueries, minHeldOut)
	}
	fmt.Printf("catalog: %d tools of %d servers; %d queries, %d held out\n", len(real), servers, len(queries), len(heldOut))

	// Quality, on the real catalog.
	ix := toolsearch.Build(docs(real))
	recall, mrr := quality(ix, real, queries, verbose)
	// The held-out set's misses are never printed: a ranker change made
	// by looking at them would turn it into a second tuning set.
	heldRecall, heldMRR := quality(ix, real, heldOut, false)

	// Size and speed, on 800 tools: the real ones, then the servers again
	// as staging instances (a bridge in front of both is common), in name
	// order, until there are 800.
	big := grow(real, bigCatalog)
	bigIx := toolsearch.Build(docs(big))
	engine, err := callerPolicy()
	if err != nil {
		return err
	}
	caller := policy.Subject{Kind: v1alpha1.SubjectServiceAccount, Namespace: "agents", Name: "agent"}
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		return err
	}
	var countErr error
	count := func(b []byte) int {
		ids, _, err := enc.Encode(string(b))
		if err != nil && countErr == nil {
			countErr = fmt.Errorf("while counting tokens: %w", err)
		}
		return len(ids)
	}
	items := make([][]byte, len(big))
	for i, t := range big {
		items[i] = t.listed
	}
	full := count(append(append([]byte(`{"tools":`), rawjson.AppendArray(nil, items)...), '}'))

	var durations []time.Duration
	var answers []int
	for _, q := range queries {
		for range findRepeats {
			start := time.Now()
			found := bigIx.Search(q.text, k, func(doc int) bool {
				return engine.ToolVisible(caller, policy.ToolCall{Name: big[doc].name, Server: big[doc].server, Namespace: "bench"})
			})
			out := make([][]byte, len(found))
			for i, h := range found {
				// As the bridge does: each found tool is redacted with its
				// server's Secret values (here the credential shapes alone)
				// and cleaned of invisible text on its way out.
				out[i], _, _ = output.JSON(redact.Shapes(), "tools/list", big[h.Doc].listed)
			}
			answer := mcpbridge.FindResult(out)
			durations = append(durations, time.Since(start))
			if len(answers) < len(queries) && len(durations)%findRepeats == 1 {
				call := fmt.Sprintf(`{"name":"find_tools","arguments":{"query":%q}}`, q.text)
				answers = append(answers, count([]byte(call))+count(answer))
			}
		}
	}
	if len(answers) == 0 || len(durations) == 0 {
		return fmt.Errorf("no find was measured")
	}
	slices.Sort(durations)
	sort.Ints(answers)
	search := count(mcpbridge.SearchTools()) + answers[len(answers)/2]
	if countErr != nil {
		return countErr
	}
	if full == 0 || search == 0 {
		return fmt.Errorf("a token count is zero (full %d, search %d)", full, search)
	}
	fewer := float64(full) / float64(search)
	p50 := durations[len(durations)/2]

	fmt.Printf("recall@5: %.3f (held out: %d tasks never tuned on)\n", heldRecall, len(heldOut))
	fmt.Printf("MRR: %.3f (held out)\n", heldMRR)
	fmt.Printf("recall@5 tuning set: %.3f (%d tasks the ranker was tuned on)\n", recall, len(queries))
	fmt.Printf("MRR tuning set: %.3f\n", mrr)
	fmt.Printf("tokens before the first call: full %d, search %d (%.1f× fewer)\n", full, search, fewer)
	fmt.Printf("in-process find p50: %.3f ms (ranking, policy filter, redaction, rendering; no HTTP, session or audit)\n", float64(p50.Microseconds())/1000)
	fmt.Printf("(on %d tools; search = the meta-tools' list + the median find_tools call and answer, %d tools each; tokenizer o200k_base)\n", len(big), k)

	// The target is checked on the held-out set, the estimate of recall on
	// tasks the ranker has not seen; the tuning set must hold it too, so a
	// change that loses ground on what it was fitted to shows.
	var missed []string
	if heldRecall < minRecall {
		missed = append(missed, fmt.Sprintf("recall@5 held out %.3f < %.2f", heldRecall, minRecall))
	}
	if recall < minRecall {
		missed = append(missed, fmt.Sprintf("recall@5 on the tuning set %.3f < %.2f", recall, minRecall))
	}
	if fewer < minFewer {
		missed = append(missed, fmt.Sprintf("%.1f× fewer tokens < %.0f×", fewer, minFewer))
	}
	if p50 > maxFindP50 {
		missed = append(missed, fmt.Sprintf("in-process find p50 %v > %v", p50, maxFindP50))
	}
	if len(missed) > 0 {
		return fmt.Errorf("targets missed: %s", strings.Join(missed, "; "))
	}
	return nil
}

// tuneOnly prints the tuning set's figures and misses, and nothing of the
// held-out set.
func tuneOnly(dir string) error {
	real, _, err := loadCatalog(filepath.Join(dir, "catalog", "servers"))
	if err != nil {
		return err
	}
	queries, err := loadQueries(filepath.Join(dir, "queries", "queries.tsv"), real)
	if err != nil {
		return err
	}
	recall, mrr := quality(toolsearch.Build(docs(real)), real, queries, true)
	fmt.Printf("recall@5 tuning set: %.3f\nMRR tuning set: %.3f\n", recall, mrr)
	return nil
}

// quality is recall@k and MRR of qs on the catalog tools indexed in ix.
func quality(ix *toolsearch.Index, tools []tool, qs []query, verbose bool) (recall, mrr float64) {
	var hits int
	var rr float64
	for _, q := range qs {
		found := ix.Search(q.text, k, nil)
		rank := 0
		for i, h := range found {
			if slices.Contains(q.expect, tools[h.Doc].name) {
				rank = i + 1
				break
			}
		}
		if rank > 0 {
			hits++
			rr += 1 / float64(rank)
		} else if verbose {
			var got []string
			for _, h := range found {
				got = append(got, tools[h.Doc].name)
			}
			fmt.Printf("  miss: %q want %v got %v\n", q.text, q.expect, got)
		}
	}
	return float64(hits) / float64(len(qs)), rr / float64(len(qs))
}

func docs(tools []tool) []toolsearch.Doc {
	out := make([]toolsearch.Doc, len(tools))
	for i, t := range tools {
		out[i] = toolsearch.DocOf(t.name, t.listed)
	}
	return out
}

// loadCatalog reads every <server>.json (a tools/list answer as dump.mjs
// wrote it), naming each tool as the bridge does.
func loadCatalog(dir string) ([]tool, int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		return nil, 0, fmt.Errorf("no catalog in %s: %v", dir, err)
	}
	var out []tool
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, 0, err
		}
		var dump struct {
			Server string            `json:"server"`
			Tools  []json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(data, &dump); err != nil {
			return nil, 0, fmt.Errorf("while reading %s: %w", f, err)
		}
		out = append(out, named(dump.Server, dump.Tools)...)
	}
	return out, len(files), nil
}

// named are a server's tools under the names the bridge gives them, as
// tools/list shows them (compact JSON, as the bridge sends it).
func named(server string, defs []json.RawMessage) []tool {
	var out []tool
	for _, d := range defs {
		upstream, _ := rawjson.String(rawjson.Get(d, "name"))
		name := "mcp." + server + "." + upstream
		compact, err := json.Marshal(d)
		if err != nil {
			continue
		}
		out = append(out, tool{server: server, name: name, listed: rawjson.Set(compact, "name", rawjson.AppendString(nil, name))})
	}
	return out
}

// grow adds the catalog's servers again as <server>-staging until it has n
// tools.
func grow(real []tool, n int) []tool {
	big := slices.Clone(real)
	byServer := map[string][]json.RawMessage{}
	var order []string
	for _, t := range real {
		if _, ok := byServer[t.server]; !ok {
			order = append(order, t.server)
		}
		byServer[t.server] = append(byServer[t.server], t.listed)
	}
	for _, s := range order {
		if len(big) >= n {
			break
		}
		big = append(big, named(s+stagingTitle, byServer[s])...)
	}
	return big[:min(n, len(big))]
}

// loadQueries reads the query set: a task, a tab, the tools that do it
// (server.tool, space-separated). Every tool named must be in the catalog.
func loadQueries(path string, catalog []tool) ([]query, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	known := map[string]bool{}
	for _, t := range catalog {
		known[t.name] = true
	}
	var out []query
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		task, tools, ok := strings.Cut(text, "\t")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want a task, a tab and the tools", path, line)
		}
		q := query{text: task}
		for _, t := range strings.Fields(tools) {
			name := "mcp." + t
			if !known[name] {
				return nil, fmt.Errorf("%s:%d: %s is not in the catalog", path, line, t)
			}
			q.expect = append(q.expect, name)
		}
		out = append(out, q)
	}
	return out, sc.Err()
}

// callerPolicy is the ToolPolicy a find is filtered with: every tool but
// the destructive ones, which are denied, as a cautious team would set it.
func callerPolicy() (*policy.Engine, error) {
	var p v1alpha1.ToolPolicy
	p.Namespace, p.Name = "bench", "agents"
	p.Spec.Subjects = []v1alpha1.Subject{{Kind: v1alpha1.SubjectServiceAccount, Namespace: "agents", Name: "agent"}}
	p.Spec.Rules = []v1alpha1.ToolRule{
		{Tools: []string{"mcp.*.*"}, Decision: v1alpha1.DecisionAllow},
		{Tools: []string{"mcp.*.drop*", "mcp.*.delete*"}, Decision: v1alpha1.DecisionDeny},
	}
	e, errs := policy.Compile([]v1alpha1.ToolPolicy{p})
	if len(errs) > 0 {
		return nil, fmt.Errorf("the bench's policy does not compile: %v", errs)
	}
	return e, nil
}
