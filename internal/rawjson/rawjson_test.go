package rawjson

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMembersAndElements(t *testing.T) {
	doc := []byte(` { "a" : [1, {"x":"}"}, "s\"q"] , "b\u00e9":null,"c":{"d":true} } `)
	ms, err := Members(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 || ms[0].Key != "a" || ms[1].Key != "bé" || string(ms[1].Value) != "null" || string(ms[2].Value) != `{"d":true}` {
		t.Fatalf("members %+v", ms)
	}
	for _, m := range ms {
		if string(doc[m.Start:m.Start+len(m.Value)]) != string(m.Value) {
			t.Fatalf("member %q starts at %d, where %q stands", m.Key, m.Start, doc[m.Start:])
		}
	}
	els, err := Elements(ms[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	if len(els) != 3 || string(els[1]) != `{"x":"}"}` || string(els[2]) != `"s\"q"` {
		t.Fatalf("elements %q", els)
	}
	if s, ok := String(els[2]); !ok || s != `s"q` {
		t.Fatalf("String = %q, %v", s, ok)
	}
	if got := AppendObject(nil, ms); !json.Valid(got) || !bytes.Contains(got, []byte(`"bé":null`)) {
		t.Fatalf("AppendObject = %s", got)
	}
	if string(Get(doc, "c")) != `{"d":true}` || Get(doc, "zz") != nil || Get([]byte(`[1]`), "a") != nil {
		t.Fatal("Get")
	}
	// Get compares keys without decoding them unless they have escapes,
	// and takes the first of repeated keys, as Members and a loop would.
	if got := Get([]byte(`{"x":0, "a\u0062" : 1,"ab":2}`), "ab"); string(got) != "1" {
		t.Fatalf("Get of an escaped key = %s", got)
	}
	if got := Get([]byte(`{"ab":1,"x":}`), "ab"); got != nil {
		t.Fatalf("Get of a broken object = %s", got)
	}
	if empty, err := Members([]byte(`{}`)); err != nil || len(empty) != 0 {
		t.Fatalf("empty object: %v %v", empty, err)
	}
	if empty, err := Elements([]byte(`[ ]`)); err != nil || len(empty) != 0 {
		t.Fatalf("empty array: %v %v", empty, err)
	}
}

func TestMalformedGivesErrors(t *testing.T) {
	for _, doc := range []string{``, `{`, `{"a"`, `{"a":`, `{"a":1`, `{"a" 1}`, `{1:2}`, `[1,`, `[1 2]`, `"abc`, `{"a":"b\`, `[`, `]`, `x`} {
		if _, err := Members([]byte(doc)); err == nil && strings.HasPrefix(doc, "{") {
			t.Errorf("Members(%q): no error", doc)
		}
		if _, err := Elements([]byte(doc)); err == nil && strings.HasPrefix(doc, "[") {
			t.Errorf("Elements(%q): no error", doc)
		}
		_, _ = RewriteStrings([]byte(doc), func(s, _ string, _ bool) (string, bool) { return s + "!", true })
	}
	if _, err := RewriteStrings([]byte(`]`), func(s, _ string, _ bool) (string, bool) { return s, false }); err == nil {
		t.Error("RewriteStrings(]): no error")
	}
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\s`, "tab\tnl\ncr\r", "back\bfeed\f", "\x00\x01\x1f\x7f", "é日本\U0001F600", "bad\xffutf8", "\u2028\u2029", "<&>"} {
		appendStringAsEncodingJSON(t, s)
	}
}

// FuzzAppendString holds AppendString to encoding/json's bytes (HTML
// escaping off) for any string, valid UTF-8 or not.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"plain", "\b\f\n\r\t\x00\x1f", "bad\xff\xc3", "\u2028<&>", `"\`} {
		f.Add(s)
	}
	f.Fuzz(appendStringAsEncodingJSON)
}

func appendStringAsEncodingJSON(t *testing.T, s string) {
	got := AppendString(nil, s)
	var back string
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("AppendString(%q) = %s: %v", s, got, err)
	}
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	if string(got) != strings.TrimSuffix(want.String(), "\n") {
		t.Errorf("AppendString(%q) = %s, encoding/json writes %s", s, got, want.String())
	}
}

func TestRewriteStrings(t *testing.T) {
	doc := []byte(`{"k":"v","arr":["v",{"k2":"v"}], "n": -1.5e3 ,"t":true}`)
	var seen []string
	out, err := RewriteStrings(doc, func(s, key string, isKey bool) (string, bool) {
		seen = append(seen, key+"/"+s+map[bool]string{true: "(key)", false: ""}[isKey])
		if s == "v" {
			return "V\n", true
		}
		return s, false
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"k":"V\n","arr":["V\n",{"k2":"V\n"}], "n": -1.5e3 ,"t":true}`; string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	if got := strings.Join(seen, " "); got != "/k(key) k/v /arr(key) /v /k2(key) k2/v /n(key) /t(key)" {
		t.Fatalf("calls: %s", got)
	}
}

func FuzzRewriteStrings(f *testing.F) {
	f.Add(`{"a":["b",1,{"c":"d\u0041"}]}`)
	f.Fuzz(func(t *testing.T, doc string) {
		if !json.Valid([]byte(doc)) {
			return
		}
		out, err := RewriteStrings([]byte(doc), func(s, _ string, _ bool) (string, bool) { return "<" + s + ">", true })
		if err != nil || !json.Valid(out) {
			t.Fatalf("RewriteStrings(%q) = %q, %v", doc, out, err)
		}
	})
}

func TestDecodeStringMatchesEncodingJSON(t *testing.T) {
	for _, q := range []string{`""`, `"plain"`, `"a\"b\\c\/d"`, `"\b\f\n\r\t"`, `"\u00e9\u65E5"`, `"\ud83d\ude00"`,
		`"\ud83d"`, `"\ud83dx"`, `"\ud83d\u0041"`, `"\ude00\ud83d"`, `"x\\"`, `"\\\\"`, `"\u0000"`} {
		got, err := decodeString([]byte(q))
		var want string
		if jerr := json.Unmarshal([]byte(q), &want); jerr != nil {
			t.Fatalf("test input %s: %v", q, jerr)
		}
		if err != nil || got != want {
			t.Errorf("decodeString(%s) = %q, %v; encoding/json: %q", q, got, err, want)
		}
	}
	for _, bad := range []string{`"\x"`, `"\u12"`, `"\u12zz"`, `"\"`} {
		if _, err := decodeString([]byte(bad)); err == nil {
			t.Errorf("decodeString(%s): no error", bad)
		}
	}
}

func FuzzDecodeString(f *testing.F) {
	f.Add(`"a\u00e9\ud83d\ude00\n"`)
	f.Fuzz(func(t *testing.T, q string) {
		var want string
		if json.Unmarshal([]byte(q), &want) != nil || !utf8.ValidString(q) {
			return
		}
		end, err := skipString([]byte(q), strings.IndexByte(q, '"'))
		if err != nil {
			t.Fatalf("skipString(%q): %v", q, err)
		}
		got, err := decodeString([]byte(q)[strings.IndexByte(q, '"'):end])
		if err != nil || got != want {
			t.Fatalf("decodeString(%q) = %q, %v; encoding/json: %q", q, got, err, want)
		}
	})
}

func TestBlank(t *testing.T) {
	for doc, want := range map[string]bool{"": true, " \t\r\n": true, " {} ": false, "\v": false, "\u00a0": false} {
		if got := Blank([]byte(doc)); got != want {
			t.Errorf("Blank(%q) = %v, want %v", doc, got, want)
		}
	}
}
