// Package injection scans untrusted text from MCP servers (tool
// descriptions, schemas, later tool output) for attempts to instruct the
// model that reads it. It flags; it never rewrites. The pattern set is small
// and documented in docs/probe.md: each pattern has a stable id that goes
// into findings, so a flag can be explained and tested.
package injection

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Pattern is one kind of injection attempt.
type Pattern struct {
	ID          string
	Description string
	re          *regexp.Regexp
	runes       func(rune) bool
}

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
		re:          regexp.MustCompile(`(?is)\b(ignore|disregard|forget|override|bypass)\b.{0,40}?\b(previous|prior|above|earlier|preceding|all|any|other|your|system)\b.{0,40}?\b(instructions?|prompts?|rules|directions|guidelines|directives|polic(y|ies))\b`),
	},
	{
		ID:          "instruction-tag",
		Description: `markup that poses as privileged instructions: <IMPORTANT>, <system>, <instructions>, <hidden>, [INST], <|im_start|>`,
		re:          regexp.MustCompile(`(?i)<\s*/?\s*(important|system|instructions?|hidden|secret|admin)\s*>|\[/?INST\]|<\|im_(start|end)\|>|<\|system\|>`),
	},
	{
		ID:          "conceal-from-user",
		Description: `asks the model to hide something from the user ("do not tell the user", "without mentioning")`,
		re:          regexp.MustCompile(`(?is)\b(do\s+not|don'?t|never|must\s+not)\s+(tell|inform|mention|reveal|show|notify|alert)\b.{0,30}?\b(user|human|operator)\b|\bwithout\s+(telling|informing|mentioning|notifying)\b.{0,20}?\b(user|human)\b|\b(user|human)\s+(must|should)\s+not\s+(know|see|be\s+told)\b`),
	},
	{
		ID:          "model-directive",
		Description: `addresses the model as its controller: "you are now", "new instructions", "system prompt", "before using this tool you must"`,
		re:          regexp.MustCompile(`(?is)\byou\s+are\s+now\b|\bnew\s+instructions\b|\bsystem\s+prompt\b|\bbefore\s+(using|calling|invoking)\s+(this|any)\s+tool\b.{0,60}?\b(must|always|first)\b`),
	},
	{
		ID:          "secret-access",
		Description: `asks to read, send or include secrets: ~/.ssh, id_rsa, .aws/credentials, .env, /etc/shadow, kubeconfig, private keys, API keys, tokens, passwords`,
		re:          regexp.MustCompile(`(?is)\b(read|cat|open|send|include|pass|provide|upload|post|exfiltrate|leak|copy|attach|paste)\b.{0,60}?(~/\.ssh|\.ssh/|\bid_(rsa|ed25519|ecdsa|dsa)\b|\.aws/credentials|\.env\b|/etc/(passwd|shadow)|\.kube/config|kubeconfig|\.netrc|\.npmrc|\.git-credentials|private\s+keys?|\bapi[_ -]?keys?\b|\b(access|secret|bearer|auth)[_ -]?tokens?\b|\bpasswords?\b|\bcredentials\b)`),
	},
	{
		ID:          "invisible-characters",
		Description: "zero-width, bidirectional-control or Unicode tag characters, which hide text from a human reviewer",
		runes:       isInvisible,
	},
}

func isInvisible(r rune) bool {
	switch {
	case r >= 0x200B && r <= 0x200F, // zero-width space/joiners, LRM, RLM
		r >= 0x202A && r <= 0x202E,   // bidi embeddings and overrides
		r >= 0x2060 && r <= 0x2064,   // word joiner, invisible operators
		r >= 0x2066 && r <= 0x2069,   // bidi isolates
		r == 0xFEFF,                  // zero-width no-break space
		r == 0x00AD,                  // soft hyphen
		r >= 0xE0000 && r <= 0xE007F: // tag characters (ASCII smuggling)
		return true
	}
	return false
}

// Scan checks one text; where names it in findings. At most one finding per
// pattern is reported.
func Scan(where, text string) []Finding {
	var out []Finding
	for _, p := range Patterns {
		if p.re != nil {
			if loc := p.re.FindStringIndex(text); loc != nil {
				out = append(out, Finding{Pattern: p.ID, Where: where, Excerpt: excerpt(text[loc[0]:loc[1]])})
			}
			continue
		}
		for i, r := range text {
			if p.runes(r) {
				out = append(out, Finding{Pattern: p.ID, Where: where, Excerpt: fmt.Sprintf("U+%04X at byte %d", r, i)})
				break
			}
		}
	}
	return out
}

func excerpt(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 80 {
		cut := 80
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return fmt.Sprintf("%q", s)
}
