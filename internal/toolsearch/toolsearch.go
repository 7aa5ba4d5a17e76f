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
// suffixes (stem), so "listing files" meets list_files. The index is built
// once for a catalog and only read by queries: Search is safe for
// concurrent use.
package toolsearch

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"unicode"
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
	n    int
}

type posting struct {
	doc int32
	tf  float32
}

// Build indexes docs; Search returns their positions in docs.
func Build(docs []Doc) *Index {
	ix := &Index{postings: map[string][]posting{}, norm: make([]float64, len(docs)), n: len(docs)}
	lengths := make([]float64, len(docs))
	var total float64
	for i, d := range docs {
		tf := map[string]float64{}
		add := func(text string, w float64) {
			for _, t := range Terms(text) {
				tf[t] += w
				lengths[i] += w
			}
		}
		add(d.Name, weightName)
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
	avg := 1.0
	if len(docs) > 0 && total > 0 {
		avg = total / float64(len(docs))
	}
	for i := range docs {
		ix.norm[i] = k1 * (1 - b + b*lengths[i]/avg)
	}
	return ix
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
func (ix *Index) Search(query string, k int, keep func(doc int) bool) []Hit {
	if k <= 0 {
		return nil
	}
	scores := map[int32]float64{}
	seen := map[string]bool{}
	for _, t := range Terms(query) {
		if seen[t] {
			continue
		}
		seen[t] = true
		ps := ix.postings[t]
		if len(ps) == 0 {
			continue
		}
		// BM25's idf, the form that is never negative.
		idf := math.Log(1 + (float64(ix.n)-float64(len(ps))+0.5)/(float64(len(ps))+0.5))
		for _, p := range ps {
			tf := float64(p.tf)
			scores[p.doc] += idf * tf * (k1 + 1) / (tf + ix.norm[p.doc])
		}
	}
	hits := make([]Hit, 0, len(scores))
	for d, s := range scores {
		hits = append(hits, Hit{Doc: int(d), Score: s})
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

// Terms are the search terms of text (see the package comment).
func Terms(text string) []string {
	var out []string
	for _, w := range words(text) {
		w = strings.ToLower(w)
		if stopWords[w] {
			continue
		}
		out = append(out, stem(w))
	}
	return out
}

// words splits text at every rune that is not a letter or digit, and
// within a word where a lower-case letter or digit meets an upper-case one.
func words(text string) []string {
	var out []string
	start := -1
	var prev rune
	for i, r := range text {
		alnum := unicode.IsLetter(r) || unicode.IsDigit(r)
		switch {
		case !alnum:
			if start >= 0 {
				out = append(out, text[start:i])
				start = -1
			}
		case start < 0:
			start = i
		case unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)):
			out = append(out, text[start:i])
			start = i
		}
		prev = r
	}
	if start >= 0 {
		out = append(out, text[start:])
	}
	return out
}

// stem strips a few English suffixes so a word's common forms meet:
// files/file, listing/list, created/create, repositories/repository. It
// is deliberately small: a wrong merge costs more than a missed one.
func stem(w string) string {
	if len(w) <= 3 {
		return w
	}
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		return w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "sses"):
		return w[:len(w)-2]
	case strings.HasSuffix(w, "ss"), strings.HasSuffix(w, "us"), strings.HasSuffix(w, "is"):
		return w
	case strings.HasSuffix(w, "ing") && len(w) > 5:
		w = undouble(w[:len(w)-3])
	case strings.HasSuffix(w, "ed") && len(w) > 4:
		w = undouble(w[:len(w)-2])
	case strings.HasSuffix(w, "es") && len(w) > 4 && strings.ContainsAny(w[len(w)-3:len(w)-2], "sxz"):
		return w[:len(w)-2]
	case strings.HasSuffix(w, "s"):
		w = w[:len(w)-1]
	}
	// A final e goes too, so create, created and creating all meet at creat.
	if len(w) > 4 && strings.HasSuffix(w, "e") {
		w = w[:len(w)-1]
	}
	return w
}

// undouble drops a doubled final consonant left by a suffix (running → run).
func undouble(w string) string {
	n := len(w)
	if n >= 3 && w[n-1] == w[n-2] && !strings.ContainsRune("aeiouldfsz", rune(w[n-1])) {
		return w[:n-1]
	}
	return w
}

// stopWords carry no meaning for choosing a tool.
var stopWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an and are as at be by for from has have i in into is it its
		me my of on or our please so that the their them then there these this to us using via
		was we what when where which who will with would you your should can could want need`) {
		stopWords[w] = true
	}
}
