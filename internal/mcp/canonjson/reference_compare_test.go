package canonjson

import (
	"bytes"
	"strings"
	"testing"
)

// vectors are texts whose canonical form depends on a detail of how
// encoding/json decoded and encoded them; Marshal must agree with
// referenceMarshal on each, to the byte, and on which are refused.
var vectors = []string{
	// strings
	`"\u0000\u0001\u001f\u007f"`, `"\b\f\n\r\t"`, `"\u0008\u000c\u000A\u000d\u0009"`,
	"\"\u2028\u2029\"", `"\u2028\u2029"`, "\"a\xffb\xc0\xafc\xed\xa0\x80\"", "\"\xef\xbf\xbd\"",
	`"<>&"`, `"\u003c\u003e\u0026"`, `"\/\\\""`, `"\u0041\u00e9\u65e5"`, `"\uD83D\uDE00"`,
	`"\ud83d\ude00"`, `"\ud800"`, `"\udc00\ud800"`, `"\ud800\u0041"`, `"\ud800x"`, `"\u001F"`,
	`"é日本😀"`, `""`,
	// keys
	`{"b":1,"a":2}`, `{"\u0061":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"\n":1,"\u000a":2,"a":3}`,
	`{"é":1,"z":2,"Z":3,"":4}`, "{\"\xff\":1,\"\xef\xbf\xbd\":2}", `{"\ud800":1,"\ufffd":2}`,
	`{"a\/b":1,"a/b":2}`, `{"b":{"d":1,"c":2},"a":[{"f":1,"e":2}]}`,
	// duplicate keys: the last wins
	`{"a":1,"a":2}`, `{"a":{"x":1},"b":0,"a":{"y":2}}`, `{"a":1,"b":2,"a":3,"b":4,"c":5}`,
	// numbers
	`0`, `-0`, `1.0`, `1e3`, `1E3`, `1e+3`, `1e-3`, `-1.25E-10`, `123456789012345678901234567890`,
	`0.000000000000000000001`, `[1,1.0,1.00,-0.0,2e0]`,
	// literals, empty and nested containers, whitespace
	`true`, `false`, `null`, `{}`, `[]`, `[{}]`, `{"a":[]}`, " \t\n\r{ \"a\" : [ 1 , 2 ] }\r\n ",
	`[[[[[]]]]]`, `{"a":{"b":{"c":{}}}}`,
	// refused
	``, ` `, `{`, `[`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `01`, `1.`, `.5`,
	`-`, `+1`, `1e`, `1e+`, `NaN`, `nul`, `True`, `[1 2]`, `{"a":1}{}`, `{} x`, `1x`, `"abc`,
	"\"\x01\"", `"\x"`, `"\u12"`, `"\u12G4"`, `{"a" 1}`, `{1:2}`, `[1]]`, `}`, "\xef\xbb\xbf{}",
}

func TestMarshalMatchesReference(t *testing.T) {
	for _, v := range vectors {
		sameAsReference(t, []byte(v))
	}
	deep := strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)
	sameAsReference(t, []byte(deep))
	sameAsReference(t, []byte("["+deep+"]")) // one level too deep
	sameAsReference(t, []byte(strings.Repeat(`{"b":1,"a":`, maxDepth-1)+"0"+strings.Repeat("}", maxDepth-1)))
}

// sameAsReference checks Marshal and Digest against referenceMarshal.
func sameAsReference(t *testing.T, in []byte) {
	t.Helper()
	want, wantErr := referenceMarshal(in)
	got, err := Marshal(in)
	name := string(in)
	if len(name) > 40 {
		name = name[:40] + "..."
	}
	switch {
	case (err == nil) != (wantErr == nil):
		t.Errorf("%q: Marshal error %v, the reference's %v", name, err, wantErr)
		return
	case err != nil:
		return
	case !bytes.Equal(got, want):
		t.Errorf("%q: Marshal gives %q, the reference %q", name, got, want)
	}
	if d, err := Digest(in); err != nil || d != SHA256(want) {
		t.Errorf("%q: Digest gives %s (%v), the reference's form hashes to %s", name, d, err, SHA256(want))
	}
}

func FuzzMarshalMatchesReference(f *testing.F) {
	for _, v := range vectors {
		f.Add([]byte(v))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		sameAsReference(t, in)
	})
}

// A text in canonical form is hashed as it stands; one that is not is
// written out first: both agree with the reference (above), and the fast
// path is taken exactly when the text is its own canonical form.
func TestCanonicalTextIsRecognised(t *testing.T) {
	for _, v := range vectors {
		want, err := referenceMarshal([]byte(v))
		if err != nil {
			continue
		}
		s := getState([]byte(v))
		err = s.p.parse()
		isCanonical := err == nil && s.p.nodes[0].canonical
		putState(s)
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if trimmed := strings.Trim(v, " \t\r\n"); isCanonical != (trimmed == string(want)) {
			t.Errorf("%q: parsed as canonical %v, but its canonical form is %q", v, isCanonical, want)
		}
	}
}
