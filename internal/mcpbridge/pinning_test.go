package mcpbridge

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// TestPinnedCatalog: a tool whose live definition no longer has the digest
// the controller published, or that status does not publish at all, is
// neither listed nor callable.
func TestPinnedCatalog(t *testing.T) {
	up := testpeers.GoEverything(t, false)
	server := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	var kept []v1alpha1.ToolStatus
	for _, tool := range server.Status.Tools {
		switch tool.UpstreamName {
		case "test_image_content":
			tool.SchemaDigest = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
		case "test_audio_content":
			continue // not published
		}
		kept = append(kept, tool)
	}
	server.Status.Tools = kept
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.*"))
	h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, nil)
	c := h.connect(t, "alice-token", "/mcp", client.EraSession)
	names := listNames(t, c)
	if !slices.Contains(names, "mcp.everything.test_simple_text") || slices.Contains(names, "mcp.everything.test_image_content") || slices.Contains(names, "mcp.everything.test_audio_content") {
		t.Fatalf("tools/list = %v: the changed and the unpublished tool must be left out", names)
	}
	for _, name := range []string{"mcp.everything.test_image_content", "mcp.everything.test_audio_content"} {
		if _, err := c.CallTool(testkit.Context(t), name, nil); rpcCode(err) != jsonrpc.CodeInvalidParams {
			t.Fatalf("%s must be refused as unknown: %v", name, err)
		}
	}
}

// TestUnderscoreNames: --tool-name-style=underscore lists mcp__<server>__<tool>
// and accepts those names (and the dotted ones); events keep the dotted name.
func TestUnderscoreNames(t *testing.T) {
	up := testpeers.GoEverything(t, false)
	server := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.test_simple_text"))
	h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, func(c *Config) { c.ToolNameStyle = StyleUnderscore })
	c := h.connect(t, "alice-token", "/mcp", client.EraStateless)
	if names := listNames(t, c); !slices.Equal(names, []string{"mcp__everything__test_simple_text"}) {
		t.Fatalf("tools/list = %v", names)
	}
	for _, name := range []string{"mcp__everything__test_simple_text", "mcp.everything.test_simple_text"} {
		if _, err := c.CallTool(testkit.Context(t), name, nil); err != nil {
			t.Fatalf("call %s: %v", name, err)
		}
	}
	if id := lastCallID(h.events(t), "mcp.everything.test_simple_text"); id == "" {
		t.Fatal("events must name the tool by its dotted name")
	}
}

// TestUnderscorePromptListedOnce: a prompts/get by its underscore-style name
// lists the servers' prompts once, to find it, and its arguments are held
// to that listing (it listed the server's prompts a second time for them).
func TestUnderscorePromptListedOnce(t *testing.T) {
	up := testpeers.GoEverything(t, false)
	fwd := bridgetest.Forward(t, strings.TrimSuffix(strings.TrimPrefix(up.URL, "http://"), "/mcp"), "/mcp")
	server := bridgetest.Published(t, "tools", "everything", fwd.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice")})
	pol.Spec.Prompts = []v1alpha1.PromptRule{{Prompts: []string{"mcp.everything.*"}, Decision: "allow"}}
	h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, func(c *Config) { c.ToolNameStyle = StyleUnderscore })
	c := h.connect(t, "alice-token", "/mcp", client.EraStateless)

	before := fwd.Requests("prompts/list")
	res, err := c.Call(testkit.Context(t), "prompts/get", json.RawMessage(`{"name":"mcp__everything__test_prompt_with_arguments","arguments":{"arg1":"a","arg2":"b"}}`))
	if err != nil || !strings.Contains(string(res), `"messages"`) {
		t.Fatalf("prompts/get by its underscore name: %s, %v", res, err)
	}
	if n := fwd.Requests("prompts/list") - before; n != 1 {
		t.Errorf("the server was sent prompts/list %d times for one prompts/get; want 1", n)
	}
	_, err = c.Call(testkit.Context(t), "prompts/get", json.RawMessage(`{"name":"mcp__everything__test_prompt_with_arguments","arguments":{"arg1":"a","arg2":"b","bogus":"c"}}`))
	if rpcCode(err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), "unknown argument(s) bogus") {
		t.Errorf("an undeclared argument: %v; want -32602 naming it", err)
	}
}
