package client

import (
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// withMeta splices the encoded _meta into params: the caller's members keep
// their order and bytes, a _meta key the caller set wins, the others are
// added.
func TestWithMeta(t *testing.T) {
	c := &Client{meta: []rawjson.Member{
		{Key: metaClientCapabilities, Value: []byte(`{}`)},
		{Key: metaProtocolVersion, Value: []byte(`"2026-07-28"`)},
	}}
	for in, want := range map[string]string{
		``: `{"_meta":{"` + metaClientCapabilities + `":{},"` + metaProtocolVersion + `":"2026-07-28"}}`,
		`{"name":"x","arguments":{"b":1,"a":2.50}}`:                                          `{"name":"x","arguments":{"b":1,"a":2.50},"_meta":{"` + metaClientCapabilities + `":{},"` + metaProtocolVersion + `":"2026-07-28"}}`,
		`{"_meta":{"progressToken":7,"` + metaClientCapabilities + `":{"x":{}}},"name":"x"}`: `{"name":"x","_meta":{"progressToken":7,"` + metaClientCapabilities + `":{"x":{}},"` + metaProtocolVersion + `":"2026-07-28"}}`,
		// A null _meta is no _meta, as encoding/json reads it.
		`{"_meta":null,"name":"x"}`: `{"name":"x","_meta":{"` + metaClientCapabilities + `":{},"` + metaProtocolVersion + `":"2026-07-28"}}`,
	} {
		got, err := c.withMeta([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("withMeta(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{`[1]`, `{"_meta":3}`} {
		if _, err := c.withMeta([]byte(bad)); err == nil || !strings.Contains(err.Error(), "not a JSON object") {
			t.Errorf("withMeta(%s): %v; want an error saying it is not an object", bad, err)
		}
	}
}
