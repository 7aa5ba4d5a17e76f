// Package injection scans untrusted text from MCP servers (tool
// descriptions, schemas, tool output) for attempts to instruct the model
// that reads it. It flags; it never rewrites. The pattern set is small and
// each pattern has a stable id that goes into findings, so a flag can be
// explained and tested.
//
// Tool output can be megabytes, so a pattern's regular expressions run only
// on windows around literal words every match must contain (a match of
// "ignore previous instructions" holds "ignore"); text without those words
// costs a case-folded substring search, not a regexp run. The windows give
// the same verdicts as running each expression over the whole text (a test
// and a fuzz target check it), because every repetition in the expressions
// is bounded, so no match is longer than maxSpan bytes.
package injection

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/mcp-operator/mcp-operator/internal/mcp/invisible"
	"github.com/mcp-operator/mcp-operator/internal/textcut"
)

// Pattern is one kind of injection attempt.
type Pattern struct {
	ID          string
	Description string
	clauses     []clause
	runes       func(rune) bool
}

// clause is one regular expression of a pattern with the literal words its
// matches contain: every match holds, ASCII case-insensitively, at least one
// word of each group. The first group leads: windows are opened around its
// words, so it should be the rarest in ordinary text.
type clause struct {
	re    *regexp.Regexp
	words [][]string
}

// maxSpan bounds the length in bytes of any match of any clause (the longest,
// override-instructions, is about 350: two .{0,40} of up to 4-byte runes and
// three words). Keep every repetition in the expressions bounded.
const maxSpan = 512

// Finding is one match: which pattern and where.
type Finding struct {
	Pattern string `json:"pattern"`
	// Where names the text scanned, such as "description" or
	// "inputSchema.properties.path.description".
	Where string `json:"where"`
	// Excerpt is the matched text, quoted and cut to 80 bytes.
	Excerpt string `json:"excerpt"`
}

func (f Finding) String() string { return fmt.Sprintf("%s in %s: %s", f.Pattern, f.Where, f.Excerpt) }

// Patterns is the whole set, in the order they are checked.
var Patterns = []Pattern{
	{
		ID:          "override-instructions",
		Description: `tells the model to ignore, disregard, forget or override earlier instructions ("ignore previous instructions")`,
		clauses: []clause{{
			re: regexp.MustCompile(`(?is)\b(ignore|disregard|forget|override|bypass)\b.{0,40}?\b(previous|prior|above|earlier|preceding|all|any|other|your|system)\b.{0,40}?\b(instructions?|prompts?|rules|directions|guidelines|directives|polic(y|ies))\b`),
			words: [][]string{
				{"ignore", "disregard", "forget", "override", "bypass"},
				{"instruction", "prompt", "rules", "direction", "guideline", "directive", "polic"},
				{"previous", "prior", "above", "earlier", "preceding", "all", "any", "other", "your", "system"},
			},
		}},
	},
	{
		ID:          "instruction-tag",
		Description: `markup that poses as privileged instructions: <IMPORTANT>, <system>, <instructions>, <hidden>, [INST], <|im_start|>`,
		clauses: []clause{
			{
				re:    regexp.MustCompile(`(?i)<\s{0,16}/?\s{0,16}(important|system|instructions?|hidden|secret|admin)\s{0,16}>`),
				words: [][]string{{"important", "system", "instruction", "hidden", "secret", "admin"}, {"<"}, {">"}},
			},
			{re: regexp.MustCompile(`(?i)\[/?INST\]`), words: [][]string{{"inst]"}}},
			{re: regexp.MustCompile(`(?i)<\|im_(start|end)\|>|<\|system\|>`), words: [][]string{{"<|im_", "<|sys"}}},
		},
	},
	{
		ID:          "conceal-from-user",
		Description: `asks the model to hide something from the user ("do not tell the user", "without mentioning")`,
		clauses: []clause{
			{
				re:    regexp.MustCompile(`(?is)\b(do\s{1,16}not|don'?t|never|must\s{1,16}not)\s{1,16}(tell|inform|mention|reveal|show|notify|alert)\b.{0,30}?\b(user|human|operator)\b`),
				words: [][]string{{"tell", "inform", "mention", "reveal", "show", "notify", "alert"}, {"user", "human", "operator"}, {"do", "never", "must"}},
			},
			{
				re:    regexp.MustCompile(`(?is)\bwithout\s{1,16}(telling|informing|mentioning|notifying)\b.{0,20}?\b(user|human)\b`),
				words: [][]string{{"without"}, {"user", "human"}},
			},
			{
				re:    regexp.MustCompile(`(?is)\b(user|human)\s{1,16}(must|should)\s{1,16}not\s{1,16}(know|see|be\s{1,16}told)\b`),
				words: [][]string{{"must", "should"}, {"user", "human"}, {"not"}},
			},
		},
	},
	{
		ID:          "model-directive",
		Description: `addresses the model as its controller: "you are now", "new instructions", "system prompt", "before using this tool you must"`,
		clauses: []clause{
			{re: regexp.MustCompile(`(?is)\byou\s{1,16}are\s{1,16}now\b`), words: [][]string{{"now"}, {"you"}, {"are"}}},
			{re: regexp.MustCompile(`(?is)\bnew\s{1,16}instructions\b`), words: [][]string{{"instructions"}, {"new"}}},
			{re: regexp.MustCompile(`(?is)\bsystem\s{1,16}prompt\b`), words: [][]string{{"prompt"}, {"system"}}},
			{
				re:    regexp.MustCompile(`(?is)\bbefore\s{1,16}(using|calling|invoking)\s{1,16}(this|any)\s{1,16}tool\b.{0,60}?\b(must|always|first)\b`),
				words: [][]string{{"before"}, {"tool"}, {"must", "always", "first"}},
			},
		},
	},
	{
		ID:          "secret-access",
		Description: `asks to read, send or include secrets: ~/.ssh, id_rsa, .aws/credentials, .env, /etc/shadow, kubeconfig, private keys, API keys, tokens, passwords`,
		clauses: []clause{{
			re: regexp.MustCompile(`(?is)\b(read|cat|open|send|include|pass|provide|upload|post|exfiltrate|leak|copy|attach|paste)\b.{0,60}?(~/\.ssh|\.ssh/|\bid_(rsa|ed25519|ecdsa|dsa)\b|\.aws/credentials|\.env\b|/etc/(passwd|shadow)|\.kube/config|kubeconfig|\.netrc|\.npmrc|\.git-credentials|private\s{1,16}keys?|\bapi[_ -]?keys?\b|\b(access|secret|bearer|auth)[_ -]?tokens?\b|\bpasswords?\b|\bcredentials\b)`),
			words: [][]string{
				{"ssh", "id_", "credentials", ".env", "/etc/", ".kube", "kubeconfig", ".netrc", ".npmrc", "private", "api", "token", "password"},
				{"read", "cat", "open", "send", "include", "pass", "provide", "upload", "post", "exfiltrate", "leak", "copy", "attach", "paste"},
			},
		}},
	},
	{
		ID:          "invisible-characters",
		Description: "zero-width, bidirectional-control or Unicode tag characters, which hide text from a human reviewer",
		runes:       isInvisible,
	},
}

// isInvisible is invisible.Is: one list of what hides text.
func isInvisible(r rune) bool { return invisible.Is(r) }

// leadWords indexes the leading words of every clause by their first byte,
// so that one pass over a text finds where each clause may match.
var leadWords = func() (t [256][]leadWord) {
	n := 0
	for pi := range Patterns {
		for ci := range Patterns[pi].clauses {
			for _, w := range Patterns[pi].clauses[ci].words[0] {
				t[w[0]] = append(t[w[0]], leadWord{w, n})
			}
			n++
		}
	}
	return t
}()

// leadTrigrams has a bit set for a hash of the first three bytes of every
// leading word (all have three or more): most text positions are passed
// over after testing one bit.
var leadTrigrams = func() (set [1 << 16 / 64]uint64) {
	for _, ws := range leadWords {
		for _, lw := range ws {
			h := trigram(lw.word[0], lw.word[1], lw.word[2])
			set[h/64] |= 1 << (h % 64)
		}
	}
	return set
}()

func trigram(a, b, c byte) uint16 { return uint16(a)<<10 ^ uint16(b)<<5 ^ uint16(c) }

type leadWord struct {
	word   string
	clause int // clauses numbered in order across Patterns
}

// hit is one occurrence of a leading word.
type hit struct{ at, n, clause int }

// Scan checks one text; where names it in findings. At most one finding per
// pattern is reported.
func Scan(where, text string) []Finding {
	var out []Finding
	// (?i) also matches the Kelvin sign for k and the long s for s, which an
	// ASCII case-folded word search would miss: such text gets whole-text
	// regexp runs instead of windows.
	windowed := !strings.Contains(text, "\u212A") && !strings.Contains(text, "\u017F")
	var lower string
	var hits []hit
	if windowed {
		lower = lowerASCII(text)
		hits = findLeads(lower)
	}
	clauseNo := 0
	for _, p := range Patterns {
		if p.runes != nil {
			for i, r := range text {
				if p.runes(r) {
					out = append(out, Finding{Pattern: p.ID, Where: where, Excerpt: fmt.Sprintf("U+%04X at byte %d", r, i)})
					break
				}
			}
			continue
		}
		found := false
		for _, c := range p.clauses {
			var loc []int
			switch {
			case found:
			case windowed:
				loc = c.find(text, lower, hits, clauseNo)
			default:
				loc = c.re.FindStringIndex(text)
			}
			if loc != nil {
				out = append(out, Finding{Pattern: p.ID, Where: where, Excerpt: excerpt(text[loc[0]:loc[1]])})
				found = true
			}
			clauseNo++
		}
	}
	return out
}

// findLeads lists, in text order, where the leading words of all clauses
// occur in lower.
func findLeads(lower string) []hit {
	var hits []hit
	for i := 0; i+2 < len(lower); i++ {
		if h := trigram(lower[i], lower[i+1], lower[i+2]); leadTrigrams[h/64]&(1<<(h%64)) == 0 {
			continue
		}
		for _, lw := range leadWords[lower[i]] {
			if strings.HasPrefix(lower[i:], lw.word) {
				hits = append(hits, hit{i, len(lw.word), lw.clause})
			}
		}
	}
	return hits
}

// find runs the clause's expression on windows of text around the hits of
// its leading words, when a window also holds a word of every other group.
// lower is text with ASCII letters lowered (same length and offsets). It
// returns the first match found, as FindStringIndex does, or nil.
func (c clause) find(text, lower string, hits []hit, clauseNo int) []int {
	start, end := -1, -1 // the window being merged
	try := func() []int {
		if start < 0 {
			return nil
		}
		s, e := widen(text, start, end)
		if !c.holdsAll(lower[s:e]) {
			return nil
		}
		if loc := c.re.FindStringIndex(text[s:e]); loc != nil {
			return []int{s + loc[0], s + loc[1]}
		}
		return nil
	}
	for _, h := range hits {
		if h.clause != clauseNo {
			continue
		}
		s, e := max(h.at-maxSpan, 0), min(h.at+h.n+maxSpan, len(lower))
		if start >= 0 && s <= end {
			end = e // overlaps the window: merge
			continue
		}
		if loc := try(); loc != nil {
			return loc
		}
		start, end = s, e
	}
	return try()
}

// holdsAll says whether the window holds a word of every group but the
// leading one (which opened it).
func (c clause) holdsAll(window string) bool {
	for _, group := range c.words[1:] {
		found := false
		for _, w := range group {
			if strings.Contains(window, w) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// widen moves the window's edges outward until neither cuts a word or a
// UTF-8 sequence, so that \b and runes at the edges read as in the whole text.
func widen(text string, start, end int) (int, int) {
	for start > 0 && (isWordByte(text[start-1]) || !utf8.RuneStart(text[start])) {
		start--
	}
	for end < len(text) && (isWordByte(text[end]) || !utf8.RuneStart(text[end])) {
		end++
	}
	return start, end
}

func isWordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_'
}

// lowerASCII lowers ASCII letters only, keeping every offset.
func lowerASCII(s string) string {
	i := 0
	for i < len(s) && !(s[i] >= 'A' && s[i] <= 'Z') {
		i++
	}
	if i == len(s) {
		return s
	}
	b := []byte(s)
	for ; i < len(b); i++ {
		if c := b[i]; c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func excerpt(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return fmt.Sprintf("%q", textcut.Cut(s, 80))
}
