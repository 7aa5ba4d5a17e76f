package redact

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

type glExamples struct {
	ID  string   `json:"id"`
	TPs []string `json:"tps"`
	FPs []string `json:"fps"`
}

func loadExamples(t testing.TB) []glExamples {
	b, err := os.ReadFile("testdata/gitleaks-examples.json")
	if err != nil {
		t.Fatal(err)
	}
	var ex []glExamples
	if err := json.Unmarshal(b, &ex); err != nil {
		t.Fatal(err)
	}
	return ex
}

// secretOf is what gitleaks reports as the secret of rule r's first match
// in s (its own regexp, run on the whole text).
func secretOf(r glRule, s string) string {
	re := regexp.MustCompile(r.Regex)
	loc := re.FindStringSubmatch(s)
	if loc == nil {
		return ""
	}
	if r.Group > 0 && r.Group < len(loc) {
		return loc[r.Group]
	}
	for _, g := range loc[1:] {
		if g != "" {
			return g
		}
	}
	return strings.Trim(loc[0], "\n")
}

// Every rule's own true-positive examples are redacted (the secret gitleaks
// would report is gone), and its false-positive examples are left alone by
// the rule.
func TestGitleaksExamples(t *testing.T) {
	ex := loadExamples(t)
	if len(ex) != len(gitleaksRules) {
		t.Fatalf("%d rules with examples, %d rules", len(ex), len(gitleaksRules))
	}
	tps, fps, otherFPs := 0, 0, 0
	for i, e := range ex {
		rule := gitleaksRules[i]
		if rule.ID != e.ID {
			t.Fatalf("examples of %s for rule %s", e.ID, rule.ID)
		}
		alone := compileGitleaks([]glRule{rule}, gitleaksGlobal)
		for _, tp := range e.TPs {
			tps++
			secret := secretOf(rule, tp)
			if secret == "" {
				t.Errorf("%s: the rule's regexp does not match its own example %q", e.ID, tp)
				continue
			}
			got := Shapes().String(tp, nil)
			if strings.Contains(got, secret) || !strings.Contains(got, "[REDACTED:") {
				t.Errorf("%s: %q\n  redacted to %q\n  secret %q survived", e.ID, tp, got, secret)
			}
		}
		for _, fp := range e.FPs {
			fps++
			if spans := alone.find(fp, nil); len(spans) > 0 {
				t.Errorf("%s: false positive %q redacted at %v", e.ID, fp, spans)
			}
			if Shapes().String(fp, nil) != fp {
				otherFPs++
			}
		}
	}
	t.Logf("%d rules, %d true positives redacted, %d false positives left alone by their rule (%d redacted by another)", len(ex), tps, fps, otherFPs)
}

// A rule whose keywords are in its value, not its name (Lob's "live_", New
// Relic's "NRAK"), runs at them too: the secret is named by the rule, not
// only caught by the generic ones.
func TestRuleKeyedByItsValue(t *testing.T) {
	for _, tc := range []struct{ text, kind string }{
		{"LOB_KEY=test_0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7\n", "lob-api-key"},
		{"newrelic_key = NRAK-ABCDEFGHIJKLMNOPQRSTUVWXY12\n", "new-relic-user-api-key"},
		{"okta_token: 00aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5zA7b\n", "okta-access-token"},
	} {
		var c Counts
		got := Shapes().String(tc.text, &c)
		if c.Map()[tc.kind] != 1 {
			t.Errorf("%q became %q, counted %v; want one %s", tc.text, got, c.Map(), tc.kind)
		}
	}
}

// compiled lists the rules of ix whose regexps have been compiled. Only for
// a test that runs nothing on ix at the same time.
func compiled(ix *keywordIndex) []string {
	var ids []string
	for i := range ix.matchers {
		if ix.matchers[i].m.re != nil {
			ids = append(ids, ix.rules[i].ID)
		}
	}
	return ids
}

// The index compiles no rule's regexps up front (they hold about 4 MB):
// building the scan's trigrams compiles the rules of two-byte keywords
// only, and a text compiles the rules whose keywords it holds.
func TestRulesCompileWhenATextReachesThem(t *testing.T) {
	ix := compileGitleaks(gitleaksRules, gitleaksGlobal)
	if got := compiled(ix); len(got) != 0 {
		t.Fatalf("the index compiled %v", got)
	}
	ix.grams()
	var twoByte []string
	for _, r := range gitleaksRules {
		if slices.ContainsFunc(r.Keywords, func(k string) bool { return len(k) == 2 }) {
			twoByte = append(twoByte, r.ID)
		}
	}
	if got := compiled(ix); len(twoByte) == 0 || !slices.Equal(got, twoByte) {
		t.Fatalf("the trigrams compiled %v, want the rules of two-byte keywords %v", got, twoByte)
	}
	if spans := ix.find("id AKIAZ7VRSUVWXYZ23456 ok", nil); len(spans) != 1 {
		t.Fatalf("an AWS key id: %v", spans)
	}
	var want []string
	for _, r := range gitleaksRules {
		if slices.Contains(twoByte, r.ID) || r.ID == "aws-access-token" {
			want = append(want, r.ID)
		}
	}
	if got := compiled(ix); !slices.Equal(got, want) {
		t.Fatalf("after a text with an AWS key id, compiled %v, want %v", got, want)
	}
}

// Scans that reach rules for the first time at once, from many goroutines,
// find what one scan alone finds (run with -race: a rule is compiled once,
// and published to every scan).
func TestFirstScansAtOnce(t *testing.T) {
	var texts []string // two examples of each rule, and two false positives
	for _, e := range loadExamples(t) {
		texts = append(texts, e.TPs[:min(2, len(e.TPs))]...)
		texts = append(texts, e.FPs[:min(2, len(e.FPs))]...)
	}
	alone := compileGitleaks(gitleaksRules, gitleaksGlobal)
	want := make([][]span, len(texts))
	for i, s := range texts {
		want[i] = alone.find(s, nil)
	}
	ix := compileGitleaks(gitleaksRules, gitleaksGlobal)
	const scanners = 8
	start := make(chan struct{})
	errs := make(chan string, scanners*len(texts))
	var wg sync.WaitGroup
	for g := range scanners {
		wg.Go(func() {
			<-start
			for k := range texts {
				i := (k + g*len(texts)/scanners) % len(texts) // each starts elsewhere
				if got := ix.find(texts[i], nil); !slices.Equal(got, want[i]) {
					errs <- fmt.Sprintf("%q: %v, alone %v", texts[i], got, want[i])
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := len(compiled(ix)); n != len(compiled(alone)) {
		t.Errorf("%d rules compiled by the scans at once, %d by the scans alone", n, len(compiled(alone)))
	}
}

// TestEveryRuleCompiles compiles every rule and the global allowlist, as the
// first texts reaching them would: a rule whose regexp does not compile fails
// here, not at a scan in production (rules compile lazily).
func TestEveryRuleCompiles(t *testing.T) {
	ix := compileGitleaks(gitleaksRules, gitleaksGlobal)
	for i := range ix.rules {
		if m := ix.rule(i); m.re == nil {
			t.Fatalf("rule %s compiled to no regexp", ix.rules[i].ID)
		}
	}
	ix.global() // a regexp that does not compile panics
}

// A rule searched in windows skips a window without any of its holds: every
// match of the rule in its own examples holds one, and the rules keyed by
// their value have holds (their names).
func TestWindowHoldsAreInEveryMatch(t *testing.T) {
	ix := compileGitleaks(gitleaksRules, gitleaksGlobal)
	withHolds := 0
	for i, e := range loadExamples(t) {
		m := ix.rule(i)
		if len(m.holds) == 0 {
			continue
		}
		withHolds++
		for _, tp := range e.TPs {
			if match := m.re.FindString(tp); match != "" && !holdsAny(match, m.holds) {
				t.Errorf("%s: the match %q holds none of %v", e.ID, match, m.holds)
			}
		}
	}
	if nr := ix.rule(slices.IndexFunc(gitleaksRules, func(r glRule) bool { return r.ID == "new-relic-user-api-key" })); !slices.Contains(nr.holds, "newrelic") {
		t.Errorf("New Relic's rule holds %v, want its names", nr.holds)
	}
	t.Logf("%d rules searched in windows only where their holds are", withHolds)
}
