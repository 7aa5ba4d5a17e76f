package rawjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheck(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	var many strings.Builder
	many.WriteString("{")
	for i := range 40 {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`"k` + strings.Repeat("x", i) + `":1`)
	}
	manyOK := many.String() + "}"
	manyBad := many.String() + `,"KXXX":2}`
	for _, tc := range []struct {
		name, doc string
		ok        bool
		want      string
	}{
		{"plain request", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`, true, ""},
		{"scalar", `42`, true, ""},
		{"empty object and array", `{"a":{},"b":[],"c":[{}]}`, true, ""},
		{"same key in sibling objects", `[{"a":1},{"a":2}]`, true, ""},
		{"same key at two levels", `{"a":{"a":1}}`, true, ""},
		{"repeated key", `{"name":"echo","name":"whoami"}`, false, "appears twice"},
		{"case variant at top", `{"name":"echo","NAME":"whoami"}`, false, "differ only in case"},
		{"case variant deep in arguments", `{"params":{"arguments":{"path":"/ok","Path":"/etc"}}}`, false, "differ only in case"},
		{"case variant through an escape", `{"name":"echo","N\u0041ME":"whoami"}`, false, "differ only in case"},
		{"kelvin sign folds to k", "{\"k\":1,\"\u212a\":2}", false, "differ only in case"},
		{"large object ok", manyOK, true, ""},
		{"large object case variant", manyBad, false, "differ only in case"},
		{"too deep", deep, false, "nested deeper"},
		{"not json", `{"a":`, false, "not valid JSON"},
		{"trailing garbage", `{} x`, false, "not valid JSON"},
		{"invalid UTF-8 in a value", "{\"name\":\"audit_copy\xff\"}", false, "not valid UTF-8"},
		{"invalid UTF-8 in a key", "{\"a\xfe\":1}", false, "not valid UTF-8"},
		{"overlong encoding", "{\"a\":\"\xc0\xaf\"}", false, "not valid UTF-8"},
		{"lone high surrogate", `{"a":"x\ud800"}`, false, "lone surrogate"},
		{"lone high surrogate before another escape", `{"a":"\ud800\u0041"}`, false, "lone surrogate"},
		{"lone low surrogate", `{"a":"\udc00x"}`, false, "lone surrogate"},
		{"lone surrogate in a key", `{"\ud83d":1}`, false, "lone surrogate"},
		{"surrogate pair", `{"a":"\ud83d\ude00 \u00e9 \\u d800"}`, true, ""},
		{"raw multi-byte text", "{\"a\":\"\u00e9\u4e2d\U0001F600\"}", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check([]byte(tc.doc))
			if tc.ok {
				if err != nil {
					t.Fatalf("Check(%s) = %v, want nil", tc.doc, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check(%s) = %v, want an error containing %q", tc.doc, err, tc.want)
			}
		})
	}
	if err := Check([]byte("{")); !errors.Is(err, ErrSyntax) {
		t.Fatalf("a syntax error must wrap ErrSyntax, got %v", err)
	}
}

// FuzzCheck: Check never panics, accepts only valid JSON, and what it
// accepts has no object whose keys fold together.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":1,"A":2}`, `[{"x":[1,{"y":"\u0059"}]}]`, `"s"`, `{"\u00e9":1,"\u00c9":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := Check(data)
		if err == nil && !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		if err == nil {
			var v any
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.UseNumber()
			if dec.Decode(&v) != nil {
				t.Fatalf("accepted %q, which does not decode", data)
			}
			if bad := foldedTwice(v); bad != "" {
				t.Fatalf("accepted %q with folded keys %q", data, bad)
			}
			// Text that is valid Unicode decodes without replacement
			// characters it did not spell itself.
			spelled := bytes.Contains(data, []byte("\uFFFD")) || bytes.Contains(bytes.ToLower(data), []byte(`\ufffd`))
			if !utf8.Valid(data) || (!spelled && strings.ContainsRune(fmt.Sprint(v), utf8.RuneError)) {
				t.Fatalf("accepted %q, which is not Unicode text", data)
			}
		}
	})
}

// foldedTwice finds, in a decoded document, an object that lost a key to
// folding — which cannot be seen after decoding, so it only checks the keys
// that survived pairwise.
func foldedTwice(v any) string {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k, e := range v {
			for _, p := range keys {
				if strings.EqualFold(p, k) {
					return k
				}
			}
			keys = append(keys, k)
			if bad := foldedTwice(e); bad != "" {
				return bad
			}
		}
	case []any:
		for _, e := range v {
			if bad := foldedTwice(e); bad != "" {
				return bad
			}
		}
	}
	return ""
}
