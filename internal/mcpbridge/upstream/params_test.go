package upstream

import "testing"

func TestWithProgressToken(t *testing.T) {
	for in, want := range map[string]string{
		`{"name":"x","arguments":{}}`:                                         `{"name":"x","arguments":{},"_meta":{"progressToken":"bridge-1"}}`,
		`{"name":"x","_meta":{"progressToken":7,"trace":"a"},"arguments":{}}`: `{"name":"x","arguments":{},"_meta":{"trace":"a","progressToken":"bridge-1"}}`,
	} {
		got, err := withProgressToken([]byte(in), `"bridge-1"`)
		if err != nil || string(got) != want {
			t.Errorf("withProgressToken(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	if _, err := withProgressToken([]byte(`[1]`), `"t"`); err == nil {
		t.Error("params that are not an object must be an error")
	}
}
