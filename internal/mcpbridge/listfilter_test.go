package mcpbridge

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"

	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
)

// TestShownItems: the one per-item filter of the lists shows the items
// the view keeps, in order, each as the output pipeline cleans it (a
// token redacted), and leaves out an item the pipeline refuses (two keys
// that escaping makes one) rather than show it as the server wrote it.
// Whether a list that shows something counts as activity is
// TestOnlyAllowedRequestsAreActivity's (it needs the servers' Leases).
func TestShownItems(t *testing.T) {
	b := New(Config{Registry: routes.NewRegistry(upstream.Options{}, testr.New(t))})
	s := &routes.Server{Namespace: "ns", Name: "s"}
	token := "ghp_" + strings.Repeat("a1B2", 9)
	items := []json.RawMessage{
		json.RawMessage(`{"name":"first","description":"uses ` + token + `"}`),
		json.RawMessage(`{"name":"hidden"}`),
		json.RawMessage(`{"name":"colliding","x":{"[mcp:a:b]":"` + token + `","[mcp\\:a:b]":"\u200b"}}`),
		json.RawMessage(`{"name":"last"}`),
	}
	shown := shownItems(b, "resources/list", items, func(item json.RawMessage) (*routes.Server, []byte, bool) {
		return s, item, !strings.Contains(string(item), "hidden")
	})
	var names []string
	for _, item := range shown {
		var it struct{ Name string }
		if err := json.Unmarshal(item, &it); err != nil {
			t.Fatalf("a shown item is not JSON: %s", item)
		}
		if strings.Contains(string(item), token) {
			t.Fatalf("a shown item carries the token: %s", item)
		}
		names = append(names, it.Name)
	}
	if strings.Join(names, ",") != "first,last" {
		t.Fatalf("shown %v, want first,last: the hidden and the refused item left out, the order kept", names)
	}
}
