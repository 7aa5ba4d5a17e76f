package jsonrpc

import (
	"encoding/json"
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
			if err == nil || !strings.Contains(err.Error(), "malformed JSON-RPC message") {
				t.Errorf("Decode(%q) = %v, want a malformed-message error", tc.in, err)
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
