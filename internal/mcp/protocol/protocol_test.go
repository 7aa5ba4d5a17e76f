package protocol

import "testing"

func TestRequestName(t *testing.T) {
	for _, tc := range []struct {
		method, params, want string
	}{
		{"tools/call", `{"name":"echo","arguments":{"name":"not this"}}`, "echo"},
		{"prompts/get", `{"name":"greet"}`, "greet"},
		{"resources/read", `{"uri":"file:///a","name":"not this"}`, "file:///a"},
		{"resources/read", `{"name":"no uri"}`, ""},
		{"tools/list", `{"name":"x"}`, ""},
		{"tools/call", `{"name":7}`, ""},
	} {
		if got := RequestName(tc.method, []byte(tc.params)); got != tc.want {
			t.Errorf("RequestName(%s, %s) = %q, want %q", tc.method, tc.params, got, tc.want)
		}
	}
}
