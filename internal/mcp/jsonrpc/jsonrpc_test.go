package jsonrpc

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDecodeClassifies(t *testing.T) {
	cases := []struct {
		in                     string
		resp, req, notif, fail bool
	}{
		{in: `{"jsonrpc":"2.0","id":1,"result":{}}`, resp: true},
		{in: `{"jsonrpc":"2.0","id":"a","error":{"code":-32601,"message":"x"}}`, resp: true},
		{in: `{"jsonrpc":"2.0","id":7,"method":"ping"}`, req: true},
		{in: `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`, notif: true},
		{in: `{"jsonrpc":"2.0","id":null,"method":"x"}`, notif: true},
		{in: ``, fail: true},
		{in: `[]`, fail: true},
		{in: `{"jsonrpc":"1.0","id":1,"result":{}}`, fail: true},
		{in: `{"jsonrpc":"2.0","id":1}`, fail: true},
		{in: `{"jsonrpc":"2.0","id":1,"result":{`, fail: true},
		{in: `{"jsonrpc":"2.0","id":1,"error":"text"}`, fail: true},
		{in: `{"jsonrpc":"2.0","ID":1,"result":{}}`, fail: true},
		{in: `{"jsonrpc":"2.0","method":"a","Method":"b"}`, fail: true},
	}
	for _, tc := range cases {
		m, err := Decode([]byte(tc.in))
		if tc.fail {
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "malformed JSON-RPC message") {
				t.Errorf("Decode(%q) = %v, want a malformed-message error (ErrMalformed)", tc.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Decode(%q): %v", tc.in, err)
			continue
		}
		if m.IsResponse() != tc.resp || m.IsRequest() != tc.req || m.IsNotification() != tc.notif {
			t.Errorf("Decode(%q): response=%v request=%v notification=%v", tc.in, m.IsResponse(), m.IsRequest(), m.IsNotification())
		}
	}
}

func TestPendingDeliversOnlyToTheCaller(t *testing.T) {
	var p Pending
	a, b := NewRequest(0, "x", nil), NewRequest(0, "y", nil)
	cha, chb := p.Add(a), p.Add(b)
	if string(a.ID) == string(b.ID) {
		t.Fatal("two calls got the same id")
	}
	if p.Deliver(&Message{ID: json.RawMessage(`"invented"`), Result: json.RawMessage(`{}`)}) {
		t.Error("a response to an id nobody sent was delivered")
	}
	if !p.Deliver(&Message{ID: b.ID, Result: json.RawMessage(`{}`)}) {
		t.Fatal("response to b not delivered")
	}
	select {
	case <-cha:
		t.Fatal("a got b's response")
	case m := <-chb:
		if string(m.ID) != string(b.ID) {
			t.Fatalf("b got %s", m.ID)
		}
	}
	p.Remove(a.ID)
	if p.Deliver(&Message{ID: a.ID, Result: json.RawMessage(`{}`)}) {
		t.Error("a late response to a removed call was delivered")
	}
}

// FuzzDecode: any bytes from a server give a message or an error, never a
// panic, and a decoded message is exactly one of the three kinds.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`, `{"jsonrpc":"2.0","method":"m"}`,
		`{"jsonrpc":"2.0","id":[1],"method":"m","params":[]}`, `{"jsonrpc":"2.0","id":1,"result":null}`,
		`{"JSONRPC":"2.0","ID":1,"RESULT":{}}`, "\x00", `{"jsonrpc":"2.0","id":1,"error":{"code":1.5}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			return
		}
		kinds := 0
		for _, k := range []bool{m.IsResponse(), m.IsRequest(), m.IsNotification()} {
			if k {
				kinds++
			}
		}
		if kinds != 1 {
			t.Fatalf("%q decoded to %d kinds of message", data, kinds)
		}
	})
}

// Decode reads the envelope by hand: it must make of each member what
// encoding/json makes of it (repeated keys, nulls, escapes, whitespace),
// and its raw members must not change when the caller reuses its buffer.
func TestDecodeReadsWhatEncodingJSONReads(t *testing.T) {
	for _, in := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`,
		` { "jsonrpc" : "2.0" , "id" : "a\"b" , "method" : "tools\/call" , "params" : { "x" : [1, 2] } } `,
		`{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}`,
		`{"jsonrpc":"2.0","id":1,"method":"x","params":null}`,
		`{"jsonrpc":"2.0","id":1,"result":null}`,
		`{"jsonrpc":"2.0","id":1,"result":{},"error":null}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m","data":{"k":"v"}}}`,
		`{"jsonrpc":"\u0032.0","method":"notifications/message","extra":{"id":2}}`,
		`{"jsonrpc":"2.0","method":null,"id":1,"result":[]}`,
		`{"jsonrpc":"2.0","id":-1.5e3,"method":"m\u00e9thode"}`,
		"{\"jsonrpc\":\"2.0\",\"method\":\"a\xffb\xfe\xfe\"}",
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x","data":5},"error":{"code":2}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"},"error":null,"error":{"code":2}}`,
	} {
		var want Message
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("encoding/json: %q: %v", in, err)
		}
		if string(want.ID) == "null" {
			want.ID = nil
		}
		buf := []byte(in)
		got, err := Decode(buf)
		if err != nil {
			t.Errorf("Decode(%q): %v", in, err)
			continue
		}
		for i := range buf {
			buf[i] = 'x' // the caller reuses its buffer
		}
		wantJSON, _ := json.Marshal(&want)
		gotJSON, _ := json.Marshal(got)
		if string(gotJSON) != string(wantJSON) {
			t.Errorf("Decode(%q) = %s, encoding/json reads %s", in, gotJSON, wantJSON)
		}
	}
	for _, in := range []string{
		`{"jsonrpc":2,"id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":7}`,
		`{"jsonrpc":"2.0","id":1,"result":{}} x`,
		`{"jsonrpc":"2.0","id":1,"result":{},}`,
	} {
		if _, err := Decode([]byte(in)); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "malformed JSON-RPC message") {
			t.Errorf("Decode(%q) = %v, want a malformed-message error (ErrMalformed)", in, err)
		}
	}
}

// Encode writes what json.Marshal writes (but for HTML escaping, which no
// message here has), and refuses a raw member that is not JSON.
func TestEncodeWritesWhatMarshalWrites(t *testing.T) {
	for _, m := range []*Message{
		NewRequest(7, "tools/call", json.RawMessage(`{ "name" : "echo",
			"arguments": {"text":"a\"b\u00e9"} }`)),
		NewNotification("notifications/progress", nil),
		NewResult(json.RawMessage(`"id-1"`), json.RawMessage(`{"content":[]}`)),
		{JSONRPC: Version, ID: json.RawMessage(`null`), Error: &Error{Code: -32600, Message: "bad \"thing\"\n", Data: json.RawMessage(`{"reason": "x"}`)}},
		NewErrorResponse(json.RawMessage(`3`), CodeInternalError, "no data"),
	} {
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Encode(m)
		if err != nil || string(got) != string(want) {
			t.Errorf("Encode = %s, %v; json.Marshal writes %s", got, err, want)
		}
	}
	for _, m := range []*Message{
		NewResult(json.RawMessage(`1`), json.RawMessage(`{"content":`)),
		NewRequest(1, "x", json.RawMessage(`{} {}`)),
		{JSONRPC: Version, ID: json.RawMessage(`1`), Error: &Error{Data: json.RawMessage(`nope`)}},
	} {
		if out, err := Encode(m); err == nil {
			t.Errorf("Encode wrote %s from a raw member that is not JSON", out)
		}
	}
}
