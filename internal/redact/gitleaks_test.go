package redact

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
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
			got := Shapes.String(tp, nil)
			if strings.Contains(got, secret) || !strings.Contains(got, "[REDACTED:") {
				t.Errorf("%s: %q\n  redacted to %q\n  secret %q survived", e.ID, tp, got, secret)
			}
		}
		for _, fp := range e.FPs {
			fps++
			if spans := alone.find(fp, nil); len(spans) > 0 {
				t.Errorf("%s: false positive %q redacted at %v", e.ID, fp, spans)
			}
			if Shapes.String(fp, nil) != fp {
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
		got := Shapes.String(tc.text, &c)
		if c.Map()[tc.kind] != 1 {
			t.Errorf("%q became %q, counted %v; want one %s", tc.text, got, c.Map(), tc.kind)
		}
	}
}
