package mcpbridge

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
)

// A definition the output pipeline refuses is left out of a listing, never
// shown as the server wrote it: two keys that escaping makes one would
// otherwise carry a token and invisible text past redaction.
func TestListedToolLeavesOutWhatThePipelineRefuses(t *testing.T) {
	b := &Bridge{}
	srv := &routes.Server{Namespace: "ns", Name: "s"}
	token := "ghp_" + strings.Repeat("a1B2", 9)
	clean := &routes.Tool{Server: srv, Name: "mcp.s.ok", Upstream: "ok",
		Definition: json.RawMessage(`{"name":"ok","description":"uses ` + token + `","inputSchema":{"type":"object"}}`)}
	item, ok := b.listedTool(clean, "")
	if !ok || strings.Contains(string(item), token) || !strings.Contains(string(item), `"mcp.s.ok"`) {
		t.Fatalf("a definition the pipeline takes: %s (listed %v), want it listed, renamed and redacted", item, ok)
	}
	colliding := &routes.Tool{Server: srv, Name: "mcp.s.bad", Upstream: "bad",
		Definition: json.RawMessage(`{"name":"bad","inputSchema":{"[mcp:a:b]":"` + token + `","[mcp\\:a:b]":"\u200b"}}`)}
	if item, ok := b.listedTool(colliding, ""); ok || item != nil {
		t.Fatalf("a definition the pipeline refuses was listed: %s", item)
	}
}

// The API server's error in an unrecorded use's answer is redacted like
// every other text that leaves the bridge.
func TestUnrecordedUseRedactsTheAPIError(t *testing.T) {
	token := "ghp_" + strings.Repeat("a1B2", 9)
	e := unrecordedUse(errors.New("while recording a one-time use: Authorization: Bearer " + token))
	if strings.Contains(e.msg, token) || !strings.Contains(e.msg, "the request was not run") {
		t.Fatalf("unrecorded use answered %q: want the token redacted and the verdict kept", e.msg)
	}
}
