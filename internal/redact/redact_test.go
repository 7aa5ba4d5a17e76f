package redact

import (
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// Fake credentials of the real shapes. The AWS pair is the one AWS's own
// documentation uses as an example.
var (
	ghp     = "ghp_" + strings.Repeat("A1b2C3", 6)
	pat     = "github_pat_11ABCDEFG0" + strings.Repeat("x", 12) + "_" + strings.Repeat("Yz9", 19)
	openai  = "sk-" + strings.Repeat("Ab3", 16)
	project = "sk-proj-" + strings.Repeat("Q_w-E", 10)
	ant     = "sk-ant-api03-" + strings.Repeat("Zz9-", 20)
	akia    = "AKIAIOSFODNN7EXAMPLE"
	awsKey  = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	slack   = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
	jwtTok  = b64url(`{"alg":"HS256","typ":"JWT"}`) + "." + b64url(`{"sub":"1234567890","name":"x"}`) + "." + b64url("signature-bytes-0123456789")
	pemKey  = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq\nAbCdEf==\n-----END RSA PRIVATE KEY-----"
)

func b64url(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestShapes(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"openai", "key=" + openai + " end", "key=[REDACTED:openai-key] end"},
		{"openai project", project, "[REDACTED:openai-key]"},
		{"anthropic", "ANTHROPIC_API_KEY=" + ant, "ANTHROPIC_API_KEY=[REDACTED:anthropic-key]"},
		{"ghp", "token " + ghp + ".", "token [REDACTED:github-token]."},
		{"gho", "gho_" + strings.Repeat("k", 36), "[REDACTED:github-token]"},
		{"ghs", "x:ghs_" + strings.Repeat("K9", 18), "x:[REDACTED:github-token]"},
		{"ghu", "ghu_" + strings.Repeat("u", 36), "[REDACTED:github-token]"},
		{"ghr", "ghr_" + strings.Repeat("r", 36), "[REDACTED:github-token]"},
		{"github pat", "GITHUB_TOKEN=" + pat + "\n", "GITHUB_TOKEN=[REDACTED:github-pat]\n"},
		{"akia", "id " + akia + " ok", "id [REDACTED:aws-access-key-id] ok"},
		{"asia", `"ASIAY34FZKBOKMUTVV7A"`, `"[REDACTED:aws-access-key-id]"`},
		{"aws secret env", "AWS_SECRET_ACCESS_KEY=" + awsKey + "\nHOME=/root", "AWS_SECRET_ACCESS_KEY=[REDACTED:aws-secret-access-key]\nHOME=/root"},
		{"aws secret ini", "aws_secret_access_key = " + awsKey, "aws_secret_access_key = [REDACTED:aws-secret-access-key]"},
		{"aws secret json text", `{"SecretAccessKey": "` + awsKey + `"}`, `{"SecretAccessKey": "[REDACTED:aws-secret-access-key]"}`},
		{"slack", "SLACK=" + slack, "SLACK=[REDACTED:slack-token]"},
		{"slack user", "xoxp-" + strings.Repeat("9", 30), "[REDACTED:slack-token]"},
		{"jwt", "cookie: session=" + jwtTok + "; Path=/", "cookie: session=[REDACTED:jwt]; Path=/"},
		{"pem", "key:\n" + pemKey + "\nrest", "key:\n[REDACTED:private-key]\nrest"},
		{"pem openssh", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----", "[REDACTED:private-key]"},
		{"pem cut short", "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEI", "[REDACTED:private-key]"},
		{"authorization bearer", "Authorization: Bearer abc", "Authorization: Bearer [REDACTED:bearer]"},
		{"bearer json", `"authorization":"bearer eyJhbGciOi.short"`, `"authorization":"bearer [REDACTED:bearer]"`},
		{"bearer free text", "use bearer 9f8e7d6c5b4a3f2e1d0c", "use bearer [REDACTED:bearer]"},
		{"authorization basic", "Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: Basic [REDACTED:authorization]"},
		{"two in one", ghp + " and " + akia, "[REDACTED:github-token] and [REDACTED:aws-access-key-id]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c Counts
			if got := Shapes().String(tc.in, &c); got != tc.want {
				t.Fatalf("String(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			if c.Total() != strings.Count(tc.want, "[REDACTED:") {
				t.Fatalf("counts %v, want %d redactions", c.Map(), strings.Count(tc.want, "[REDACTED:"))
			}
		})
	}
}

func TestOrdinaryTextSurvives(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	img := make([]byte, 64<<10)
	for i := range img {
		img[i] = byte(rng.Uint32())
	}
	keep := []string{
		"skeleton", "task-123", "task-" + strings.Repeat("a", 30), "sk-learn is a library",
		"ghp_short", "github_pat_", "AKIA", "AKIAIOSFODNN7EXAMPLEX", "xAKIAIOSFODNN7EXAMPLE",
		"the bearer of bad news", "bearer instrument", "Bearer token", "the authorization server issues tokens",
		"authorization is needed", "aws_secret_access_key is rotated yearly",
		"eyJhbGciOiJIUzI1NiJ9 alone", "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
		"-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----", "xoxb-1",
		"日本語のテキスト", "", "s",
		base64.StdEncoding.EncodeToString(img),    // an image blob
		base64.RawURLEncoding.EncodeToString(img), // and in the URL alphabet
	}
	for _, s := range keep {
		var c Counts
		if got := Shapes().String(s, &c); got != s || c.Total() != 0 {
			t.Errorf("String changed %.60q: %v", s, c.Map())
		}
	}
}

// Escapers other than Go's, and a value read from a file with its newline.
func TestSecretValuesOtherEscapers(t *testing.T) {
	const value = "a/b!c(d)e*f'g h+Xk9"
	r := New(value, "Zx9pQ4mLw2Tr8\n")
	for in, want := range map[string]string{
		"?p=a/b%21c%28d%29e%2Af%27g%20h%2BXk9&q": "?p=[REDACTED:secret-urlencoded]&q", // Python's quote
		"?p=a%2Fb!c(d)e*f'g%20h%2BXk9&q":         "?p=[REDACTED:secret-urlencoded]&q", // encodeURIComponent
		"?p=a%2fb!c(d)e*f'g%20h%2bXk9&q":         "?p=[REDACTED:secret-urlencoded]&q", // in lower case
		"password is Zx9pQ4mLw2Tr8.":             "password is [REDACTED:secret].",
	} {
		if got := r.String(in, nil); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSecretValues(t *testing.T) {
	const value = "hunter2-Correct!Horse"
	r := New(value, "short", "")
	basic := base64.StdEncoding.EncodeToString([]byte("alice:" + value))
	cases := []struct {
		name, in, want string
	}{
		{"exact", "password is " + value + ".", "password is [REDACTED:secret]."},
		{"twice", value + value, "[REDACTED:secret][REDACTED:secret]"},
		{"base64", base64.StdEncoding.EncodeToString([]byte(value)), "[REDACTED:secret-base64]"},
		{"base64 url", base64.RawURLEncoding.EncodeToString([]byte(value)), "[REDACTED:secret-base64]"},
		{"query escaped", "?p=" + url.QueryEscape(value), "?p=[REDACTED:secret-urlencoded]"},
		{"path escaped", "/x/" + url.PathEscape(value), "/x/[REDACTED:secret-urlencoded]"},
		{"short values ignored", "short", "short"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := r.String(tc.in, nil)
			if got != tc.want {
				t.Fatalf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	// Inside a longer base64 text at each alignment: Basic credentials.
	for _, user := range []string{"al:", "alice:", "alice2:"} {
		enc := base64.StdEncoding.EncodeToString([]byte(user + value))
		if got := r.String(enc, nil); !strings.Contains(got, "[REDACTED:secret-base64]") {
			t.Errorf("%s: the value inside base64 %q survived: %q", user, enc, got)
		}
	}
	if got := r.String("Authorization: Basic "+basic, nil); strings.Contains(got, basic) {
		t.Errorf("Basic credential survived: %q", got)
	}
}

func TestJSON(t *testing.T) {
	r := New("my-db-password-1")
	in := `{"text":"token \u0067hp_` + strings.Repeat("A1b2C3", 6) + `","n":1.50,"` + akia + `":true,` +
		`"creds":{"aws_secret_access_key":"` + awsKey + `","other":["my-db-password-1",null]},"keep":"<b>&</b>"}`
	if !json.Valid([]byte(in)) {
		t.Fatal("test input is not JSON")
	}
	var c Counts
	out, err := r.JSON([]byte(in), &c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"text":"token [REDACTED:github-token]","n":1.50,"[REDACTED:aws-access-key-id]":true,` +
		`"creds":{"aws_secret_access_key":"[REDACTED:aws-secret-access-key]","other":["[REDACTED:secret]",null]},"keep":"<b>&</b>"}`
	if string(out) != want {
		t.Fatalf("JSON\n got %s\nwant %s", out, want)
	}
	m := c.Map()
	if m["github-token"] != 1 || m["aws-access-key-id"] != 1 || m["aws-secret-access-key"] != 1 || m["secret"] != 1 {
		t.Fatalf("counts %v", m)
	}
	same := []byte(`{"a":"plain text","b":[1,2,{"c":"d"}]}`)
	if out, _ := r.JSON(same, nil); &out[0] != &same[0] {
		t.Fatal("JSON copied a document it did not change")
	}
}

// clean, the one-pass shortcut of JSON, never passes a document the walk
// over each string would change.
func TestCleanAgreesWithTheWalk(t *testing.T) {
	r := New("my-db-password-1")
	for _, doc := range []string{
		`{"a":"plain"}`, `{"k":"` + ghp + `"}`, `["my-db-password-1"]`,
		"{\"aws_secret_access_key\":\n    \"" + awsKey + "\"}", `{"SECRETACCESSKEY": "` + awsKey + `"}`,
		`{"x":"Authorization"}`, `{"authorization":"Bearer abc"}`, `["bearer", "9f8e7d6c5b4a3f2e1d0c"]`,
	} {
		walked, err := rawjsonWalk(r, []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if r.clean([]byte(doc)) && walked != doc {
			t.Errorf("clean passed %s, which the walk redacts to %s", doc, walked)
		}
	}
}

// rawjsonWalk is JSON without the shortcut.
func rawjsonWalk(r *Redactor, doc []byte) (string, error) {
	out, err := rawjson.RewriteStrings(doc, func(s, key string, isKey bool) (string, bool) {
		if !isKey && isAWSSecretField(key) && len(s) >= 16 && run(s, 0, isAWSSecretByte) == len(s) {
			return AWSSecretAccessKey.Replacement(), true
		}
		red := r.String(s, nil)
		return red, red != s
	})
	return string(out), err
}

func FuzzJSONNeverLeaksSecret(f *testing.F) {
	const secret = "Zq8!xP2#secret-value"
	for _, s := range []string{`{"a":"b"}`, `["` + secret + `"]`, `{"` + secret + `":1}`, `"x` + secret + `y"`} {
		f.Add(s)
	}
	r := New(secret)
	f.Fuzz(func(t *testing.T, doc string) {
		if !json.Valid([]byte(doc)) {
			return
		}
		if walked, err := rawjsonWalk(r, []byte(doc)); err == nil && r.clean([]byte(doc)) && walked != doc {
			t.Fatalf("clean passed %s, which the walk redacts to %s", doc, walked)
		}
		out, err := r.JSON([]byte(doc), nil)
		if err != nil {
			t.Fatalf("JSON(%q): %v", doc, err)
		}
		if !json.Valid(out) {
			t.Fatalf("JSON(%q) = %q: not JSON", doc, out)
		}
		var v any
		_ = json.Unmarshal(out, &v)
		back, _ := json.Marshal(v)
		if strings.Contains(string(out), secret) || strings.Contains(decoded(v), secret) {
			t.Fatalf("the secret survived in %s", back)
		}
	})
}

// decoded joins every string of a decoded document, where an escaped secret
// would show.
func decoded(v any) string {
	switch v := v.(type) {
	case string:
		return v + "\x00"
	case []any:
		var sb strings.Builder
		for _, e := range v {
			sb.WriteString(decoded(e))
		}
		return sb.String()
	case map[string]any:
		var sb strings.Builder
		for k, e := range v {
			sb.WriteString(k + "\x00" + decoded(e))
		}
		return sb.String()
	}
	return ""
}

// FuzzStringNeverLeaks puts a server's Secret value and a token of a known
// shape into arbitrary text: neither survives String, whatever surrounds it.
// make test runs it for a few seconds beyond its committed corpus.
func FuzzStringNeverLeaks(f *testing.F) {
	const secret = "Zq8!xP2#secret-value"
	const token = "ghp_Q7vK2mX9pL4wR8tY1nB6cZ3fH5jD0sA2gE7u"
	for _, s := range [][2]string{{"", ""}, {"password=", "\n"}, {`{"k":"`, `"}`}, {"x", "y"}, {"ghp_", "ghp_"}, {"\u200b", "\\u0041"}} {
		f.Add(s[0], s[1])
	}
	r := New(secret)
	f.Fuzz(func(t *testing.T, before, after string) {
		for _, v := range []string{secret, token} {
			if out := r.String(before+v+after, nil); strings.Contains(out, v) {
				t.Fatalf("%q survived in %q", v, out)
			}
		}
	})
}

// However many Secret values a Redactor holds, the trigram test the shapes
// and rules share stays as it is without them (so its throughput does): the
// values' forms have their own index. And they are all still found.
func TestManySecretValuesKeepTheSharedTrigrams(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	values := make([]string, 3000)
	for i := range values {
		values[i] = randomOf(rng, alnum, 20)
	}
	r := New(values...)
	if r.grams != Shapes().grams || r.own != Shapes().own {
		t.Fatal("the Secret values' forms changed the shared trigram or pair set")
	}
	for _, v := range values[:50] {
		if got := r.String("x "+v+" y", nil); got != "x [REDACTED:secret] y" {
			t.Fatalf("%q: %q", v, got)
		}
	}
}

func TestWithAddsValuesAndKeepsTheOriginal(t *testing.T) {
	const shared, callers = "shared-secret-value-0123", "callers-own-value-4567"
	base := New(shared)
	both := base.With(callers)
	text := "a " + shared + " and " + callers
	var c Counts
	if got := both.String(text, &c); strings.Contains(got, shared) || strings.Contains(got, callers) {
		t.Fatalf("With's redactor left a value: %q", got)
	}
	if got := base.String(text, &c); !strings.Contains(got, callers) || strings.Contains(got, shared) {
		t.Fatalf("the original redactor changed: %q", got)
	}
}
