package mcpbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// cachingServer is a go-sdk server whose lists say they are fresh for ttl
// ("public", as a server that lists the same to everyone says), counting
// the tools/list requests it is sent.
func cachingServer(t *testing.T, ttl time.Duration) (url string, lists *atomic.Int32) {
	t.Helper()
	url, lists, _ = failingCachingServer(t, ttl)
	return url, lists
}

// failingCachingServer is cachingServer whose tools/list answers a
// JSON-RPC error while failLists is set: a fault the go-sdk server cannot
// be made to produce on demand, so the handler in front of it answers.
func failingCachingServer(t *testing.T, ttl time.Duration) (url string, lists *atomic.Int32, failLists *atomic.Bool) {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "caching", Version: "1"}, &mcp.ServerOptions{
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) {
			c.TTLMs, c.CacheScope = int(ttl.Milliseconds()), "public"
		},
	})
	s.AddTool(&mcp.Tool{Name: "greet", Description: "Say hello", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	lists, failLists = &atomic.Int32{}, &atomic.Bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if m, err := jsonrpc.Decode(body); err == nil && m.Method == "tools/list" {
			lists.Add(1)
			if failLists.Load() {
				out, _ := jsonrpc.Encode(jsonrpc.NewErrorResponse(m.ID, jsonrpc.CodeInternalError, "the tool list is unavailable"))
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(out)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, lists, failLists
}

// TestListsCarryCacheHints: 2026-07-28 answers say how long they are fresh
// and for whom: a caller's list is private and never fresher than its
// server said; what is the same for everyone is public. A session-era
// answer has no hints. The bridge lists the server again for an agent's
// list only once the server's ttlMs has passed, and never for a call; a
// server whose ttlMs is 0 is listed again at most once a second.
func TestListsCarryCacheHints(t *testing.T) {
	const ttl = 1200 * time.Millisecond
	url, lists := cachingServer(t, ttl)
	volatileURL, volatileLists := cachingServer(t, 0)
	h := newHarness(t, []v1alpha1.MCPServer{
		bridgetest.Published(t, "tools", "cached", url, v1alpha1.ToolsSpec{}),
		bridgetest.Published(t, "tools", "volatile", volatileURL, v1alpha1.ToolsSpec{}),
	}, []v1alpha1.ToolPolicy{toolPolicy("tools", "agents", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.cached.*"))}, nil)

	stateless := h.connect(t, "alice-token", "/mcp", client.EraStateless)
	hints := func(c *client.Client, method string) (ttlMs int64, scope string, result json.RawMessage) {
		t.Helper()
		res, err := c.Call(testkit.Context(t), method, nil)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		_ = json.Unmarshal(rawjson.Get(res, "ttlMs"), &ttlMs)
		scope, _ = rawjson.String(rawjson.Get(res, "cacheScope"))
		return ttlMs, scope, res
	}
	volatileBefore := volatileLists.Load()
	for range 3 {
		if ms, _, _ := hints(stateless, "tools/list"); ms != 0 {
			t.Errorf("with a server whose ttlMs is 0, tools/list says ttlMs %d, want 0", ms)
		}
	}
	if n := volatileLists.Load() - volatileBefore; n > 1 {
		t.Errorf("three lists within a second listed the ttlMs-0 server %d times, want at most 1", n)
	}
	// A list is never fresher than any server's part (even one whose tools
	// the caller cannot see now: its next catalog may have some). Only the
	// cached server from here on.
	h.reg.Update(routes.Build([]v1alpha1.MCPServer{bridgetest.Published(t, "tools", "cached", url, v1alpha1.ToolsSpec{})}), target)
	ms, scope, res := hints(stateless, "tools/list")
	if scope != scopePrivate || ms <= 0 || ms > ttl.Milliseconds() || !bytes.Contains(res, []byte(`"mcp.cached.greet"`)) {
		t.Errorf("tools/list: ttlMs %d, cacheScope %q, want private and within the server's %v: %s", ms, scope, ttl, res)
	}
	if ms, scope, _ := hints(stateless, "prompts/list"); scope != scopePrivate || ms != listTTL.Milliseconds() {
		t.Errorf("prompts/list: ttlMs %d, cacheScope %q, want private, %v (no server has prompts)", ms, scope, listTTL)
	}
	if ms, scope, _ := hints(stateless, "server/discover"); scope != scopePublic || ms != listTTL.Milliseconds() {
		t.Errorf("server/discover: ttlMs %d, cacheScope %q, want public, %v", ms, scope, listTTL)
	}
	if ms, scope, _ := hints(h.connect(t, "alice-token", "/servers/cached/mcp", client.EraStateless), "server/discover"); scope != scopePrivate || ms != listTTL.Milliseconds() {
		t.Errorf("server/discover on a server's endpoint: ttlMs %d, cacheScope %q, want private, %v", ms, scope, listTTL)
	}
	search := h.connect(t, "alice-token", SearchPath, client.EraStateless)
	if ms, scope, _ := hints(search, "tools/list"); scope != scopePublic || ms != listTTL.Milliseconds() {
		t.Errorf("the meta-tools' list: ttlMs %d, cacheScope %q, want public, %v", ms, scope, listTTL)
	}
	if _, _, res := hints(search, "server/discover"); !bytes.Contains(rawjson.Get(res, "instructions"), []byte(metaFindTools)) {
		t.Errorf("the search endpoint's instructions do not say to search: %s", res)
	}
	if _, _, res := hints(h.connect(t, "alice-token", "/mcp", client.EraSession), "tools/list"); rawjson.Get(res, "ttlMs") != nil || rawjson.Get(res, "cacheScope") != nil {
		t.Errorf("a session-era list has cache hints: %s", res)
	}

	before := lists.Load()
	for range 3 {
		if _, err := stateless.Call(testkit.Context(t), "tools/call", json.RawMessage(`{"name":"mcp.cached.greet","arguments":{}}`)); err != nil {
			t.Fatal(err)
		}
	}
	if n := lists.Load() - before; n != 0 {
		t.Errorf("calls listed the server's tools %d times, want none", n)
	}
	// A bridge that names tools underscore-style resolves such a name, and
	// a bare one, in the kept catalog too, stale or not.
	underscore := newHarness(t, []v1alpha1.MCPServer{bridgetest.Published(t, "tools", "cached", url, v1alpha1.ToolsSpec{})},
		[]v1alpha1.ToolPolicy{toolPolicy("tools", "agents", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.cached.*"))},
		func(c *Config) { c.ToolNameStyle = StyleUnderscore })
	underscored := underscore.connect(t, "alice-token", "/mcp", client.EraStateless)
	callUnderscored := func() {
		t.Helper()
		if _, err := underscored.Call(testkit.Context(t), "tools/call", json.RawMessage(`{"name":"mcp__cached__greet","arguments":{}}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := underscored.Call(testkit.Context(t), "tools/call", json.RawMessage(`{"name":"greet","arguments":{}}`)); !jsonrpc.IsCode(err, jsonrpc.CodeInvalidParams) {
			t.Errorf("a bare name: %v, want invalid params (never guessed)", err)
		}
	}
	callUnderscored()
	time.Sleep(ttl + 100*time.Millisecond)
	before = lists.Load()
	callUnderscored()
	callUnderscored()
	if n := lists.Load() - before; n != 0 {
		t.Errorf("underscore-style and bare-name calls after the server's ttlMs passed listed its tools %d times, want none", n)
	}
	before = lists.Load()
	hints(stateless, "tools/list")
	hints(stateless, "tools/list")
	if n := lists.Load() - before; n != 1 {
		t.Errorf("two lists after the server's ttlMs passed listed its tools %d times, want 1", n)
	}
}

// TestFailedRelistingKeepsTheCatalog: once a server's ttlMs has passed, a
// re-listing that fails leaves the tools listed before served, to every
// caller, for lists and calls, and the server is not asked again at each
// request while it fails.
func TestFailedRelistingKeepsTheCatalog(t *testing.T) {
	const ttl = 1100 * time.Millisecond // past minRelist
	url, lists, failLists := failingCachingServer(t, ttl)
	h := newHarness(t, []v1alpha1.MCPServer{bridgetest.Published(t, "tools", "cached", url, v1alpha1.ToolsSpec{})},
		[]v1alpha1.ToolPolicy{toolPolicy("tools", "agents", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.cached.*"))}, nil)
	c := h.connect(t, "alice-token", "/mcp", client.EraStateless)
	listed := func() json.RawMessage {
		t.Helper()
		res, err := c.Call(testkit.Context(t), "tools/list", nil)
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		return res
	}
	if res := listed(); !bytes.Contains(res, []byte(`"mcp.cached.greet"`)) {
		t.Fatalf("the first list lacks the server's tool: %s", res)
	}
	failLists.Store(true)
	time.Sleep(ttl + 100*time.Millisecond)
	before := lists.Load()
	for range 3 {
		if res := listed(); !bytes.Contains(res, []byte(`"mcp.cached.greet"`)) {
			t.Errorf("after a failed re-listing the list lacks the tool listed before: %s", res)
		}
		if _, err := c.Call(testkit.Context(t), "tools/call", json.RawMessage(`{"name":"mcp.cached.greet","arguments":{}}`)); err != nil {
			t.Errorf("a call after a failed re-listing: %v", err)
		}
	}
	if n := lists.Load() - before; n != 1 {
		t.Errorf("three lists and calls while re-listing fails listed the server %d times, want 1 (then back off)", n)
	}
}
