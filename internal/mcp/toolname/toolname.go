// Package toolname holds the naming rules of tools: which upstream names are
// valid, the namespaced name mcp.<server>.<tool> that agents and policies
// use, and its underscore rendering mcp__<server>__<tool> for clients that
// reject dots, with the lookup table that reverses it.
package toolname

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// MaxUpstreamLen is the longest valid tool name (the MCP spec's SHOULD).
const MaxUpstreamLen = 128

// MaxUnderscoreLen is the longest underscore rendering: some clients accept
// only ^[a-zA-Z0-9_-]{1,64}$.
const MaxUnderscoreLen = 64

// hashLen is how many hex digits of sha256 a cut rendering ends with.
const hashLen = 8

// ValidateUpstream checks a server's tool name: 1–128 characters of
// [A-Za-z0-9_.-]. The error says what is wrong.
func ValidateUpstream(name string) error {
	if name == "" {
		return fmt.Errorf("the name is empty")
	}
	if len(name) > MaxUpstreamLen {
		return fmt.Errorf("the name is %d bytes long, more than %d", len(name), MaxUpstreamLen)
	}
	for i := 0; i < len(name); i++ {
		if !validByte(name[i]) {
			return fmt.Errorf("the name has %q at byte %d; only A-Z a-z 0-9 _ . - are allowed", name[i], i)
		}
	}
	return nil
}

func validByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '.' || b == '-'
}

// ValidateServer checks a server name: a DNS label (what MCPServer names are),
// so that it holds no dot and mcp.<server>.<tool> splits unambiguously.
func ValidateServer(server string) error {
	if server == "" || len(server) > 63 {
		return fmt.Errorf("server name %q must be 1 to 63 characters", server)
	}
	for i := 0; i < len(server); i++ {
		b := server[i]
		if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-') {
			return fmt.Errorf("server name %q must be a DNS label (lowercase letters, digits and '-')", server)
		}
	}
	if server[0] == '-' || server[len(server)-1] == '-' {
		return fmt.Errorf("server name %q must start and end with a letter or digit", server)
	}
	return nil
}

// Namespaced is mcp.<server>.<tool>.
func Namespaced(server, tool string) string { return "mcp." + server + "." + tool }

// SplitNamespaced reverses Namespaced; server names hold no dot, so the
// first two dots separate the parts.
func SplitNamespaced(name string) (server, tool string, ok bool) {
	rest, found := strings.CutPrefix(name, "mcp.")
	if !found {
		return "", "", false
	}
	server, tool, found = strings.Cut(rest, ".")
	if !found || server == "" || tool == "" {
		return "", "", false
	}
	return server, tool, true
}

// Underscore renders a namespaced name for clients that reject dots:
// mcp__<server>__<tool>. When the tool name holds a dot (turned into '_',
// which alone could make two names meet) or the result is longer than 64
// characters, it is cut to fit and ends with '_' and 8 hex digits of the
// sha256 of the namespaced name: stable across runs and replicas.
// The rendering cannot be parsed back; use a Table.
func Underscore(namespaced string) string {
	server, tool, ok := SplitNamespaced(namespaced)
	if !ok {
		server, tool = "", namespaced
	}
	plain := "mcp__" + server + "__" + strings.ReplaceAll(tool, ".", "_")
	if len(plain) <= MaxUnderscoreLen && !strings.Contains(tool, ".") && isUnderscoreSafe(plain) {
		return plain
	}
	sum := sha256.Sum256([]byte(namespaced))
	suffix := "_" + hex.EncodeToString(sum[:])[:hashLen]
	keep := sanitize(plain)
	if len(keep) > MaxUnderscoreLen-len(suffix) {
		keep = keep[:MaxUnderscoreLen-len(suffix)]
	}
	return keep + suffix
}

func isUnderscoreSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if !validByte(s[i]) || s[i] == '.' {
			return false
		}
	}
	return true
}

// sanitize keeps only [A-Za-z0-9_-], for names that did not pass validation.
func sanitize(s string) string {
	b := []byte(s)
	for i := range b {
		if !validByte(b[i]) || b[i] == '.' {
			b[i] = '_'
		}
	}
	return string(b)
}

// Table maps underscore renderings back to namespaced names. Two names
// whose renderings meet (possible only through a literal name that equals
// another's cut-and-hashed form, or a hash collision) are both left out of
// the table and listed in Collisions: a caller must not guess between them.
type Table struct {
	byUnderscore map[string]string
	collisions   map[string][]string
}

// NewTable builds the table for a set of namespaced names.
func NewTable(namespaced []string) *Table {
	t := &Table{byUnderscore: map[string]string{}, collisions: map[string][]string{}}
	groups := map[string][]string{}
	for _, n := range namespaced {
		u := Underscore(n)
		if !slices.Contains(groups[u], n) {
			groups[u] = append(groups[u], n)
		}
	}
	for u, names := range groups {
		if len(names) == 1 {
			t.byUnderscore[u] = names[0]
			continue
		}
		slices.Sort(names)
		t.collisions[u] = names
	}
	return t
}

// Lookup returns the namespaced name an underscore rendering stands for.
func (t *Table) Lookup(underscore string) (string, bool) {
	n, ok := t.byUnderscore[underscore]
	return n, ok
}

// Collisions lists renderings shared by more than one name, with the names.
func (t *Table) Collisions() map[string][]string { return t.collisions }

// MatchGlob matches name against a glob where '*' matches any run of
// characters (also none) and '?' exactly one; every other character matches
// itself. Unlike path.Match, '/' and '[' are not special.
func MatchGlob(pattern, name string) bool {
	// Iterative matching with backtracking to the last '*': linear in
	// practice, never exponential.
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == name[n]) && pattern[p] != '*':
			p++
			n++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case star >= 0:
			p = star + 1
			mark++
			n = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
