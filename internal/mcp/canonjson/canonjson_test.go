package canonjson

import (
	"runtime"
	"strings"
	"testing"
)

func TestMarshalSortsKeysAndDropsWhitespace(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"nested keys", `{ "b": 1, "a": {"d": [1, 2.50, "x"], "c": null} }`, `{"a":{"c":null,"d":[1,2.50,"x"]},"b":1}`},
		{"escapes unified", `"\u0041<\/>"`, `"A</>"`},
		{"unicode kept", `{"é":"日本"}`, `{"é":"日本"}`},
		{"bools", `[true,false]`, `[true,false]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Marshal([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestDigestIgnoresKeyOrderAndFormatting(t *testing.T) {
	a, err := Digest([]byte(`{"type":"object","properties":{"x":{"type":"string"},"y":{"type":"number"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Digest([]byte("{\n  \"properties\": {\"y\": {\"type\": \"number\"}, \"x\": {\"type\": \"string\"}},\n  \"type\": \"object\"\n}"))
	if a != b {
		t.Fatalf("digests differ: %s vs %s", a, b)
	}
	c, _ := Digest([]byte(`{"type":"object","properties":{"x":{"type":"string"}}}`))
	if c == a {
		t.Fatal("a different schema has the same digest")
	}
	if len(a) != len("sha256:")+64 {
		t.Fatalf("digest %q is not sha256:<64 hex>", a)
	}
}

func TestMarshalRejectsMalformed(t *testing.T) {
	for _, in := range []string{``, `{`, `{"a":1} {"b":2}`, `nul`, `{"a":}`} {
		if _, err := Marshal([]byte(in)); err == nil {
			t.Errorf("Marshal(%q) accepted malformed JSON", in)
		}
	}
}

// The arguments' digest binds the arguments, not their spelling, and no
// arguments are {}.
func TestArgumentsDigest(t *testing.T) {
	a, _ := ArgumentsDigest([]byte(`{"a":1,"b":"x"}`))
	b, _ := ArgumentsDigest([]byte("{ \"b\": \"x\",\n \"a\": 1 }"))
	other, _ := ArgumentsDigest([]byte(`{"a":2,"b":"x"}`))
	none, _ := ArgumentsDigest(nil)
	null, _ := ArgumentsDigest([]byte(`null`))
	empty, _ := ArgumentsDigest([]byte(`{}`))
	if a != b || a == other || none != empty || null != empty || !strings.HasPrefix(a, "sha256:") {
		t.Errorf("digests: %s %s %s, none %s null %s empty %s", a, b, other, none, null, empty)
	}
}

// A text's colons and commas inside strings do not size the parse: a 4 MiB
// string of colons reserved 32 times its size before (a server's tool
// schema or an agent's arguments could make the digest take gigabytes).
func TestDigestMemoryIsBoundedByTheText(t *testing.T) {
	text := []byte(`{"a":"` + strings.Repeat(":", 4<<20) + `"}`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := Digest(text); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 4*uint64(len(text)) {
		t.Fatalf("digest of a %d-byte text allocated %d bytes, more than 4 times its size", len(text), got)
	}
}
