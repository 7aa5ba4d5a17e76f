package jsonrpc

import (
	"strings"
	"testing"
)

// A key that is an envelope key but for case is refused wherever it stands
// and however it is spelled (escapes decoded); nested keys are the params'
// business.
func TestDecodeRefusesCaseFoldedEnvelopeKeys(t *testing.T) {
	for _, bad := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","METHOD":"tools/list"}`,
		`{"jsonrpc":"2.0","id":1,"\u004dethod":"tools/list"}`,
		`{"Params":{},"jsonrpc":"2.0","id":1,"method":"tools/call"}`,
	} {
		if _, err := Decode([]byte(bad)); err == nil || !strings.Contains(err.Error(), "case-sensitive") {
			t.Errorf("Decode(%s) = %v; want a case-sensitivity error", bad, err)
		}
	}
	m, err := Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"METHOD":1}}`))
	if err != nil || m.Method != "tools/call" {
		t.Fatalf("a nested key that folds to an envelope key: %v, %v", m, err)
	}
}
