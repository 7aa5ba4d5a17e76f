package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// TestTypeScriptAgentToolSearch: the official TypeScript SDK client on the
// search endpoint, in front of server-everything. The agent sees only the
// meta-tools, finds and calls a tool it may call (through call_tool and by
// its name), never finds the tool its policy denies, and calling that one
// by a guessed name is denied and audited under the tool's real name.
func TestTypeScriptAgentToolSearch(t *testing.T) {
	rt, url, k, _ := startRuntime(t, "search")
	up := testpeers.NodeEverything(t)
	apply(t, k, bridgetest.Published(t, "search", "everything", up.URL, v1alpha1.ToolsSpec{}))
	createPolicy(t, k, toolPolicy("search", "agents", []v1alpha1.Subject{sa("agents", "alice")},
		rule("allow", "mcp.everything.*"),
		rule("deny", "mcp.everything.get-tiny-image"),
	))
	testkit.Eventually(t, "the server is served", func() bool { return len(rt.Registry.Names()) == 1 })

	res := runTSAgent(t, url+SearchPath, "alice-token", tsPlan{Steps: []tsStep{
		{Op: "listTools"},
		{Op: "call", Name: metaFindTools, Args: map[string]any{"query": "echo a message back to me"}},
		{Op: "call", Name: metaCallTool, Args: map[string]any{"name": "mcp.everything.echo", "arguments": map[string]any{"message": "found"}}},
		{Op: "call", Name: "mcp.everything.echo", Args: map[string]any{"message": "direct"}},
		{Op: "call", Name: metaFindTools, Args: map[string]any{"query": "get a tiny image", "limit": 20}},
		{Op: "call", Name: "mcp.everything.get-tiny-image"},
		{Op: "call", Name: metaCallTool, Args: map[string]any{"name": "mcp.everything.get-tiny-image"}},
		{Op: "call", Name: metaFindTools, Args: map[string]any{}},
	}})
	step, check := tsChecks(t, res)
	check(0, strings.Contains(step(0), `"find_tools"`) && strings.Contains(step(0), `"call_tool"`) && !strings.Contains(step(0), "mcp.everything"),
		"tools/list offers the meta-tools, not the catalog")
	check(1, strings.Contains(step(1), `mcp.everything.echo`) && strings.Contains(step(1), `inputSchema`), "find_tools returns echo with its schema")
	check(2, strings.Contains(step(2), "Echo: found"), "call_tool calls the found tool")
	check(3, strings.Contains(step(3), "Echo: direct"), "the found tool is called by its name")
	check(4, res.Steps[4].OK && strings.Contains(step(4), "mcp.everything.") && !strings.Contains(step(4), "get-tiny-image"),
		"find_tools never returns a tool the caller may not call")
	check(5, !res.Steps[5].OK && res.Steps[5].Error.Code == CodeDenied, "the denied tool called by a guessed name is denied")
	check(6, !res.Steps[6].OK && res.Steps[6].Error.Code == CodeDenied, "the denied tool through call_tool is denied")
	check(7, strings.Contains(step(7), `"isError":true`) && strings.Contains(step(7), "needs a query"), "find_tools without a query is a tool error")

	fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = rt.Audit.Flush(fctx)
	var requested, denied []string
	for _, ev := range (&harness{}).eventsFrom(t, rt) {
		tool, _ := ev["tool"].(string)
		if strings.Contains(tool, metaFindTools) || strings.Contains(tool, metaCallTool) {
			t.Errorf("an event names a meta-tool: %v", ev)
		}
		switch {
		case ev["type"] == "permission.requested":
			requested = append(requested, tool)
		case ev["type"] == "permission.resolved" && ev["decision"] == "deny":
			denied = append(denied, tool)
		}
	}
	if strings.Join(requested, " ") != "mcp.everything.echo mcp.everything.echo mcp.everything.get-tiny-image mcp.everything.get-tiny-image" {
		t.Errorf("permission.requested names %q, want echo twice and get-tiny-image twice", requested)
	}
	if strings.Join(denied, " ") != "mcp.everything.get-tiny-image mcp.everything.get-tiny-image" {
		t.Errorf("denials name %q, want get-tiny-image twice", denied)
	}
}

// TestTraceOfACallThroughCallTool: a call made through call_tool is traced
// as the call of the real tool, stage by stage, and no span names the
// meta-tool.
func TestTraceOfACallThroughCallTool(t *testing.T) {
	tb := newTracedBridge(t, true)
	c := tb.connect(t, "alice-token", SearchPath, client.EraStateless)
	if _, err := c.CallTool(testkit.Context(t), metaCallTool, json.RawMessage(`{"name":"mcp.everything.test_simple_text","arguments":{}}`)); err != nil {
		t.Fatal(err)
	}
	req, stages := tb.requestSpan(t, "tools/call mcp.everything.test_simple_text")
	wantAttrs(t, req, map[string]string{"gen_ai.tool.name": "mcp.everything.test_simple_text", "mcp_operator.decision": "allow"})
	wantNames(t, stages, "authenticate", "decide", "tools/call test_simple_text", "output")
	for _, s := range tb.spans.Ended() {
		for k, v := range attrs(s) {
			if strings.Contains(s.Name(), metaCallTool) || strings.Contains(v, metaCallTool) {
				t.Errorf("span %q names the meta-tool (%s=%s)", s.Name(), k, v)
			}
		}
	}
}

// TestSearchEdges: call_tool does not call the meta-tools; find_tools
// finds nothing of a server no policy of the caller names, even for words
// only its tools have; a limit that is not a whole number is a clear
// error; and on a bridge that names tools underscore-style, the search
// endpoint finds and calls them under those names.
func TestSearchEdges(t *testing.T) {
	url, _ := cachingServer(t, time.Minute)
	hiddenURL, _ := cachingServer(t, time.Minute)
	servers := []v1alpha1.MCPServer{
		bridgetest.Published(t, "tools", "cached", url, v1alpha1.ToolsSpec{}),
		bridgetest.Published(t, "tools", "hidden", hiddenURL, v1alpha1.ToolsSpec{}),
	}
	policies := []v1alpha1.ToolPolicy{toolPolicy("tools", "agents", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.cached.*"))}
	h := newHarness(t, servers, policies, nil)
	c := h.connect(t, "alice-token", SearchPath, client.EraStateless)
	find := func(c *client.Client, args string) string {
		t.Helper()
		res, err := c.CallTool(testkit.Context(t), metaFindTools, json.RawMessage(args))
		if err != nil {
			t.Fatalf("find_tools %s: %v", args, err)
		}
		return string(res)
	}

	for _, meta := range []string{metaCallTool, metaFindTools} {
		_, err := c.CallTool(testkit.Context(t), metaCallTool, json.RawMessage(`{"name":"`+meta+`","arguments":{"query":"hello"}}`))
		if !jsonrpc.IsCode(err, jsonrpc.CodeInvalidParams) || !strings.Contains(err.Error(), "calls a found tool") {
			t.Errorf("call_tool naming %s: %v, want invalid params", meta, err)
		}
	}
	if res := find(c, `{"query":"say hello greet","limit":20}`); !strings.Contains(res, "mcp.cached.greet") || strings.Contains(res, "hidden") {
		t.Errorf("find_tools: want mcp.cached.greet and nothing of the server no policy names: %s", res)
	}
	for _, limit := range []string{`"five"`, `2.5`, `{}`} {
		if res := find(c, `{"query":"say hello","limit":`+limit+`}`); !strings.Contains(res, `"isError":true`) || !strings.Contains(res, "whole number") {
			t.Errorf("find_tools with limit %s: %s, want a tool error saying what a limit is", limit, res)
		}
	}
	// A query longer than a task is refused with the bound, not searched;
	// one at the bound is searched.
	long, _ := json.Marshal(map[string]string{"query": "say hello " + strings.Repeat("x", maxQuery)})
	if res := find(c, string(long)); !strings.Contains(res, `"isError":true`) || !strings.Contains(res, fmt.Sprintf("more than %d", maxQuery)) {
		t.Errorf("find_tools with a query over %d bytes: %s, want a tool error that says the bound", maxQuery, res)
	}
	atBound, _ := json.Marshal(map[string]string{"query": "say hello " + strings.Repeat("x", maxQuery-len("say hello "))})
	if res := find(c, string(atBound)); !strings.Contains(res, "mcp.cached.greet") {
		t.Errorf("find_tools with a query of %d bytes: %s, want mcp.cached.greet", maxQuery, res)
	}

	u := newHarness(t, servers, policies, func(c *Config) { c.ToolNameStyle = StyleUnderscore })
	uc := u.connect(t, "alice-token", SearchPath, client.EraStateless)
	if res := find(uc, `{"query":"say hello"}`); !strings.Contains(res, `mcp__cached__greet`) {
		t.Errorf("find_tools on an underscore-style bridge: %s, want mcp__cached__greet", res)
	}
	for _, call := range []struct{ name, args string }{
		{metaCallTool, `{"name":"mcp__cached__greet","arguments":{}}`},
		{"mcp__cached__greet", `{}`},
	} {
		if res, err := uc.CallTool(testkit.Context(t), call.name, json.RawMessage(call.args)); err != nil || !strings.Contains(string(res), "hello") {
			t.Errorf("calling %s %s on an underscore-style bridge: %s %v", call.name, call.args, res, err)
		}
	}
}
