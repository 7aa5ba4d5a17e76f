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

// stopWords carry no meaning for choosing a tool.
var stopWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an and are as at be by for from has have i in into is it its
		me my of on or our please so that the their them then there these this to us using via
		was we what when where which who will with would you your should can could want need`) {
		stopWords[w] = true
	}
}

// queryOnlyStopWords are words of how agents phrase a request ("I need to
// …", "can you please …", "help me …") that say nothing of which tool: left
// out of queries only, since in a tool's text they are rare enough that
// BM25 already gives them little weight.
var queryOnlyStopWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`please help let lets like just know try trying wanted
		needs needed able kindly hey ok okay now currently actually also some any somehow maybe
		gimme tool tools do does did`) {
		queryOnlyStopWords[stem(w)] = true
	}
}

// named reads a word of a query that is a web address (https://a.b/c,
// www.a.b, example.com) as "url", and one that is a file name (main.go,
// notes.md) as its stem and "file": their pieces (go, md, com) would
// otherwise be taken for words.
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
	if ext == "" || len(ext) > 5 || strings.IndexFunc(ext, func(r rune) bool { return r < 'a' || r > 'z' }) >= 0 {
		return word
	}
	if topLevelDomains[ext] {
		return "url"
	}
	return base + " file"
}

// topLevelDomains end a word that is a site's address, not a file's name.
var topLevelDomains = map[string]bool{"com": true, "org": true, "net": true, "io": true, "dev": true,
	"app": true, "co": true, "edu": true, "gov": true, "ai": true, "uk": true, "de": true, "fr": true}

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
			if phrases[strings.Join(terms[i:i+l], " ")] {
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
		for _, r := range related[key] {
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
// the task is to read, not to change.
func isQuestion(query string) bool {
	first, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(query)), " ")
	first, _, _ = strings.Cut(strings.Trim(first, "?,.!"), "'")
	return questionWords[first]
}

var questionWords = map[string]bool{"what": true, "whats": true, "which": true, "who": true,
	"whom": true, "whose": true, "where": true, "when": true, "how": true, "is": true, "are": true,
	"was": true, "were": true, "does": true, "do": true, "did": true, "has": true, "have": true}

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
