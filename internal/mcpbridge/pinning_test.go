package mcpbridge

import (
	"slices"
	"testing"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
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
		if _, err := c.CallTool(ctxT(t), name, nil); rpcCode(err) != jsonrpc.CodeInvalidParams {
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
		if _, err := c.CallTool(ctxT(t), name, nil); err != nil {
			t.Fatalf("call %s: %v", name, err)
		}
	}
	if id := lastCallID(h.events(t), "mcp.everything.test_simple_text"); id == "" {
		t.Fatal("events must name the tool by its dotted name")
	}
}
