package client

import (
	"encoding/json"
	"testing"
	"time"
)

// A list's freshness is its pages' least ttlMs; a page without one (or
// with one that is not a number) leaves the caller to its own rules, and a
// negative one counts as 0.
func TestFreshnessOfPages(t *testing.T) {
	for name, tc := range map[string]struct {
		pages []string // each page's ttlMs, "" for none
		want  Freshness
	}{
		"one page":           {[]string{"5000"}, Freshness{TTL: 5 * time.Second, Given: true}},
		"the least of pages": {[]string{"5000", "200", "9000"}, Freshness{TTL: 200 * time.Millisecond, Given: true}},
		"zero":               {[]string{"0"}, Freshness{Given: true}},
		"negative":           {[]string{"-5"}, Freshness{Given: true}},
		"past a Duration":    {[]string{"1e300"}, Freshness{TTL: MaxTTL, Given: true}},
		"past a day":         {[]string{"172800000"}, Freshness{TTL: MaxTTL, Given: true}},
		"a page without":     {[]string{"5000", ""}, Freshness{}},
		"not a number":       {[]string{`"soon"`}, Freshness{}},
	} {
		f := Freshness{Given: true}
		for i, p := range tc.pages {
			var raw json.RawMessage
			if p != "" {
				raw = json.RawMessage(p)
			}
			f = f.page(raw, i == 0)
		}
		if f != tc.want {
			t.Errorf("%s: %+v, want %+v", name, f, tc.want)
		}
	}
}
