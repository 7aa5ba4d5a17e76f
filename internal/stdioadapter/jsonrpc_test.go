package stdioadapter

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestParseMessage(t *testing.T) {
	for _, tc := range []struct {
		in     string
		kind   messageKind
		method string
		id     string
		bad    bool
	}{
		{in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, kind: kindRequest, method: "tools/call", id: `1`},
		{in: ` { "method" : "ping" , "id" : "a\"b" , "jsonrpc" : "2.0" } `, kind: kindRequest, method: "ping", id: `"a\"b"`},
		{in: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, kind: kindNotification, method: "notifications/initialized"},
		{in: `{"jsonrpc":"2.0","id":-7,"result":null}`, kind: kindResponse, id: `-7`},
		{in: `{"jsonrpc":"2.0","id":"x","error":{"code":1,"message":"m"}}`, kind: kindResponse, id: `"x"`},
		{in: `{"jsonrpc":"2.0","\u0069d":2,"method":"ping"}`, kind: kindRequest, method: "ping", id: `2`}, // an escaped name is the same name
		{in: `{"jsonrpc":"2.0","ID":2,"method":"ping"}`, kind: kindNotification, method: "ping"},          // names are case-exact
		{in: `{"jsonrpc":"2.0","id":1,"method":"ping"} x`, bad: true},
		{in: `{"jsonrpc":"2.0","id":1,"method":"ping","method":"other"}`, bad: true},
		{in: `{"jsonrpc":"2.0","id":true,"method":"ping"}`, bad: true},
		{in: `{"jsonrpc":"2.0","id":[1],"method":"ping"}`, bad: true},
		{in: `{"jsonrpc":"2.0","method":""}`, bad: true},
		{in: `{"jsonrpc":"2.0","method":"m","params":"s"}`, bad: true},
		{in: `{"jsonrpc":"2.0","id":1}`, bad: true},
		{in: `{"jsonrpc":"2.0","result":{}}`, bad: true},
		{in: `{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}`, bad: true},
		{in: `{"jsonrpc":2.0,"id":1,"method":"ping"}`, bad: true},
		{in: `[]`, bad: true},
		{in: `nul`, bad: true},
	} {
		m, err := parseMessage([]byte(tc.in))
		if tc.bad {
			if err == nil {
				t.Errorf("%s: accepted", tc.in)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if m.kind != tc.kind || m.method != tc.method || string(m.id) != tc.id {
			t.Errorf("%s: kind %d method %q id %s", tc.in, m.kind, m.method, m.id)
		}
	}
}

// Renaming the id and the progress token changes those bytes and no other.
func TestSpliceKeepsEverythingElse(t *testing.T) {
	in := `{ "params" : {"_meta": {"x-vendor":1.50, "progressToken" : "tok"}, "arguments":{"n":1E+2}}, "id":"client" ,"method":"tools/call","jsonrpc":"2.0"}`
	m, err := parseMessage([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	tok, ok := m.nestedField("_meta", "progressToken")
	if !ok {
		t.Fatal("progress token not found")
	}
	got := spliceAll(m.raw, edit{m.fields["id"], []byte("42")}, edit{tok, []byte("42")})
	want := `{ "params" : {"_meta": {"x-vendor":1.50, "progressToken" : 42}, "arguments":{"n":1E+2}}, "id":42 ,"method":"tools/call","jsonrpc":"2.0"}`
	if string(got) != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
	if _, ok := m.nestedField("_meta", "missing"); ok {
		t.Error("found a member that is not there")
	}
}

func TestParseBatch(t *testing.T) {
	msgs, isBatch, err := parseBatch([]byte("[{\"jsonrpc\":\"2.0\",\"method\":\"a\"},\n {\"jsonrpc\":\"2.0\",\"id\":1,\n\"method\":\"b\"}]"))
	if err != nil || !isBatch || len(msgs) != 2 || msgs[1].method != "b" {
		t.Fatalf("batch: %v %v %v", msgs, isBatch, err)
	}
	if bytes.ContainsAny(msgs[1].raw, "\r\n") {
		t.Errorf("a batch element kept a line break: %q", msgs[1].raw)
	}
}

func TestIDKey(t *testing.T) {
	if idKey([]byte(`"1"`)) == idKey([]byte(`1`)) {
		t.Error("the string id \"1\" and the number 1 are the same key")
	}
	if idKey([]byte(`"\u0041"`)) != idKey([]byte(`"A"`)) {
		t.Error("two spellings of one string id are different keys")
	}
}

// Whatever a client or server sends, parsing never panics, and a message it
// accepts keeps every byte except the id when the id is replaced.
func FuzzParseBatch(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"t"}}}`,
		`[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":"x","result":{}}]`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":[1,2]}`,
		"{\"jsonrpc\":\"2.0\",\n\"id\":1,\"method\":\"m\"}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs, _, err := parseBatch(data)
		if err != nil {
			return
		}
		for _, m := range msgs {
			m.nestedField("_meta", "progressToken")
			m.stringParam("uri")
			if m.id == nil {
				continue
			}
			out := m.withID([]byte(`"fuzz"`))
			back, err := parseMessage(out)
			if err != nil {
				t.Fatalf("after replacing the id of %s: %v", m.raw, err)
			}
			if string(back.id) != `"fuzz"` || !bytes.Equal(back.withID(m.id), m.raw) {
				t.Fatalf("replacing the id changed more than the id: %s -> %s", m.raw, out)
			}
			if !json.Valid(out) {
				t.Fatalf("invalid JSON after the id was replaced: %s", out)
			}
		}
	})
}
