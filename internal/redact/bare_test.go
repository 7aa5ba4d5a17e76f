package redact

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/tokencorpus"
)

func rngFor(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 29)) }

func loadCorpus(t testing.TB) []tokencorpus.Entry {
	c, err := tokencorpus.Load("testdata/bare-tokens.json")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var (
	wrappings = tokencorpus.Wrappings
	rendered  = tokencorpus.Rendered
)

// Every token of the corpus, in every wrapping, is redacted: the text no
// longer holds it, and JSON's decoded strings do not either.
func TestBareTokenCorpus(t *testing.T) {
	corpus := loadCorpus(t)
	kinds := map[string]bool{}
	for _, e := range corpus {
		kinds[e.Kind] = true
	}
	if len(corpus) < 200 || len(kinds) < 60 {
		t.Fatalf("the corpus holds %d tokens of %d kinds, want at least 200 of 60", len(corpus), len(kinds))
	}
	missed := 0
	for _, e := range corpus {
		for _, w := range wrappings {
			text, tok := e.Wrapped[w], rendered(e.Token, w)
			if !strings.Contains(text, tok) {
				t.Fatalf("%s %s: the wrapping %q does not hold the token", e.Kind, w, text)
			}
			var c Counts
			if got := Shapes().String(text, &c); strings.Contains(got, tok) {
				missed++
				t.Errorf("%s in %s survived: %q", e.Kind, w, got)
			}
			if w == "bare" && !foundByShape(c) {
				t.Errorf("%s: found by %v, not by a format or shape of its own", e.Kind, c.Map())
			}
		}
		out, err := Shapes().JSON([]byte(e.Wrapped["json"]), nil)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("%s: JSON redacted to %s: %v", e.Kind, out, err)
		}
		if strings.Contains(decoded(v), e.Token) {
			t.Errorf("%s survived JSON: %s", e.Kind, out)
		}
	}
	t.Logf("%d tokens of %d kinds in %d wrappings: %d missed", len(corpus), len(kinds), len(wrappings), missed)
}

// foundByShape says whether c counts a bare format or a structural shape
// (a JWT, a PEM key): what finds a token with no name beside it.
func foundByShape(c Counts) bool {
	for k := range c.Map() {
		if IsBareFormat(k) || k == JWT.String() || k == PrivateKey.String() {
			return true
		}
	}
	return false
}

// A bare format's kind names the redaction: each format is found by its own
// row (not only by a gitleaks rule or a name beside it).
func TestBareFormatsNameTheirKind(t *testing.T) {
	for _, tc := range []struct{ text, kind string }{
		{"xoxe-1-" + randomOf(rngFor(1), alnum, 146), "slack-refresh-token"},
		{"hf_" + randomOf(rngFor(2), alnum, 34), "huggingface-token"},
		{"gsk_" + randomOf(rngFor(3), alnum, 52), "groq-api-key"},
		{"123456789:AA" + randomOf(rngFor(4), alnum+"_-", 33), "telegram-bot-token"},
		{"GET /bot123456789:AA" + randomOf(rngFor(5), alnum+"_-", 33) + "/getMe", "telegram-bot-token"},
		{"key-" + randomOf(rngFor(6), hexa, 32), "mailgun-api-key"},
		{randomOf(rngFor(7), hexa, 32) + "-us14", "mailchimp-api-key"},
		{randomOf(rngFor(8), alnum, 14) + ".atlasv1." + randomOf(rngFor(9), alnum, 67), "terraform-cloud-token"},
		{"abc1Q~" + randomOf(rngFor(10), alnum, 34), "azure-ad-client-secret"},
		{"AGE-SECRET-KEY-1" + randomOf(rngFor(11), "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58), "age-secret-key"},
	} {
		var c Counts
		got := Shapes().String(tc.text, &c)
		if c.Map()[tc.kind] != 1 {
			t.Errorf("%q became %q, counted %v; want one %s", tc.text, got, c.Map(), tc.kind)
		}
	}
}

// Prefixes in ordinary text, placeholders and bodies of the wrong length
// or alphabet are left alone.
func TestBareFormatsLeaveOrdinaryTextAlone(t *testing.T) {
	for _, s := range []string{
		"hf_" + strings.Repeat("x", 34),                            // a placeholder
		"key-" + strings.Repeat("0", 32),                           // no entropy
		"key-" + randomOf(rngFor(12), hexa, 40),                    // too long for Mailgun
		"npm_" + randomOf(rngFor(13), alnum, 35),                   // one short
		"the key-value store", "use sk_ prefixes", "glpat-example", // words
		"dapi_config", "SKIP_TESTS=1", "ACME Corp", "patch the path.", "1//0 comment",
		"Q~ in a sentence", "see en-us and de-de", "a:AAbbcc", "15:AAA alarm",
		"pypi-AgEIcHlwaS5vcmc", "hooks.slack.com/services/", "discord.com/api/webhooks/1234",
		"SK" + strings.Repeat("a1", 16) + "b", // 33 hex digits: no Twilio key
	} {
		if got := Shapes().String(s, nil); got != s {
			t.Errorf("%q redacted to %q", s, got)
		}
	}
}

// FuzzBareTokensNeverLeak puts a corpus token, in one of its wrappings,
// between arbitrary texts, each separated from it by a delimiter (a token
// glued to a word is another word): it never survives.
func FuzzBareTokensNeverLeak(f *testing.F) {
	corpus := loadCorpus(f)
	for i, s := range [][2]string{{"", ""}, {"password=", "\n"}, {`{"k":"`, `"}`}, {"ghp_", "hf_"}, {"-----BEGIN RSA PRIVATE KEY-----", ""}, {"\u200b", "\\u0041"}} {
		f.Add(s[0], s[1], uint16(i*61), byte(i))
	}
	const delimiters = " \n\t\"',;()<>[]{}|=`"
	f.Fuzz(func(t *testing.T, before, after string, pick uint16, sep byte) {
		e := corpus[int(pick)%len(corpus)]
		w := wrappings[int(pick)/len(corpus)%len(wrappings)]
		d := string(delimiters[int(sep)%len(delimiters)])
		tok := rendered(e.Token, w)
		if out := Shapes().String(before+d+e.Wrapped[w]+d+after, nil); strings.Contains(out, tok) {
			t.Fatalf("%s in %s survived in %q", e.Kind, w, out)
		}
	})
}

// A server's Secret value is redacted in every encoding New precomputes.
func TestSecretValueEncodings(t *testing.T) {
	const value = `Pa55/wörd"<&>-Zq8+x`
	r := New(value)
	b := []byte(value)
	jsonGo, _ := json.Marshal(value)
	encodings := map[string]string{
		"exact":             value,
		"upper case":        strings.ToUpper(value),
		"lower case":        strings.ToLower(value),
		"hex":               hex.EncodeToString(b),
		"HEX":               strings.ToUpper(hex.EncodeToString(b)),
		"base64":            base64.StdEncoding.EncodeToString(b),
		"base64 raw":        base64.RawStdEncoding.EncodeToString(b),
		"base64url":         base64.URLEncoding.EncodeToString(b),
		"base64url raw":     base64.RawURLEncoding.EncodeToString(b),
		"query escaped":     url.QueryEscape(value),
		"path escaped":      url.PathEscape(value),
		"lower-case escape": regexp.MustCompile(`%[0-9A-F]{2}`).ReplaceAllStringFunc(url.QueryEscape(value), strings.ToLower),
		"json (Go)":         string(jsonGo[1 : len(jsonGo)-1]),
		"json (no html)":    `Pa55/wörd\"<&>-Zq8+x`,
		"json (slash)":      `Pa55\/wörd\"<&>-Zq8+x`,
		"json (ascii)":      `Pa55/w\u00f6rd\"<&>-Zq8+x`,
	}
	kinds := map[string]bool{}
	for name, enc := range encodings {
		var c Counts
		got := r.String("value: "+enc+" end", &c)
		if strings.Contains(got, enc) || c.Total() == 0 {
			t.Errorf("%s: %q survived: %q", name, enc, got)
		}
		for k := range c.Map() {
			kinds[k] = true
		}
	}
	for _, k := range []string{"secret", "secret-case", "secret-hex", "secret-base64", "secret-urlencoded", "secret-json-escaped"} {
		if !kinds[k] {
			t.Errorf("no redaction of kind %s among %v", k, kinds)
		}
	}
	// Every form is a literal of the one scan, computed when the Redactor
	// was built: none needs a pass of its own.
	forms := 0
	for _, ts := range r.secrets.byHead {
		forms += len(ts)
	}
	if forms != len(secretNeedles([]string{value})) || forms < len(encodings)-4 {
		t.Errorf("the Redactor holds %d forms of the value", forms)
	}
}

// GitleaksOnly finds what gitleaks' rules find and nothing of this
// package's own: the benchmark's comparison is of the rules alone.
func TestGitleaksOnly(t *testing.T) {
	g := GitleaksOnly()
	stripe := "sk_live_" + randomOf(rngFor(20), alnum, 24)
	if got := g.String("stripe: "+stripe, nil); strings.Contains(got, stripe) {
		t.Errorf("gitleaks' stripe rule did not run: %q", got)
	}
	for _, s := range []string{
		"123456789:AA" + randomOf(rngFor(21), alnum, 33),           // a bare format
		"https://app:" + randomOf(rngFor(22), alnum, 16) + "@db/x", // a shape of this package
	} {
		if got := g.String(s, nil); got != s {
			t.Errorf("%q redacted to %q by gitleaks' rules alone", s, got)
		}
	}
}

// A text repeating a prefix is read once for each alphabet, not once for
// each prefix: the bytes of bodies read grow with the text, not with its
// square (a server's result must not burn the bridge's CPU).
func TestRepeatedPrefixesReadOnce(t *testing.T) {
	for _, prefix := range []string{"sk-", "xoxb-", "github_pat_", "fm2_", "glpat-", "sk-ant-", "sk-%2D"} {
		s := strings.Repeat(prefix, 5000)
		gl := matcher{ix: gitleaks()}
		var memo scanMemo
		Shapes().scan(s, nil, false, &gl, &memo)
		if memo.examined > 2*len(s) {
			t.Errorf("%q x 5000 (%d bytes): %d bytes of memo read", prefix, len(s), memo.examined)
		}
	}
}

// Reading a body through scanMemo finds what reading it alone finds.
func TestBodyRunsAgreeWithOneRead(t *testing.T) {
	s := "sk-ab%2Dcd-ef%2d" + strings.Repeat("x", 30) + " sk-" + strings.Repeat("Ab3", 10) + "%zz"
	for _, step := range []int{1, -1, 3, -5} {
		var shared scanMemo
		for k := range len(s) {
			from := k * step % len(s)
			if from < 0 {
				from += len(s)
			}
			var alone scanMemo
			wantEnd, wantN := alone.run(s, from, keyByteSet)
			if end, n := shared.run(s, from, keyByteSet); end != wantEnd || n != wantN {
				t.Fatalf("step %d from %d: end %d n %d, want %d %d", step, from, end, n, wantEnd, wantN)
			}
		}
	}
}

// BenchmarkRepeatedLiterals scans texts that repeat one literal, at two
// lengths: the time a byte must stay the same from the short text to the
// long one (the scan is linear), which a quadratic path would multiply by
// the lengths' ratio. Compare the ns/op of each pair (go test -bench
// RepeatedLiterals ./internal/redact).
func BenchmarkRepeatedLiterals(b *testing.B) {
	for _, lit := range []string{
		"sk-", "github_pat_", "fm2_", "password", "passwordpassword=", "-----BEGIN PRIVATE KEY-----",
		"pwd=", "secret_access_key=", "hooks.slack.com/",
	} {
		for _, size := range []int{16 << 10, 64 << 10} {
			s := strings.Repeat(lit, size/len(lit))
			b.Run(fmt.Sprintf("%s/%dKiB", strings.Trim(lit, "-="), size>>10), func(b *testing.B) {
				b.SetBytes(int64(len(s)))
				for b.Loop() {
					Shapes().String(s, nil)
				}
			})
		}
	}
}

// A token of a prefix whose length varies, longer than its format says,
// and a Braintree token with its "$" escaped for a URL's query.
func TestBareFormatEdges(t *testing.T) {
	for in, want := range map[string]string{
		"key: gsk_" + randomOf(rngFor(21), alnum, 57) + " end":                                                              "key: [REDACTED:groq-api-key] end",
		"?t=access_token%24production%24" + randomOf(rngFor(22), alnum, 16) + "%24" + randomOf(rngFor(23), hexa, 32) + "&x": "?t=[REDACTED:braintree-access-token]&x",
	} {
		if got := Shapes().String(in, nil); got != want {
			t.Errorf("String(%q)\n got %q\nwant %q", in, got, want)
		}
	}
}
