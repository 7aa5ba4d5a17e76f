package mcpbridge

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/identity"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/signed"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// post sends one raw request to the bridge and returns the status and the
// JSON-RPC error code of the body (0 when none).
func post(t *testing.T, url, token, sessionID, body string, header map[string]string) (int, int, http.Header) {
	t.Helper()
	status, data, hdr := postBody(t, url, token, sessionID, body, header)
	var m jsonrpc.Message
	code := 0
	if json.Unmarshal(data, &m) == nil && m.Error != nil {
		code = m.Error.Code
	}
	return status, code, hdr
}

// endSession ends the session sid (DELETE) and fails the test unless the
// bridge answers 204.
func endSession(t *testing.T, url, token, sid string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: status %d, want 204", resp.StatusCode)
	}
}

// postBody is post returning the answer's body.
func postBody(t *testing.T, url, token, sessionID, body string, header map[string]string) (int, []byte, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if sessionID != "" {
		req.Header.Set("Mcp-Session-Id", sessionID)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data, resp.Header
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func openSession(t *testing.T, url, token string) string {
	t.Helper()
	status, code, h := post(t, url, token, "", initBody, nil)
	if status != 200 || code != 0 || h.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: status %d, code %d, session %q", status, code, h.Get("Mcp-Session-Id"))
	}
	return h.Get("Mcp-Session-Id")
}

func TestHardening(t *testing.T) {
	up := testpeers.GoEverything(t, false)
	server := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice"), sa("agents", "bob")}, rule("allow", "mcp.everything.*"))
	h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, func(c *Config) {
		c.MaxBodyBytes = 64 << 10
		c.AllowedOrigins = []string{"https://console.example"}
	})
	mcp := h.url + "/mcp"
	sid := openSession(t, mcp, "alice-token")
	call := func(name string) string {
		return `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + name + `","arguments":{}}}`
	}

	for _, tc := range []struct {
		name             string
		token, sid, body string
		header           map[string]string
		status, code     int
	}{
		{"no token", "", sid, call("mcp.everything.test_simple_text"), nil, 401, jsonrpc.CodeInvalidRequest},
		{"unknown token", "mallory-token", sid, call("mcp.everything.test_simple_text"), nil, 401, jsonrpc.CodeInvalidRequest},
		{"valid call", "alice-token", sid, call("mcp.everything.test_simple_text"), nil, 200, 0},
		{"another identity's session", "bob-token", sid, call("mcp.everything.test_simple_text"), nil, 404, jsonrpc.CodeInvalidRequest},
		{"unknown session", "alice-token", "not-a-session", call("mcp.everything.test_simple_text"), nil, 404, jsonrpc.CodeInvalidRequest},
		{"tampered session", "alice-token", sid[:len(sid)-3] + "abc", call("mcp.everything.test_simple_text"), nil, 404, jsonrpc.CodeInvalidRequest},
		{"no session, not initialize", "alice-token", "", call("mcp.everything.test_simple_text"), nil, 400, jsonrpc.CodeInvalidRequest},
		{"body over the limit", "alice-token", sid, `{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":"` + strings.Repeat("a", 70<<10) + `"}}`, nil, 413, jsonrpc.CodeInvalidRequest},
		{"keys differing in case", "alice-token", sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp.everything.test_simple_text","NAME":"mcp.everything.test_sampling"}}`, nil, 400, jsonrpc.CodeInvalidRequest},
		{"repeated key in arguments", "alice-token", sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp.everything.test_simple_text","arguments":{"a":1,"a":2}}}`, nil, 400, jsonrpc.CodeInvalidRequest},
		{"envelope key in another case", "alice-token", sid, `{"jsonrpc":"2.0","id":2,"Method":"tools/list","method":"ping"}`, nil, 400, jsonrpc.CodeInvalidRequest},
		{"not JSON", "alice-token", sid, `{"jsonrpc":`, nil, 400, jsonrpc.CodeParseError},
		// Policy and approvals would see U+FFFD where the upstream gets the raw bytes.
		{"invalid UTF-8 in arguments", "alice-token", sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp.everything.test_simple_text","arguments":{"x":"audit_copy` + "\xff" + `"}}}`, nil, 400, jsonrpc.CodeParseError},
		{"lone surrogate in arguments", "alice-token", sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp.everything.test_simple_text","arguments":{"x":"audit_copy\udcff"}}}`, nil, 400, jsonrpc.CodeParseError},
		{"batch", "alice-token", sid, `[{"jsonrpc":"2.0","id":2,"method":"ping"}]`, nil, 400, jsonrpc.CodeInvalidRequest},
		{"foreign origin", "alice-token", sid, call("mcp.everything.test_simple_text"), map[string]string{"Origin": "https://evil.example"}, 403, jsonrpc.CodeInvalidRequest},
		{"allowed origin", "alice-token", sid, call("mcp.everything.test_simple_text"), map[string]string{"Origin": "https://console.example"}, 200, 0},
		{"protocol version of another era on a session", "alice-token", sid, call("mcp.everything.test_simple_text"), map[string]string{"MCP-Protocol-Version": "2026-07-28"}, 400, jsonrpc.CodeInvalidRequest},
		{"older version of the same era on a session", "alice-token", sid, call("mcp.everything.test_simple_text"), map[string]string{"MCP-Protocol-Version": "2025-03-26"}, 200, 0},
		{"stateless without the version header", "alice-token", "", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, nil, 400, jsonrpc.CodeHeaderMismatch},
		{"stateless with a mismatched method header", "alice-token", "", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}, 400, jsonrpc.CodeHeaderMismatch},
		{"stateless with a mismatched name header", "alice-token", "", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp.everything.test_simple_text","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "mcp.everything.test_sampling"}, 400, jsonrpc.CodeHeaderMismatch},
		{"unsupported future version", "alice-token", "", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2027-01-01"}}}`, map[string]string{"MCP-Protocol-Version": "2027-01-01"}, 400, jsonrpc.CodeUnsupportedProtocolVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, code, _ := post(t, mcp, tc.token, tc.sid, tc.body, tc.header)
			if status != tc.status || code != tc.code {
				t.Fatalf("status %d code %d, want %d and %d", status, code, tc.status, tc.code)
			}
		})
	}

	t.Run("GET without a session has no stream", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, mcp, nil)
		req.Header.Set("Authorization", "Bearer alice-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("GET: %d, want 405", resp.StatusCode)
		}
	})
	t.Run("DELETE ends the session", func(t *testing.T) {
		sid := openSession(t, mcp, "alice-token")
		endSession(t, mcp, "alice-token", sid)
		if status, _, _ := post(t, mcp, "alice-token", sid, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, nil); status != 404 {
			t.Fatalf("an ended session answered %d, want 404", status)
		}
	})
	t.Run("a session survives the replica that opened it", func(t *testing.T) {
		// A second replica: same key, its own memory, its own registry.
		reg := routes.NewRegistry(h.reg.Options, h.b.cfg.Log)
		reg.Update(routes.Build([]v1alpha1.MCPServer{server}), target)
		sealer, _ := signed.New(testKey)
		cfg := h.b.cfg
		cfg.Registry, cfg.Sessions = reg, session.NewManager(sealer, session.Options{})
		other := New(cfg)
		other.SetEngine(h.b.engine.Load())
		srv := httptest.NewServer(other.Handler())
		defer srv.Close()
		sid := openSession(t, mcp, "alice-token")
		if status, code, _ := post(t, srv.URL+"/mcp", "alice-token", sid, call("mcp.everything.test_simple_text"), nil); status != 200 || code != 0 {
			t.Fatalf("the other replica answered %d (code %d) for a live session", status, code)
		}
		if status, _, _ := post(t, srv.URL+"/mcp", "bob-token", sid, call("mcp.everything.test_simple_text"), nil); status != 404 {
			t.Fatalf("the other replica must refuse the session to another identity, got %d", status)
		}
		if status, _, _ := post(t, srv.URL+"/servers/everything/mcp", "alice-token", sid, call("test_simple_text"), nil); status != 404 {
			t.Fatalf("a session of /mcp must not be used on another endpoint, got %d", status)
		}
	})
	t.Run("Host of another site on a loopback bridge", func(t *testing.T) {
		h.b.cfg.LoopbackOnly = true
		defer func() { h.b.cfg.LoopbackOnly = false }()
		status, _, _ := post(t, mcp, "alice-token", sid, call("mcp.everything.test_simple_text"), map[string]string{"Host": "attacker.example"})
		if status != 403 {
			t.Fatalf("a foreign Host must be refused on a loopback bridge, got %d", status)
		}
	})
	t.Run("our client speaks to the hardened bridge", func(t *testing.T) {
		c := h.connect(t, "alice-token", "/mcp", client.EraSession)
		if _, err := c.CallTool(testkit.Context(t), "mcp.everything.test_simple_text", nil); err != nil {
			t.Fatal(err)
		}
	})
}

// TestConcurrencyLimits: a full bridge answers 503, a full session 429,
// and neither waits.
func TestConcurrencyLimits(t *testing.T) {
	h := newHarness(t, nil, nil, func(c *Config) { c.MaxConcurrent = 1 })
	h.b.limits.requests.Take("", 1) // one request in flight: the bridge is full
	status, _, hdr := post(t, h.url+"/mcp", "alice-token", "", initBody, nil)
	if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
		t.Fatalf("a full bridge answered %d (Retry-After %q), want 503", status, hdr.Get("Retry-After"))
	}
	h.b.limits.requests.Give("", 1)
	sid := openSession(t, h.url+"/mcp", "alice-token")
	s, err := h.b.cfg.Sessions.Resume(sid, "system:serviceaccount:agents:alice", "")
	if err != nil {
		t.Fatal(err)
	}
	for s.Acquire() {
	}
	if status, _, _ := post(t, h.url+"/mcp", "alice-token", sid, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, nil); status != http.StatusTooManyRequests {
		t.Fatalf("a full session answered %d, want 429", status)
	}
	// Callers are bounded per caller, stateless or in any of their
	// sessions (a caller with many sessions took the replica's slots).
	other := openSession(t, h.url+"/mcp", "alice-token")
	for h.b.limits.callers.Take("system:serviceaccount:agents:alice", 1) {
	}
	stateless := map[string]string{"MCP-Protocol-Version": "2026-07-28"}
	ping := `{"jsonrpc":"2.0","id":3,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	if status, _, _ := post(t, h.url+"/mcp", "alice-token", "", ping, stateless); status != http.StatusTooManyRequests {
		t.Fatalf("a stateless caller at its limit answered %d, want 429", status)
	}
	if status, _, _ := post(t, h.url+"/mcp", "alice-token", other, `{"jsonrpc":"2.0","id":4,"method":"ping"}`, nil); status != http.StatusTooManyRequests {
		t.Fatalf("a caller at its limit, in another of its sessions, answered %d, want 429", status)
	}
	// Its answers and its cancels still get through: they free the calls
	// that hold its slots.
	if status, _, _ := post(t, h.url+"/mcp", "alice-token", other, `{"jsonrpc":"2.0","id":99,"result":{}}`, nil); status != http.StatusAccepted {
		t.Fatalf("an answer from a caller at its limit got %d, want 202", status)
	}
	if status, _, _ := post(t, h.url+"/mcp", "alice-token", other, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}`, nil); status != http.StatusAccepted {
		t.Fatalf("a cancel from a caller at its limit got %d, want 202", status)
	}
	if status, _, _ := post(t, h.url+"/mcp", "bob-token", "", ping, stateless); status != http.StatusOK {
		t.Fatalf("another caller must not be limited by alice's requests: %d", status)
	}
}

// TestCallOutlivesReadTimeout: the server's timeouts (NewServer) bound
// reading a request, not the call it starts: a call running longer than
// ReadTimeout completes (its own deadline is --call-timeout).
func TestCallOutlivesReadTimeout(t *testing.T) {
	up := testpeers.NodeEverything(t)
	ev := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.*"))
	h := newHarness(t, []v1alpha1.MCPServer{ev}, []v1alpha1.ToolPolicy{pol}, nil)

	srv := NewServer("127.0.0.1:0", h.b.Handler())
	srv.ReadTimeout = time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	c := (&harness{url: "http://" + ln.Addr().String()}).connect(t, "alice-token", "/mcp", client.EraSession)
	res, err := c.CallTool(testkit.Context(t), "mcp.everything.trigger-long-running-operation", json.RawMessage(`{"duration":2.5,"steps":2}`))
	if err != nil {
		t.Fatalf("a 2.5 s call behind a 1 s ReadTimeout failed: %v", err)
	}
	if !strings.Contains(string(res), "completed") {
		t.Fatalf("unexpected result %s", res)
	}
}

// countingAuth is testCallers, telling who was authenticated: the sync
// point at which a request has reached the bridge's handler.
type countingAuth struct {
	tokenAuth
	seen chan string
}

func (a countingAuth) Authenticate(ctx context.Context, token string) (identity.Identity, error) {
	id, err := a.tokenAuth.Authenticate(ctx, token)
	a.seen <- token
	return id, err
}

// TestSlowBodiesDoNotTakeSlots: requests whose bodies trickle in, from an
// identity with no policy at all, cannot take the replica's request slots: the
// slot is taken after authentication and the body, each within the
// connection's own budget. Otherwise two such requests would make a two-slot
// replica answer 503 to everyone until its read timeout. Raw TCP: an HTTP
// client sends a body at once.
func TestSlowBodiesDoNotTakeSlots(t *testing.T) {
	auth := countingAuth{tokenAuth: testCallers, seen: make(chan string, 16)}
	h := newHarness(t, nil, nil, func(c *Config) {
		c.MaxConcurrent = 2
		c.Auth = auth
		c.RequestReadTimeout = 3 * time.Second
	})
	addr := strings.TrimPrefix(h.url, "http://")
	var slow []net.Conn
	for range 4 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		// Headers and the first bytes of a body that never completes.
		fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer bob-token\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{\"jsonrpc\":", addr)
		slow = append(slow, conn)
	}
	for range slow {
		select {
		case tok := <-auth.seen:
			if tok != "bob-token" {
				t.Fatalf("unexpected caller %q", tok)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the slow requests never reached the bridge")
		}
	}
	if status, _, _ := post(t, h.url+"/mcp", "alice-token", "", initBody, nil); status != http.StatusOK {
		t.Fatalf("with 4 slow bodies in a 2-slot replica, another caller got %d, want 200", status)
	}
	<-auth.seen
	// The slow bodies are cut at their budget, with 408.
	_ = slow[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	answer, _ := io.ReadAll(slow[0])
	if !strings.HasPrefix(string(answer), "HTTP/1.1 408") {
		t.Fatalf("a body slower than its budget was answered %q, want 408", answer)
	}
}

// TestSessionsPerCallerCapped: a caller cannot open sessions without bound:
// over the cap, initialize is refused with a reason,
// and other callers are not affected.
func TestSessionsPerCallerCapped(t *testing.T) {
	h := newHarness(t, nil, nil, func(c *Config) {
		c.Sessions = session.NewManager(c.Sealer, session.Options{MaxPerSubject: 2})
	})
	mcp := h.url + "/mcp"
	openSession(t, mcp, "alice-token")
	openSession(t, mcp, "alice-token")
	status, code, hdr := post(t, mcp, "alice-token", "", initBody, nil)
	if status != 200 || code != jsonrpc.CodeInvalidRequest || hdr.Get("Mcp-Session-Id") != "" {
		t.Fatalf("a third session: status %d, code %d, session %q; want a refusal (%d) and no session", status, code, hdr.Get("Mcp-Session-Id"), jsonrpc.CodeInvalidRequest)
	}
	openSession(t, mcp, "bob-token")
}

// TestMetricsNotOnTheAgentsPort: /metrics lists every server and tool with
// call counts and decisions; the agents' port does not serve it (nor
// health), to any Host, with or without a token. The ops
// listener does.
func TestMetricsNotOnTheAgentsPort(t *testing.T) {
	h := newHarness(t, nil, nil, nil)
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		for _, token := range []string{"", "alice-token"} {
			req, _ := http.NewRequest(http.MethodGet, h.url+path, nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("GET %s on the agents' port (token %q): %d, want 404", path, token, resp.StatusCode)
			}
		}
	}
	h.b.SetReady(true)
	ops := httptest.NewServer(h.b.OpsHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics\n")) })))
	defer ops.Close()
	for path, want := range map[string]string{"/metrics": "metrics\n", "/healthz": "ok\n", "/readyz": "ok\n"} {
		resp, err := http.Get(ops.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != want {
			t.Errorf("GET %s on the ops listener: %d %q, want 200 %q", path, resp.StatusCode, body, want)
		}
	}
}

// TestBodyBytesInFlightAreBounded: slow bodies, each
// within the per-request limit, together could take unbounded memory
// before any slot bounded them. The replica's budget of body bytes is
// spent by what its requests have read: past it, a request is refused with
// 503 and Retry-After before it takes a slot. Raw TCP: an HTTP client sends
// a body at once.
func TestBodyBytesInFlightAreBounded(t *testing.T) {
	h := newHarness(t, nil, nil, func(c *Config) {
		c.MaxBodyBytes = 600
		c.MaxBodyBytesInFlight = 1000
	})
	addr := strings.TrimPrefix(h.url, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	// A ping padded to 600 bytes, of which 550 arrive now.
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	body := ping + strings.Repeat(" ", 600-len(ping))
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer alice-token\r\nContent-Type: application/json\r\nContent-Length: 600\r\n\r\n%s", addr, body[:550])
	testkit.Eventually(t, "the slow body holds 550 bytes of the budget", func() bool {
		used, _ := h.b.limits.bodyBytes.Used("")
		return used == 550
	})
	if used, _ := h.b.limits.requests.Used(""); used != 0 {
		t.Fatalf("a body still being read holds %d request slots, want 0", used)
	}
	// 450 bytes are left: a 500-byte body does not fit.
	big := `{"jsonrpc":"2.0","id":2,"method":"initialize","params":` + strings.TrimPrefix(initBody, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":`)
	big += strings.Repeat(" ", 500-len(big))
	status, _, hdr := post(t, h.url+"/mcp", "bob-token", "", big, nil)
	if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
		t.Fatalf("a body over the budget left: %d (Retry-After %q), want 503 with Retry-After", status, hdr.Get("Retry-After"))
	}
	// A small one still fits, but not from alice, whose stalled body holds
	// nearly her share (a quarter of the budget, or one body of the
	// largest size: 600 bytes here): one identity cannot take it all.
	if status, _, _ := post(t, h.url+"/mcp", "bob-token", "", initBody, nil); status != http.StatusOK {
		t.Fatalf("a %d-byte body with 450 bytes of budget left: %d, want 200", len(initBody), status)
	}
	if status, _, hdr := post(t, h.url+"/mcp", "alice-token", "", initBody, nil); status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
		t.Fatalf("a %d-byte body from a caller holding 550 of her 600 bytes: %d, want 503 with Retry-After", len(initBody), status)
	}
	// The slow body completes and is answered; its bytes are given back.
	fmt.Fprint(conn, body[550:])
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 ") {
		t.Fatalf("the slow request's answer: %q, %v", line, err)
	}
	testkit.Eventually(t, "the answered requests give their body bytes back", func() bool {
		used, _ := h.b.limits.bodyBytes.Used("")
		return used == 0
	})
	if status, _, _ := post(t, h.url+"/mcp", "bob-token", "", big, nil); status != http.StatusOK {
		t.Fatalf("the 500-byte body once the budget is free: %d, want 200", status)
	}
}

// busyAuth stands in for a TokenReview at its bound of reviews in flight
// (the bound itself is tested in package authn).
type busyAuth struct{}

func (busyAuth) Authenticate(context.Context, string) (identity.Identity, error) {
	return identity.Identity{}, authn.ErrBusy
}

// TestBusyReviewsAnswer503: a token that cannot be reviewed now is
// answered 503 with Retry-After, not 401 (the token may be good).
func TestBusyReviewsAnswer503(t *testing.T) {
	h := newHarness(t, nil, nil, func(c *Config) { c.Auth = busyAuth{} })
	status, _, hdr := post(t, h.url+"/mcp", "alice-token", "", initBody, nil)
	if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
		t.Fatalf("reviews at their bound: %d (Retry-After %q), want 503 with Retry-After", status, hdr.Get("Retry-After"))
	}
}
