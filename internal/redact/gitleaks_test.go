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
