// Package redact replaces secrets in text that MCP servers return, before
// anyone else sees it, with "[REDACTED:<kind>]". Three detectors share one
// pass over the text:
//
//   - bare tokens, found by what they are made of with no name beside them:
//     a table of vendors' token formats (bare.go: a prefix such as "glpat-"
//     or "hf_", the body's alphabet and length, enough entropy), and
//     structures specific enough alone (a Telegram bot token, JWTs, PEM
//     private keys);
//   - credentials found by a name or a structure around them (shapes.go: an
//     AWS secret key after its name, bearer and Authorization credentials,
//     a URL's password, connection strings, a random value after
//     "password=") and gitleaks' default rules (gitleaks.go);
//   - the exact values of the Secrets a server was given, in the forms a
//     server may print them: as they are, in upper or lower case, in hex,
//     base64, URL and JSON escapes (secretNeedles).
//
// Each of them starts with a literal ("ghp_", "AKIA", "-----BEGIN", a
// secret value's first bytes, a gitleaks keyword), so the pass tests three
// bytes per position against one hashed bitset (gramSet) and looks closer
// only where a literal may start. Text without any costs about a nanosecond
// a byte and allocates nothing.
package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// Kind names what was redacted; it appears in the replacement text and in
// audit counts.
type Kind uint16

// The kinds, in the order Counts reports them.
const (
	AWSSecretAccessKey Kind = iota
	JWT
	PrivateKey
	Bearer
	AuthorizationHeader
	URLPassword
	ConnectionStringKey
	AssignedSecret
	Secret
	SecretBase64
	SecretURLEncoded
	SecretHex
	SecretCase
	SecretJSONEscaped
	numOwnKinds
	// The kinds from numOwnKinds on are the bare token formats
	// (bareFormats), then from firstGitleaksKind on gitleaks' rules, named
	// by their ids.
	firstGitleaksKind = numOwnKinds + numBareKinds
	numKinds          = firstGitleaksKind + numGitleaksRules
)

var kindNames = [numOwnKinds]string{
	AWSSecretAccessKey:  "aws-secret-access-key",
	JWT:                 "jwt",
	PrivateKey:          "private-key",
	Bearer:              "bearer",
	AuthorizationHeader: "authorization",
	URLPassword:         "url-password",
	ConnectionStringKey: "connection-string-key",
	AssignedSecret:      "assigned-secret",
	Secret:              "secret",
	SecretBase64:        "secret-base64",
	SecretURLEncoded:    "secret-urlencoded",
	SecretHex:           "secret-hex",
	SecretCase:          "secret-case",
	SecretJSONEscaped:   "secret-json-escaped",
}

func (k Kind) String() string {
	switch {
	case k < numOwnKinds:
		return kindNames[k]
	case k < firstGitleaksKind:
		return bareFormats[k-numOwnKinds].name
	}
	return gitleaksRules[k-firstGitleaksKind].ID
}

// generic says whether k is found by a name, not by a shape of its own.
func (k Kind) generic() bool { return k == AssignedSecret || k == gitleaksGeneric }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Replacement is the text that stands for a redacted secret of kind k.
func (k Kind) Replacement() string { return "[REDACTED:" + k.String() + "]" }

// MinSecretLen is the shortest Secret value redacted: shorter values
// ("true", "8080", "admin") would redact ordinary words and numbers.
const MinSecretLen = 8

// Counts is how many secrets of each kind were redacted.
type Counts [numKinds]int

// Total is the number of redactions of all kinds.
func (c *Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// Add adds o's counts to c.
func (c *Counts) Add(o *Counts) {
	for k, v := range o {
		c[k] += v
	}
}

// Map returns the non-zero counts by kind name, or nil when there are none.
func (c *Counts) Map() map[string]int {
	var m map[string]int
	for k, v := range c {
		if v > 0 {
			if m == nil {
				m = make(map[string]int)
			}
			m[Kind(k).String()] += v
		}
	}
	return m
}

// trigger is a literal that may start a secret. match says where the secret
// found at s[at:] (where the literal is) starts and ends, if it is one.
type trigger struct {
	lit   string
	fold  bool   // ASCII case-insensitive literal
	lower string // lit in lower case, for fold
	kind  Kind
	match func(s string, at int) (start, end int, ok bool)
	// third is what may follow a two-byte lit, for the trigram set (nil:
	// any byte).
	third *[256]bool
	// format, when set instead of match, is the bare token format whose
	// prefix lit is: its body is read through the scan's scanMemo.
	format *bareFormat
}

// Redactor redacts the known credential shapes and a fixed set of secret
// values. It is immutable and safe for concurrent use.
type Redactor struct {
	static *pairIndex // the shapes and bare formats, shared by every Redactor
	grams  gramSet    // the first three bytes of every literal and gitleaks keyword
	// secretGrams are the first three bytes of the secret values' forms:
	// a position whose three bytes start none skips their index.
	secretGrams gramSet
	own         pairSet // the first two bytes of every literal
	secrets     secretIndex
	// values are the secret values it was built with (With adds to them).
	values []string
}

// secretIndex holds the forms of the secret values by their first eight
// bytes (every form is at least MinSecretLen long), behind a bit set of
// their hashes with about sixteen bits a form: a bridge's audit writer
// knows every server's values, tens of thousands of forms. A position costs
// one probe of the bit set, and one in sixteen at most (more as forms share
// heads with the text) a look in the map.
type secretIndex struct {
	byHead map[uint64][]trigger
	bits   []uint64
	shift  uint // 64 - log2(len(bits)*64)
}

// headOf is s's first eight bytes as one number.
func headOf(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

const headMul = 0x9e3779b97f4a7c15

func newSecretIndex(ts []trigger) secretIndex {
	if len(ts) == 0 {
		return secretIndex{}
	}
	// About sixteen bits a form: a position that starts none passes one
	// time in sixteen at most.
	logBits := uint(6)
	for 1<<logBits < 16*len(ts) {
		logBits++
	}
	ix := secretIndex{byHead: make(map[uint64][]trigger, len(ts)), bits: make([]uint64, 1<<logBits/64), shift: 64 - logBits}
	for _, t := range ts {
		h := headOf(t.lit)
		ix.byHead[h] = append(ix.byHead[h], t)
		b := h * headMul >> ix.shift
		ix.bits[b/64] |= 1 << (b % 64)
	}
	return ix
}

// at returns the forms that may start at s[i:].
func (ix *secretIndex) at(s string, i int) []trigger {
	if ix.bits == nil || len(s)-i < MinSecretLen {
		return nil
	}
	h := headOf(s[i:])
	if b := h * headMul >> ix.shift; ix.bits[b/64]&(1<<(b%64)) == 0 {
		return nil
	}
	return ix.byHead[h]
}

// pairSet holds pairs of bytes, one bit each.
type pairSet [1 << 16 / 64]uint64

func (p *pairSet) has(a, b byte) bool {
	bg := uint16(a)<<8 | uint16(b)
	return p[bg/64]&(1<<(bg%64)) != 0
}

// pairIndex holds triggers by their first two bytes (in every case for a
// case-insensitive one): a position whose pair starts some literal tries
// only the few that start with it.
type pairIndex struct {
	grams  gramSet
	pairs  pairSet
	byPair [1 << 16]uint16 // index+1 into groups
	groups [][]trigger
}

// staticTriggers indexes the shapes and the bare formats, once for every
// Redactor (about 150 KiB).
var staticTriggers = sync.OnceValue(func() *pairIndex {
	ix := &pairIndex{}
	for _, t := range append(slices.Clone(shapes), bareTriggers()...) {
		t = prepared(t, &ix.grams)
		for _, a := range variants(t, 0) {
			for _, b := range variants(t, 1) {
				bg := uint16(a)<<8 | uint16(b)
				ix.pairs[bg/64] |= 1 << (bg % 64)
				if ix.byPair[bg] == 0 {
					ix.groups = append(ix.groups, nil)
					ix.byPair[bg] = uint16(len(ix.groups))
				}
				g := ix.byPair[bg] - 1
				ix.groups[g] = append(ix.groups[g], t)
			}
		}
	}
	return ix
})

// New builds a Redactor for the credential shapes and the given secret
// values (the data of the Secrets one server was given; values shorter than
// MinSecretLen are ignored). With no values it redacts the shapes only.
func New(secrets ...string) *Redactor {
	static := staticTriggers()
	r := &Redactor{static: static, grams: static.grams, own: static.pairs, values: secrets}
	// The secret values' forms stay out of the trigram set the shapes and
	// rules share: thousands of forms would set most of its bits and send
	// most positions to the slower tests. They have their own index of
	// eight-byte heads, probed once a position.
	var forms []trigger
	for _, n := range secretNeedles(secrets) {
		forms = append(forms, trigger{lit: n.lit, kind: n.kind, match: exact(len(n.lit))})
		r.secretGrams.add(n.lit, false, nil)
	}
	r.secrets = newSecretIndex(forms)
	// One test of a position's three bytes looks for the gitleaks rules'
	// keywords too.
	gl := gitleaksGrams()
	for i := range r.grams {
		r.grams[i] |= gl[i]
	}
	return r
}

// With is a Redactor for r's secret values and extra too: values that
// reach a server apart from its Secrets, such as each caller's own token
// for it. r is unchanged.
func (r *Redactor) With(extra ...string) *Redactor {
	if len(extra) == 0 {
		return r
	}
	return New(append(slices.Clip(r.values), extra...)...)
}

var gitleaksGrams = sync.OnceValue(func() *gramSet { return gitleaks().grams() })

// Shapes is the Redactor for the credential shapes alone. It is built at
// its first use, not at program start: building it costs a few
// milliseconds and about 500 KB of retained heap (the gitleaks rules'
// keywords are indexed, and the few rules of two-byte keywords compiled,
// for the trigrams; the other rules' regexps wait for a text that reaches
// them), which every subcommand of the binary would pay, the ones that
// never redact included. What a process's RSS gains from it is less than
// that heap figure and within the console bench's run-to-run variation.
var Shapes = sync.OnceValue(func() *Redactor { return New() })

// GitleaksOnly returns a Redactor for gitleaks' rules alone: none of this
// package's own shapes, bare token formats or secret values. It finds what
// a scanner with gitleaks' default rules finds, for comparisons (make
// bench-redact).
func GitleaksOnly() *Redactor {
	// No literal of its own: the scan never reaches static.
	return &Redactor{grams: *gitleaksGrams()}
}

// prepared completes t (its lower-case literal) and adds its first three
// bytes to grams.
func prepared(t trigger, grams *gramSet) trigger {
	t.lower = strings.ToLower(t.lit)
	var third *byteClass
	if t.third != nil {
		third = new(byteClass)
		for b, in := range t.third {
			if in {
				third.add(byte(b))
			}
		}
	}
	grams.add(t.lit, t.fold, third)
	return t
}

// variants are the bytes t's literal may have at i: in both cases when it
// is case-insensitive.
func variants(t trigger, i int) []byte {
	if t.fold {
		return caseVariants(t.lit[i])
	}
	return []byte{t.lit[i]}
}

func caseVariants(b byte) []byte {
	switch {
	case b >= 'a' && b <= 'z':
		return []byte{b, b - 'a' + 'A'}
	case b >= 'A' && b <= 'Z':
		return []byte{b, b - 'A' + 'a'}
	}
	return []byte{b}
}

type span struct {
	start, end int
	kind       Kind
}

// String returns s with every secret replaced, adding what it replaced to c
// (which may be nil). It returns s itself when there is nothing to replace.
func (r *Redactor) String(s string, c *Counts) string {
	var spanBuf [8]span
	spans := r.find(s, spanBuf[:0], false)
	if len(spans) == 0 {
		return s
	}
	return replace(s, spans, c)
}

// JSON returns doc with every string redacted, keys included, and the value
// of a field named like an AWS secret key ("aws_secret_access_key",
// "SecretAccessKey") redacted whole when it has that shape. Everything else
// is copied byte for byte; doc itself comes back when nothing was redacted.
// doc must be valid JSON (json.Valid).
func (r *Redactor) JSON(doc []byte, c *Counts) ([]byte, error) {
	if r.clean(doc) {
		return doc, nil
	}
	out, err := rawjson.RewriteStrings(doc, func(s, key string, isKey bool) (string, bool) {
		if !isKey && isAWSSecretField(key) && len(s) >= 16 && run(s, 0, isAWSSecretByte) == len(s) {
			if c != nil {
				c[AWSSecretAccessKey]++
			}
			return AWSSecretAccessKey.Replacement(), true
		}
		red := r.field(key, isKey, s, c)
		return red, len(red) != len(s) || red != s
	})
	if err != nil {
		return nil, fmt.Errorf("while redacting JSON: %w", err)
	}
	return out, nil
}

// field redacts a JSON string. A value is searched as "name: value", as
// the rules for a name and a value (gitleaks' "password", "api_key", a
// service's name) expect, and only what is found in the value is replaced.
func (r *Redactor) field(key string, isKey bool, s string, c *Counts) string {
	if isKey || key == "" {
		return r.String(s, c)
	}
	text := key + ": " + s
	var spanBuf [8]span
	all := r.find(text, spanBuf[:0], false)
	spans := all[:0]
	for _, sp := range all {
		if sp.end > len(key)+2 {
			spans = append(spans, span{max(0, sp.start-len(key)-2), sp.end - len(key) - 2, sp.kind})
		}
	}
	if len(spans) == 0 {
		return s
	}
	return replace(s, spans, c)
}

// clean says, with one pass over the raw text, that no string of doc holds
// anything to redact. Without escapes every decoded string is a substring of
// doc, and the quotes around it read like the start or end of a text to
// every match function, so a search of the whole text finds at least what a
// search of each string would. An AWS secret key's field name is enough to
// look closer: JSON judges its value by the name, wherever the value is.
func (r *Redactor) clean(doc []byte) bool {
	if bytes.IndexByte(doc, '\\') >= 0 {
		return false
	}
	var spanBuf [4]span
	return len(r.find(string(doc), spanBuf[:0], true)) == 0
}

func isAWSSecretField(key string) bool {
	if len(key) < len("secretaccesskey") {
		return false
	}
	k := strings.ToLower(key)
	return strings.HasSuffix(k, "secret_access_key") || strings.HasSuffix(k, "secretaccesskey")
}

// find lists the secrets in s. With names, the mere name of an AWS secret
// key counts too (see clean).
func (r *Redactor) find(s string, spans []span, names bool) []span {
	gl := matcher{ix: gitleaks()}
	var memo scanMemo
	return r.scan(s, spans, names, &gl, &memo)
}

// scan is find with the scan's state: gitleaks' matcher and the body runs
// read so far.
func (r *Redactor) scan(s string, spans []span, names bool, gl *matcher, memo *scanMemo) []span {
	if len(s) < 2 {
		return gl.done(s, spans)
	}
	// x rolls the three bytes at s[i-2:i+1] (gramHash's argument) along, one
	// load a byte.
	x := uint32(s[0])<<8 | uint32(s[1])
	for i := 2; i < len(s); i++ {
		x = (x<<8 | uint32(s[i])) & 0xffffff
		h := x * gramMul >> (32 - gramBits)
		if r.grams[h/64]&(1<<(h%64)) != 0 {
			spans = r.at(s, i-2, gl, memo, spans, names)
		}
		if r.secretGrams[h/64]&(1<<(h%64)) != 0 {
			if ts := r.secrets.at(s, i-2); ts != nil {
				spans = try(s, i-2, ts, memo, spans, names)
			}
		}
	}
	// Only a two-byte literal fits at the end.
	spans = r.at(s, len(s)-2, gl, memo, spans, names)
	return gl.done(s, spans)
}

// at appends the secrets that start with a literal at s[i:].
func (r *Redactor) at(s string, i int, gl *matcher, memo *scanMemo, spans []span, names bool) []span {
	spans = gl.at(s, i, spans)
	if !r.own.has(s[i], s[i+1]) {
		return spans
	}
	if g := r.static.byPair[uint16(s[i])<<8|uint16(s[i+1])]; g != 0 {
		spans = try(s, i, r.static.groups[g-1], memo, spans, names)
	}
	return spans
}

// try appends the secrets that the triggers ts find at s[i:].
func try(s string, i int, ts []trigger, memo *scanMemo, spans []span, names bool) []span {
	for _, t := range ts {
		if len(s)-i < len(t.lit) {
			continue
		}
		if t.fold && !hasPrefixFold(s[i:], t.lower) || !t.fold && s[i:i+len(t.lit)] != t.lit {
			continue
		}
		if t.kind < numOwnKinds && i < memo.reach[t.kind] {
			continue // inside a secret of its kind already found
		}
		if names && t.kind == AWSSecretAccessKey {
			spans = append(spans, span{i, i, t.kind})
			continue
		}
		var start, end int
		var ok bool
		if t.format != nil {
			start, end, ok = t.format.prefixed(s, i, memo)
		} else {
			start, end, ok = t.match(s, i)
		}
		if ok {
			spans = append(spans, span{start, end, t.kind})
			if t.kind < numOwnKinds {
				memo.reach[t.kind] = max(memo.reach[t.kind], end)
			}
		}
	}
	return spans
}

// replace merges overlapping spans (the leftmost's kind names the merged
// one, a specific kind before a generic one and a hand-written shape before
// a gitleaks rule where they start together) and writes the replacements.
func replace(s string, spans []span, c *Counts) string {
	slices.SortFunc(spans, func(a, b span) int {
		if a.start != b.start {
			return a.start - b.start
		}
		if g := b2i(a.kind.generic()) - b2i(b.kind.generic()); g != 0 {
			return g
		}
		return int(a.kind) - int(b.kind) // the hand-written shapes first
	})
	var sb strings.Builder
	sb.Grow(len(s))
	done := 0
	for i := 0; i < len(spans); {
		cur := spans[i]
		for i++; i < len(spans) && spans[i].start < cur.end; i++ {
			cur.end = max(cur.end, spans[i].end)
		}
		sb.WriteString(s[done:cur.start])
		sb.WriteString(cur.kind.Replacement())
		done = cur.end
		if c != nil {
			c[cur.kind]++
		}
	}
	sb.WriteString(s[done:])
	return sb.String()
}

type needle struct {
	lit  string
	kind Kind
}

// secretNeedles lists the forms in which each secret value may appear,
// each computed once here so that a scan looks for all of them in its one
// pass: as is and in upper and lower case; hex-encoded in both cases;
// base64-encoded (standard and URL alphabets, padded or raw; for each of the
// three alignments a value can have inside a longer encoded text, such as a
// Basic credential "user:secret", the part of the encoding that depends on
// the value alone); URL-encoded (query and path escaping, with upper- or
// lower-case hex digits); and JSON-escaped as encoders write a string
// (quotes, backslashes and control characters escaped; "<", ">" and "&" as
// \u escapes or not; every non-ASCII character as a \u escape; "/" as
// "\/").
func secretNeedles(values []string) []needle {
	var out []needle
	seen := map[string]bool{}
	addNeedle := func(lit string, kind Kind) {
		if len(lit) >= MinSecretLen && !seen[lit] {
			seen[lit] = true
			out = append(out, needle{lit, kind})
		}
	}
	var forms []string
	for _, v := range values {
		forms = append(forms, v)
		// A value read from a file ("kubectl create secret --from-file")
		// ends with the file's newline, which a program using it drops.
		if t := strings.TrimSpace(v); t != v {
			forms = append(forms, t)
		}
	}
	for _, v := range forms {
		if len(v) < MinSecretLen {
			continue
		}
		addNeedle(v, Secret)
		addNeedle(strings.ToUpper(v), SecretCase)
		addNeedle(strings.ToLower(v), SecretCase)
		addNeedle(hex.EncodeToString([]byte(v)), SecretHex)
		addNeedle(strings.ToUpper(hex.EncodeToString([]byte(v))), SecretHex)
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			for k := range 3 {
				padded := strings.Repeat("\x00", k) + v
				e := enc.EncodeToString([]byte(padded))
				// Characters carry 6 bits: skip those holding padding bits,
				// stop before the last one holding bits past the value.
				from, to := (8*k+5)/6, 8*(k+len(v))/6
				addNeedle(e[from:to], SecretBase64)
			}
		}
		for _, e := range []string{url.QueryEscape(v), url.PathEscape(v), percentEscape(v, "-_.~/"), percentEscape(v, "-_.~!*'()")} {
			addNeedle(e, SecretURLEncoded)
			addNeedle(lowerPercentHex(e), SecretURLEncoded)
		}
		for _, e := range jsonEscapes(v) {
			addNeedle(e, SecretJSONEscaped)
		}
	}
	return out
}

// lowerPercentHex writes the hex digits of e's percent escapes in lower
// case ("%2f"), as some encoders do.
// percentEscape is v with every byte but letters, digits and those of
// keep written as %XX: with keep "-_.~/" as Python's urllib.parse.quote
// writes it, with "-_.~!*'()" as JavaScript's encodeURIComponent, the two
// escapers Go's (url.QueryEscape, url.PathEscape) differ most from.
func percentEscape(v, keep string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if c := v[i]; isAlnum(c) || strings.IndexByte(keep, c) >= 0 {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}

func lowerPercentHex(e string) string {
	b := []byte(e)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = toLower[b[i+1]], toLower[b[i+2]]
		}
	}
	return string(b)
}

// jsonEscapes are v's forms inside a JSON string, as encoders write them,
// without the quotes: Go's (escaping "<", ">", "&" or not), one that writes
// every non-ASCII character as \u escapes, and one that escapes "/" too.
func jsonEscapes(v string) []string {
	var out []string
	for _, html := range []bool{true, false} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		_ = enc.Encode(v) // a string always encodes
		e := strings.TrimSuffix(b.String(), "\n")
		e = e[1 : len(e)-1]
		out = append(out, e, strings.ReplaceAll(e, "/", `\/`))
	}
	var ascii strings.Builder
	for _, r := range out[2] { // without HTML or "/" escapes, as Python writes
		if r < utf8.RuneSelf {
			ascii.WriteRune(r)
			continue
		}
		for _, u := range utf16.Encode([]rune{r}) {
			fmt.Fprintf(&ascii, `\u%04x`, u)
		}
	}
	return append(out, ascii.String())
}

func exact(n int) func(string, int) (int, int, bool) {
	return func(_ string, at int) (int, int, bool) { return at, at + n, true }
}
