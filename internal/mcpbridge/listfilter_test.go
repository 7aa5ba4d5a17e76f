package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
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

// collidingMeta is a _meta the output pipeline refuses: two keys that
// escaping makes one, with a token and invisible text in their values.
func collidingMeta() mcp.Meta {
	return mcp.Meta{"[mcp:a:b]": "ghp_" + strings.Repeat("a1B2", 9), `[mcp\:a:b]`: "\u200b"}
}

// refusingServer serves, with the official Go SDK, a tool, a resource and
// a prompt named "odd" whose definitions the output pipeline refuses (their
// _meta is collidingMeta), and, when clean, one of each named "ok" that it
// takes.
func refusingServer(t *testing.T, clean bool) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "refusing", Version: "1"}, nil)
	names := []string{"odd"}
	if clean {
		names = append(names, "ok")
	}
	for _, name := range names {
		var meta mcp.Meta
		if name == "odd" {
			meta = collidingMeta()
		}
		s.AddTool(&mcp.Tool{Name: name, Meta: meta, InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil
		})
		uri := "file:///" + name + ".txt"
		s.AddResource(&mcp.Resource{URI: uri, Name: name, Meta: meta}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: name}}}, nil
		})
		s.AddPrompt(&mcp.Prompt{Name: name, Meta: meta}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: name}}}}, nil
		})
	}
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestListsLeaveOutWhatThePipelineRefuses: through the bridge, each list
// (tools/list, resources/list, prompts/list) of a real server leaves out
// the item whose definition the output pipeline refuses and shows the
// others.
func TestListsLeaveOutWhatThePipelineRefuses(t *testing.T) {
	pub := bridgetest.Published(t, "tools", "refusing", refusingServer(t, true), v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "callers", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.refusing.*"))
	pol.Spec.Resources = []v1alpha1.ResourceRule{{Servers: []string{"refusing"}, Decision: "allow"}}
	pol.Spec.Prompts = []v1alpha1.PromptRule{{Prompts: []string{"mcp.refusing.*"}, Decision: "allow"}}
	h := newHarness(t, []v1alpha1.MCPServer{pub}, []v1alpha1.ToolPolicy{pol}, nil)
	alice := connectAnswering(t, h.url+"/mcp", "alice-token")
	if c, err := h.b.cfg.Registry.Catalog(testkit.Context(t), "refusing"); err != nil || c.ByName["odd"] == nil {
		t.Fatalf("the bridge's catalog of the server: %+v, %v; want the odd tool in it", c, err)
	}
	for _, list := range []struct{ method, key, field string }{
		{"tools/list", "tools", "name"},
		{"resources/list", "resources", "uri"},
		{"prompts/list", "prompts", "name"},
	} {
		raw, err := alice.Call(testkit.Context(t), list.method, nil)
		if err != nil {
			t.Fatalf("%s: %v", list.method, err)
		}
		var res map[string][]map[string]any
		_ = json.Unmarshal(raw, &res)
		var shown []string
		for _, item := range res[list.key] {
			name, _ := item[list.field].(string)
			shown = append(shown, name)
		}
		if len(shown) != 1 || !strings.Contains(shown[0], "ok") || slices.ContainsFunc(shown, func(n string) bool { return strings.Contains(n, "odd") }) {
			t.Errorf("%s shows %q: want the ok item only, the refused one left out", list.method, shown)
		}
	}
	// A bare name's refusal names the full name it may have meant only for
	// a tool the lists show.
	for bare, want := range map[string]string{"ok": `["mcp.refusing.ok"]`, "odd": "null"} {
		_, err := alice.Call(testkit.Context(t), "tools/call", json.RawMessage(`{"name":"`+bare+`","arguments":{}}`))
		var rpcErr *jsonrpc.Error
		if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams {
			t.Fatalf("tools/call %q: %v, want unknown tool", bare, err)
		}
		if got := string(rawjson.Get(rpcErr.Data, "candidates")); got != want && !(want == "null" && got == "") {
			t.Errorf("tools/call %q: candidates %s, want %s (%s)", bare, got, want, rpcErr.Message)
		}
		if bare == "odd" && strings.Contains(rpcErr.Message, "mcp.refusing.odd") {
			t.Errorf("tools/call odd: the refusal names the tool lists leave out: %s", rpcErr.Message)
		}
	}
}
