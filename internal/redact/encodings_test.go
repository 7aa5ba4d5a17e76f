package redact

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// encodings are the forms a server may print a Secret value in, each as a
// function of the value and an alignment (how many bytes precede it inside
// a base64-encoded text, such as "user:" before a Basic credential's
// password). Each returns the part of the form that depends on the value.
var encodings = []func(v string, align int) string{
	func(v string, _ int) string { return v },
	func(v string, _ int) string { return strings.ToUpper(v) },
	func(v string, _ int) string { return strings.ToLower(v) },
	func(v string, _ int) string { return hex.EncodeToString([]byte(v)) },
	func(v string, _ int) string { return strings.ToUpper(hex.EncodeToString([]byte(v))) },
	func(v string, align int) string { return base64Part(base64.StdEncoding, v, align) },
	func(v string, align int) string { return base64Part(base64.URLEncoding, v, align) },
	func(v string, _ int) string { return url.QueryEscape(v) },
	func(v string, _ int) string { return url.PathEscape(v) },
	func(v string, _ int) string { return lowerPercentHex(url.QueryEscape(v)) },
	func(v string, _ int) string { return percentEscape(v, "-_.~/") },
	func(v string, _ int) string { return percentEscape(v, "-_.~!*'()") },
	func(v string, _ int) string { b, _ := json.Marshal(v); return string(b[1 : len(b)-1]) },
}

// base64Part encodes v after align bytes of other text and returns the
// characters that hold v's bits alone.
func base64Part(enc *base64.Encoding, v string, align int) string {
	k := align % 3
	e := enc.EncodeToString([]byte(strings.Repeat("u", k) + v + "tail"))
	return e[(8*k+5)/6 : 8*(k+len(v))/6]
}

// FuzzEncodedSecretNeverLeaks puts a Secret value, in one of its encodings
// and alignments, between arbitrary texts: the encoded value never
// survives.
func FuzzEncodedSecretNeverLeaks(f *testing.F) {
	f.Add("hunter2-Correct!Horse", uint8(0), uint8(0), "password: ", " end")
	f.Add("a/b!c(d)e*f'g h+Xk9", uint8(11), uint8(1), "?p=", "&q=1")
	f.Add("Zx9pQ4mLw2Tr8\n", uint8(5), uint8(2), "Authorization: Basic ", "")
	f.Add("<&>\"ünïcode\\", uint8(12), uint8(0), `{"k":"`, `"}`)
	f.Fuzz(func(t *testing.T, value string, which, align uint8, before, after string) {
		if len(value) < MinSecretLen || len(value) > 200 || strings.TrimSpace(value) != value && len(strings.TrimSpace(value)) < MinSecretLen {
			return
		}
		if !utf8.ValidString(value) {
			return // JSON would write U+FFFD in its place: another value
		}
		enc := encodings[int(which)%len(encodings)](value, int(align))
		if len(enc) < MinSecretLen {
			return
		}
		out := New(value).String(before+enc+after, nil)
		if strings.Contains(out, enc) {
			t.Fatalf("encoding %d of %q survived: %q", int(which)%len(encodings), value, out)
		}
	})
}
