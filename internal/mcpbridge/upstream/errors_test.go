package upstream

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// A failure is classed by what the error is, never by its text: each
// answer a real server cannot be made to give on demand comes from a front
// in front of one, for tools/call alone (the dial goes through).
func TestFailureClasses(t *testing.T) {
	server, _ := dualEraServer(t)
	big := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 8<<10) + `"}]}}`
	for _, tc := range []struct {
		name        string
		contentType string
		status      int
		body        string
		want        string
	}{
		{"not JSON", "application/json", 200, "not json", ReasonInvalid},
		{"not a JSON-RPC message", "application/json", 200, `{"id":1,"result":{}}`, ReasonInvalid},
		{"another message than the answer", "application/json", 200, `{"jsonrpc":"2.0","method":"notifications/message","params":{}}`, ReasonInvalid},
		{"a body over the bound", "application/json", 200, big, ReasonInvalid},
		{"an event over the bound", "text/event-stream", 200, "event: message\ndata: " + big + "\n\n", ReasonInvalid},
		{"a 2xx that is not MCP", "text/plain", 200, "hello", ReasonInvalid},
		{"a result without an id", "application/json", 200, `{"jsonrpc":"2.0","result":{"content":[]}}`, ReasonInvalid},
		{"a body that breaks off", "application/json", 200, `{"jsonrpc":"2.0","id":1,"result":{"con`, ReasonInvalid},
		// The text of a proxy's error page says nothing of the class.
		{"a proxy's 502 naming a malformed JSON-RPC message", "text/plain", 502, "malformed JSON-RPC message (bound maxMessageBytes)", ReasonUnstable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			front := faultyFront(t, server, func(w http.ResponseWriter, _ *http.Request, body []byte) bool {
				var m struct{ Method string }
				if json.Unmarshal(body, &m) != nil || m.Method != "tools/call" {
					return false
				}
				w.Header().Set("Content-Type", tc.contentType)
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
				return true
			})
			c := New(Target{Namespace: "ns", Name: "s", URL: front}, Options{MaxMessageBytes: 4 << 10})
			t.Cleanup(c.Close)
			_, err := c.CallTool(testkit.Context(t), json.RawMessage(`{"name":"echo","arguments":{"text":"hi"}}`), CallHooks{})
			var ue *Error
			if !errors.As(err, &ue) || ue.Reason != tc.want {
				t.Fatalf("tools/call answered with %s: %v, want reason %s", tc.name, err, tc.want)
			}
		})
	}
}
