// Package toolsearch ranks a catalog's tools for a task described in
// words, so an agent can be shown the few tools it needs instead of the
// whole catalog.
//
// The ranking is Okapi BM25 (k1 = 1.2, b = 0.75) with per-field weights
// (BM25F in its simple form: a term's frequency in a tool is the weighted
// sum of its frequencies in the fields, and the tool's length the weighted
// sum of the fields' lengths):
//
//	name (the namespaced name, split into words)   weight 3
//	title and description                          weight 1
//	argument names                                 weight 2
//	argument descriptions                          weight 0.5
//
// Text becomes terms by splitting on everything but letters and digits and
// at lower-to-upper case changes (listIssues → list, issues), lowercasing,
// dropping a short list of English stop words, and stripping a few English
// suffixes (stem), so "listing files" meets list_files; two neighbouring
// terms are also indexed as one (a bigram).
//
// A query is read the same way, less the words of agent phrasing (please,
// help, …), and widened where agents and tools word the same thing apart:
// each word also matches its related words of tool vocabulary (related.go:
// folder → directory, PR → pull request) and the longer words it begins
// (mongo → mongodb), at a lower weight; a file name or an address in it is
// read as file or url; a question also asks for the tools that tell. Each
// tool's score then gains the share of its name's words the query asks for.
//
// The index is built once for a catalog and only read by queries: Search
// is safe for concurrent use.
package toolsearch

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
)

// BM25's parameters: k1 saturates a term's frequency, b normalises by
// length. The usual values: tuned ones did no better on the query set.
const (
	k1 = 1.2
	b  = 0.75
)

// Field weights (see the package comment).
const (
	weightName    = 3
	weightText    = 1
	weightArgName = 2
	weightArgText = 0.5
	// weightNameCoverage scales the share of a tool's name terms that a
	// query asks for (see Search).
	weightNameCoverage = 4
)

// Doc is what a tool is searched by.
type Doc struct {
	// Name is the tool's name as the agent sees it (mcp.github.list_issues).
	Name string
	// Text is its title and description.
	Text string
	// ArgNames and ArgText are its arguments' names and descriptions.
	ArgNames []string
	ArgText  []string
}

// DocOf reads a tool's definition (a tools/list item) into the Doc it is
// searched by, under the name the agent sees. A definition that is not a
// JSON object is searched by its name alone.
func DocOf(name string, definition json.RawMessage) Doc {
	var def struct {
		Title       string `json:"title"`
		Description string `json:"description"`
		InputSchema struct {
			Properties map[string]struct {
				Description string `json:"description"`
				Title       string `json:"title"`
			} `json:"properties"`
		} `json:"inputSchema"`
	}
	d := Doc{Name: name}
	if json.Unmarshal(definition, &def) != nil {
		return d
	}
	d.Text = def.Title + " " + def.Description
	for arg, p := range def.InputSchema.Properties {
		d.ArgNames = append(d.ArgNames, arg)
		d.ArgText = append(d.ArgText, p.Title+" "+p.Description)
	}
	return d
}

// Index is a catalog's BM25 index.
type Index struct {
	// postings: for each term, the docs that have it with their weighted
	// frequency, in doc order.
	postings map[string][]posting
	// norm is each doc's length normalisation k1·(1−b+b·len/avglen).
	norm []float64
	// names are each doc's distinct name terms (the namespace's mcp left
	// out), for how much of a name a query covers.
	names [][]string
	// vocabulary is every single-word term, sorted, for the words a
	// query's word begins.
	vocabulary []string
	n          int
}

type posting struct {
	doc int32
	tf  float32
}

// Build indexes docs; Search returns their positions in docs.
func Build(docs []Doc) *Index {
	ix := &Index{postings: map[string][]posting{}, norm: make([]float64, len(docs)), names: make([][]string, len(docs)), n: len(docs)}
	lengths := make([]float64, len(docs))
	var total float64
	for i, d := range docs {
		tf := map[string]float64{}
		add := func(text string, w float64) {
			terms := Terms(text)
			for j, t := range terms {
				tf[t] += w
				lengths[i] += w
				// Two words side by side count as a term of their own
				// too (at the field's weight, not adding to the length),
				// so "pull request" ranks the tools that say it above
				// those that say pull and request apart.
				if j > 0 {
					tf[bigram(terms[j-1], t)] += w
				}
			}
		}
		add(d.Name, weightName)
		ix.names[i] = nameTerms(d.Name)
		add(d.Text, weightText)
		for _, a := range d.ArgNames {
			add(a, weightArgName)
		}
		for _, a := range d.ArgText {
			add(a, weightArgText)
		}
		total += lengths[i]
		for t, f := range tf {
			ix.postings[t] = append(ix.postings[t], posting{doc: int32(i), tf: float32(f)})
		}
	}
	for t := range ix.postings {
		if !strings.Contains(t, " ") {
			ix.vocabulary = append(ix.vocabulary, t)
		}
	}
	slices.Sort(ix.vocabulary)
	avg := 1.0
	if len(docs) > 0 && total > 0 {
		avg = total / float64(len(docs))
	}
	for i := range docs {
		ix.norm[i] = k1 * (1 - b + b*lengths[i]/avg)
	}
	return ix
}

// maxNameTerms bounds the distinct words of a name kept for the name's
// share (see Search): a real tool's name has a handful, and a server may
// send any name, which is indexed under the lock of every search.
const maxNameTerms = 32

// nameTerms are the distinct terms of a tool's name, the namespace's mcp
// left out, at most maxNameTerms of them.
func nameTerms(name string) []string {
	var out []string
	seen := map[string]bool{"mcp": true}
	for _, t := range Terms(name) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
			if len(out) == maxNameTerms {
				break
			}
		}
	}
	return out
}

// Len is the number of docs indexed.
func (ix *Index) Len() int { return ix.n }

// Hit is a doc that matched a query.
type Hit struct {
	Doc   int
	Score float64
}

// Search returns at most k docs for query, best first, among those keep
// accepts (nil keeps all); ties go to the earlier doc. keep is asked only
// about docs that match some term, best first, until k are kept.
//
// Each word of the query scores a doc by the best of its alternatives:
// itself at full weight, or a word of the same meaning in tool vocabulary
// (see related) at a lower one, so a tool that says "directory" is found
// for "folder" but one that says "folder" still ranks first. Each pair of
// neighbouring words of the query adds what it scores as a bigram.
func (ix *Index) Search(query string, k int, keep func(doc int) bool) []Hit {
	if k <= 0 {
		return nil
	}
	scores := make([]float64, ix.n)
	best := make([]float64, ix.n)
	// inBest and isMatched mark the docs listed in touched and matched:
	// a score of zero would not tell them.
	inBest := make([]bool, ix.n)
	isMatched := make([]bool, ix.n)
	var matched, touched []int32
	groups := expand(queryTerms(query), ix.longer)
	if isQuestion(query) {
		groups = append(groups, readingVerbs)
	}
	for _, group := range groups {
		touched = touched[:0]
		keepBest := func(d int32, s float64) {
			if !inBest[d] {
				inBest[d] = true
				touched = append(touched, d)
			}
			best[d] = max(best[d], s)
		}
		for _, alt := range group {
			if len(alt.terms) == 1 {
				ix.score(alt.terms[0], alt.weight, keepBest)
				continue
			}
			// An alternative of several words (pr → pull request) scores
			// the sum of its words; the group keeps each doc's best.
			altScore := map[int32]float64{}
			for _, t := range alt.terms {
				ix.score(t, alt.weight, func(d int32, s float64) { altScore[d] += s })
			}
			for d, s := range altScore {
				keepBest(d, s)
			}
		}
		for _, d := range touched {
			if !isMatched[d] {
				isMatched[d] = true
				matched = append(matched, d)
			}
			scores[d] += best[d]
			best[d], inBest[d] = 0, false
		}
	}
	// A tool's name says what it does in a few words: the share of them
	// the query asks for is added, so create_issue outranks a tool that
	// only mentions creating and issues somewhere in a long text.
	asked := map[string]float64{}
	for _, group := range groups {
		for _, alt := range group {
			for _, t := range alt.terms {
				asked[t] = max(asked[t], alt.weight)
			}
		}
	}
	hits := make([]Hit, 0, len(matched))
	for _, d := range matched {
		var covered float64
		for _, t := range ix.names[d] {
			covered += asked[t]
		}
		if len(ix.names[d]) > 0 {
			scores[d] += weightNameCoverage * covered / float64(len(ix.names[d]))
		}
		hits = append(hits, Hit{Doc: int(d), Score: scores[d]})
	}
	slices.SortFunc(hits, func(a, b Hit) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return a.Doc - b.Doc
	})
	out := hits[:0]
	for _, h := range hits {
		if keep == nil || keep(h.Doc) {
			out = append(out, h)
			if len(out) == k {
				break
			}
		}
	}
	return out
}

// longer are the indexed words that begin with term and are longer (mongo:
// mongodb; config: configuration), at most maxLonger of them, for a term of
// at least minPrefix letters: agents shorten words that tools spell out.
func (ix *Index) longer(term string) []string {
	if len(term) < minPrefix {
		return nil
	}
	var out []string
	i, _ := slices.BinarySearch(ix.vocabulary, term)
	for ; i < len(ix.vocabulary) && strings.HasPrefix(ix.vocabulary[i], term) && len(out) < maxLonger; i++ {
		if ix.vocabulary[i] != term {
			out = append(out, ix.vocabulary[i])
		}
	}
	return out
}

// Words a query's word begins: from how many letters, and how many at most.
const (
	minPrefix = 4
	maxLonger = 8
)

// score calls add with the BM25 score, times weight, of term in each doc
// that has it.
func (ix *Index) score(term string, weight float64, add func(doc int32, score float64)) {
	ps := ix.postings[term]
	if len(ps) == 0 {
		return
	}
	// BM25's idf, the form that is never negative.
	idf := math.Log(1 + (float64(ix.n)-float64(len(ps))+0.5)/(float64(len(ps))+0.5))
	for _, p := range ps {
		tf := float64(p.tf)
		add(p.doc, weight*idf*tf*(k1+1)/(tf+ix.norm[p.doc]))
	}
}
