package toolsearch

import (
	"slices"
	"strings"
	"unicode"
)

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
	if len(w) <= 3 || unstemmed[w] {
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

// unstemmed are words a suffix rule would merge with another word (news is
// not new, alias not alia).
var unstemmed = map[string]bool{"news": true, "always": true, "alias": true, "canvas": true,
	"atlas": true, "series": true, "species": true, "bias": true, "plus": true, "chaos": true}

// undouble drops a doubled final consonant left by a suffix (running → run).
func undouble(w string) string {
	n := len(w)
	if n >= 3 && w[n-1] == w[n-2] && !strings.ContainsRune("aeiouldfsz", rune(w[n-1])) {
		return w[:n-1]
	}
	return w
}

// stopWords carry no meaning for choosing a tool. Like every table here it
// is initialised by expression, not in an init function: package-level
// variables are all set before any init runs, whatever file they are in,
// so the related words (related.go) are read with it filled.
var stopWords = wordSet(`a an and are as at be by for from has have i in into is it its
	me my of on or our please so that the their them then there these this to us using via
	was we what when where which who will with would you your should can could want need`, nil)

// queryOnlyStopWords are words of how agents phrase a request ("I need to
// …", "can you please …", "help me …") that say nothing of which tool: left
// out of queries only, since in a tool's text they are rare enough that
// BM25 already gives them little weight.
var queryOnlyStopWords = wordSet(`please help let lets like just know try trying wanted
	needs needed able kindly hey ok okay now currently actually also some any somehow maybe
	gimme tool tools do does did`, stem)

// wordSet is the set of the words of list, each normalised by norm (when
// not nil).
func wordSet(list string, norm func(string) string) map[string]bool {
	set := map[string]bool{}
	for _, w := range strings.Fields(list) {
		if norm != nil {
			w = norm(w)
		}
		set[w] = true
	}
	return set
}

// named reads a word of a query that is a web address (https://a.b/c,
// www.a.b, example.com) as "url", and one that is a file name (main.go,
// notes.md) as its stem and "file": their pieces (go, md, com) would
// otherwise be taken for words. A file name is told by its extension, one
// of fileExtensions: other dotted words (deployment.apps, spec.replicas,
// node.js) are names of other things, read as their words.
func named(word string) string {
	w := strings.ToLower(strings.Trim(word, `"'()[]<>,;:!?`))
	w = strings.TrimSuffix(w, ".")
	if strings.Contains(w, "://") || strings.HasPrefix(w, "www.") {
		return "url"
	}
	dot := strings.LastIndexByte(w, '.')
	if dot < 2 { // no dot, or too short a name before it (e.g, i.e)
		return word
	}
	base, ext := w[:dot], w[dot+1:]
	switch {
	case topLevelDomains[ext]:
		return "url"
	case fileExtensions[ext] && !dottedNames[w]:
		return base + " file"
	}
	return word
}

// topLevelDomains end a word that is a site's address, not a file's name.
var topLevelDomains = wordSet("com org net io dev app co edu gov ai uk de fr", nil)

// fileExtensions end a word that is a file's name: those of source code,
// text, data, configuration, documents, images, archives and logs.
var fileExtensions = wordSet(`go py js ts jsx tsx mjs cjs java kt rb rs c h cc cpp hpp cs swift php
	sh bash ps1 sql proto md txt rst adoc csv tsv json jsonl yaml yml toml ini cfg conf env xml
	html htm css scss lock mod sum pdf doc docx xls xlsx ppt pptx odt png jpg jpeg gif svg webp
	ico mp3 mp4 wav zip tar gz tgz log ipynb tf`, nil)

// dottedNames are names of projects that end like a file name but are not
// one (the library node.js, not a file named node).
var dottedNames = wordSet("node.js next.js vue.js nuxt.js react.js express.js d3.js three.js chart.js", nil)

// bigram is the term two neighbouring terms make together.
func bigram(a, b string) string { return a + " " + b }

// queryTerms are a query's terms, without the words of agent phrasing,
// and with a file name or an address read as what it names (see named).
func queryTerms(query string) []string {
	fields := strings.Fields(query)
	for i, f := range fields {
		fields[i] = named(f)
	}
	var out []string
	for _, t := range Terms(strings.Join(fields, " ")) {
		// A letter alone (the s of what's, the x of project x) says
		// nothing of which tool.
		if !queryOnlyStopWords[t] && (len(t) > 1 || unicode.IsDigit(rune(t[0]))) {
			out = append(out, t)
		}
	}
	return out
}

// alternative is one way a unit of a query may appear in a tool's text:
// its terms (scored together) and its weight.
type alternative struct {
	terms  []string
	weight float64
}

// expand turns a query's terms into groups of alternatives, each group
// scored by its best alternative: each word or known phrase with its
// related words, then each pair of neighbouring words as a bigram.
func expand(terms []string, longer func(string) []string) [][]alternative {
	var groups [][]alternative
	seen := map[string]bool{}
	for i := 0; i < len(terms); {
		// The longest known phrase starting here, else the word.
		n := 1
		for l := min(3, len(terms)-i); l > 1; l-- {
			if relatedTerms.phrases[strings.Join(terms[i:i+l], " ")] {
				n = l
				break
			}
		}
		unit := terms[i : i+n]
		key := strings.Join(unit, " ")
		i += n
		if seen[key] {
			continue
		}
		seen[key] = true
		group := []alternative{{terms: withBigrams(unit), weight: 1}}
		for _, r := range relatedTerms.related[key] {
			group = append(group, alternative{terms: withBigrams(r), weight: relatedWeightOf(key)})
		}
		if n == 1 {
			for _, l := range longer(key) {
				group = append(group, alternative{terms: []string{l}, weight: relatedWeight})
			}
		}
		groups = append(groups, group)
	}
	for i := 1; i < len(terms); i++ {
		if b := bigram(terms[i-1], terms[i]); !seen[b] {
			seen[b] = true
			groups = append(groups, []alternative{{terms: []string{b}, weight: bigramWeight}})
		}
	}
	return groups
}

// isQuestion tells a query that asks to be told something ("what pods are
// running", "is CI green"): its question word is a stop word, but it says
// the task is to read, not to change. Only the first word counts, and
// only a word that opens a question and nothing else: do and have also
// open orders ("do a backup", "have the bot post it"), and "how do I …",
// "how to …" ask how to get something done, so how counts only before
// a word of measure (how many, how big).
func isQuestion(query string) bool {
	fields := strings.Fields(strings.ToLower(query))
	if len(fields) == 0 {
		return false
	}
	first, _, _ := strings.Cut(strings.Trim(fields[0], "?,.!"), "'")
	if first == "how" {
		return len(fields) > 1 && howMuch[strings.Trim(fields[1], "?,.!")]
	}
	return questionWords[first]
}

var questionWords = wordSet("what whats which who whom whose where when is are was were does did has", nil)

// howMuch are the words after how that ask for a measure, not a method.
var howMuch = wordSet("many much big large long far old often", nil)

// readingVerbs are the verbs of tools that tell, the group a question
// adds at half a related word's weight.
var readingVerbs = []alternative{
	{terms: []string{"get"}, weight: relatedWeight / 2},
	{terms: []string{"list"}, weight: relatedWeight / 2},
	{terms: []string{"search"}, weight: relatedWeight / 2},
}

// bigramWeight is the weight of two neighbouring query words found side by
// side in a tool's text, on top of what each scores alone.
const bigramWeight = 0.5

// withBigrams is a phrase's terms and the bigrams of its neighbouring
// terms.
func withBigrams(terms []string) []string {
	out := slices.Clone(terms)
	for i := 1; i < len(terms); i++ {
		out = append(out, bigram(terms[i-1], terms[i]))
	}
	return out
}
