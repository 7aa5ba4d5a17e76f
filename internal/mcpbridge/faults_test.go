package mcpbridge

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/invisible"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/redact"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// TestFaults: an upstream crash mid-call, a crash storm beside a healthy
// server, a 50 MB answer, malformed JSON and an upstream slower than the
// deadline — each ends the call with a reason, never a hang, never a replay.
func TestFaults(t *testing.T) {
	faults := bridgetest.Published(t, "tools", "faults", bridgetest.FaultServer(t), v1alpha1.ToolsSpec{})
	leakyCatalog := bridgetest.Published(t, "tools", "leakycatalog", bridgetest.LeakyCatalogServer(t), v1alpha1.ToolsSpec{})
	steadyUp := testpeers.GoEverything(t, false)
	steady := bridgetest.Published(t, "tools", "steady", steadyUp.URL, v1alpha1.ToolsSpec{})
	flakyUp := testpeers.NodeEverything(t)
	fwd := bridgetest.Forward(t, strings.TrimSuffix(strings.TrimPrefix(flakyUp.URL, "http://"), "/mcp"), "/mcp")
	flaky := bridgetest.Published(t, "tools", "flaky", fwd.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.faults.*", "mcp.steady.*", "mcp.flaky.*", "mcp.leakycatalog.*"))
	h := newHarness(t, []v1alpha1.MCPServer{faults, steady, flaky, leakyCatalog}, []v1alpha1.ToolPolicy{pol}, func(c *Config) {
		c.CallTimeout = 3 * time.Second
		leaky := redact.New(bridgetest.LeakedValue)
		c.Redactor = func(_, name string) *redact.Redactor {
			if name == "faults" || name == "leakycatalog" {
				return leaky
			}
			return nil
		}
	})
	c := h.connect(t, "alice-token", "/mcp", client.EraSession)
	long := json.RawMessage(`{"duration":20,"steps":20}`)

	// The bridge's own catalog lookup quotes the server's answer: redacted
	// with the server's Secret values, not with the shapes only.
	t.Run("a catalog that cannot be listed is quoted redacted with the server's Secret values", func(t *testing.T) {
		for path, name := range map[string]string{"/mcp": "mcp.leakycatalog.ok", "/servers/leakycatalog/mcp": "ok"} {
			_, err := h.connect(t, "alice-token", path, client.EraSession).CallTool(testkit.Context(t), name, nil)
			if rpcCode(err) != CodeUpstream || strings.Contains(err.Error(), bridgetest.LeakedValue) || !strings.Contains(err.Error(), "[REDACTED:secret]") {
				t.Fatalf("a call on %s whose catalog lookup failed: %v, want %d with the server's Secret value redacted", path, err, CodeUpstream)
			}
		}
	})

	t.Run("an agent giving up leaves the shared connection alone", func(t *testing.T) {
		_, conn, _ := h.reg.Server("flaky")
		before, err := conn.Client(testkit.Context(t))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(testkit.Context(t), 500*time.Millisecond)
		defer cancel()
		if _, err := c.CallTool(ctx, "mcp.flaky.trigger-long-running-operation", long); err == nil {
			t.Fatal("the abandoned call succeeded")
		}
		// Another agent's request right after: dropping the connection on
		// the first agent's cancel ended the upstream session under it.
		bob := h.connect(t, "bob-token", "/mcp", client.EraSession)
		if _, err := bob.Call(testkit.Context(t), "resources/list", nil); err != nil {
			t.Fatalf("another agent's request failed after a cancel: %v", err)
		}
		if after, err := conn.Client(testkit.Context(t)); err != nil || after != before {
			t.Fatalf("the cancel replaced the upstream connection (%v)", err)
		}
	})

	t.Run("crash mid-call", func(t *testing.T) {
		before := fwd.Calls()
		errc := make(chan error, 1)
		go func() {
			_, err := c.CallTool(testkit.Context(t), "mcp.flaky.trigger-long-running-operation", long)
			errc <- err
		}()
		// Its bytes have gone through to the server: the crash is mid-call.
		testkit.Eventually(t, "the call reaches the server", func() bool { return fwd.Calls() == before+1 })
		flakyUp.Kill()
		select {
		case err := <-errc:
			if rpcCode(err) != CodeUpstream || !strings.Contains(err.Error(), "mcp_server_unstable") {
				t.Fatalf("the crashed call ended with %v, want mcp_server_unstable", err)
			}
			if r, ok := retryable(err); !ok || r || !strings.Contains(err.Error(), "may have run there") {
				t.Fatalf("the crashed call ended with %v: want retryable false in its data, and told it may have run", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the call did not end when its server crashed")
		}
		// The bridge never retries a call: a replay would have gone out
		// before the failure was answered.
		if n := fwd.Calls() - before; n != 1 {
			t.Fatalf("the server was sent the call %d times, want exactly once", n)
		}
		ev := h.events(t)
		id := lastCallID(ev, "mcp.flaky.trigger-long-running-operation")
		if got := strings.Join(typesOf(ev, id), " "); got != "permission.requested permission.resolved mcp.call.started tool.started mcp.call.failed tool.failed" {
			t.Fatalf("the crashed call's chain is %q", got)
		}
	})

	t.Run("a crash storm leaves another server alone", func(t *testing.T) {
		var stop atomic.Bool
		var steadyCalls, steadyFailures atomic.Int32
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			pace := time.NewTicker(10 * time.Millisecond)
			defer pace.Stop()
			for ; !stop.Load(); <-pace.C {
				if _, err := c.CallTool(testkit.Context(t), "mcp.steady.test_simple_text", nil); err != nil {
					steadyFailures.Add(1)
					t.Logf("steady call failed: %v", err)
				}
				steadyCalls.Add(1)
			}
		}()
		for i := 1; i <= 3; i++ {
			up := testpeers.NodeEverything(t)
			fwd := bridgetest.Forward(t, strings.TrimSuffix(strings.TrimPrefix(up.URL, "http://"), "/mcp"), "/mcp")
			s := bridgetest.Published(t, "tools", "flaky", fwd.URL, v1alpha1.ToolsSpec{})
			s.Status.Endpoint.PodName = "pod-storm-" + string(rune('0'+i))
			s.Status.Restarts.Total, s.Status.Restarts.Consecutive = int32(i), int32(i)
			h.reg.Update(routes.Build([]v1alpha1.MCPServer{faults, steady, s}), target)
			errc := make(chan error, 1)
			go func() {
				_, err := c.CallTool(testkit.Context(t), "mcp.flaky.trigger-long-running-operation", long)
				errc <- err
			}()
			testkit.Eventually(t, "the call reaches the server", func() bool { return fwd.Calls() == 1 })
			up.Kill()
			if err := <-errc; rpcCode(err) != CodeUpstream {
				t.Fatalf("storm crash %d: the call ended with %v", i, err)
			}
		}
		stop.Store(true)
		wg.Wait()
		if steadyFailures.Load() != 0 || steadyCalls.Load() < 10 {
			t.Fatalf("the steady server had %d failures in %d calls during the storm", steadyFailures.Load(), steadyCalls.Load())
		}
	})

	t.Run("a 50 MB answer goes to the artifact store", func(t *testing.T) {
		// Its own bridge, with a deadline that 50 MB read, checked, scanned
		// and stored meets on a loaded machine (3 s did not, under CI's load).
		h := newHarness(t, []v1alpha1.MCPServer{faults}, []v1alpha1.ToolPolicy{pol}, func(c *Config) { c.CallTimeout = 25 * time.Second })
		c := h.connect(t, "alice-token", "/mcp", client.EraSession)
		res, err := c.CallTool(testkit.Context(t), "mcp.faults.huge", nil)
		if err != nil {
			t.Fatalf("the huge call failed: %v", err)
		}
		if len(res) > 1<<20 {
			t.Fatalf("the agent got %d bytes, not a preview", len(res))
		}
		var r struct {
			Content []struct {
				Type string `json:"type"`
				URI  string `json:"uri"`
			} `json:"content"`
		}
		_ = json.Unmarshal(res, &r)
		uri := ""
		for _, it := range r.Content {
			if it.Type == "resource_link" {
				uri = it.URI
			}
		}
		if !strings.HasPrefix(uri, "artifact://") {
			t.Fatalf("no resource_link to the artifact in %s", res[:min(len(res), 600)])
		}
		whole, err := c.Call(testkit.Context(t), "resources/read", json.RawMessage(`{"uri":"`+uri+`"}`))
		if err != nil || len(whole) < bridgetest.HugeBytes {
			t.Fatalf("reading the artifact back: %d bytes, %v", len(whole), err)
		}
		bob := h.connect(t, "bob-token", "/mcp", client.EraSession)
		if _, err := bob.Call(testkit.Context(t), "resources/read", json.RawMessage(`{"uri":"`+uri+`"}`)); rpcCode(err) != jsonrpc.CodeResourceNotFound {
			t.Fatalf("another subject read the artifact: %v", err)
		}
	})

	t.Run("malformed JSON from the server", func(t *testing.T) {
		_, err := c.CallTool(testkit.Context(t), "mcp.faults.garbage", nil)
		if rpcCode(err) != CodeUpstream || !strings.Contains(err.Error(), "invalid_result") {
			t.Fatalf("garbage ended with %v, want invalid_result", err)
		}
		// It went upstream and may have run there: not safe to send again.
		if r, ok := retryable(err); !ok || r {
			t.Fatalf("garbage ended with %v: want retryable false in its data", err)
		}
		if _, err := c.CallTool(testkit.Context(t), "mcp.faults.ok", nil); err != nil {
			t.Fatalf("the next call to the same server failed: %v", err)
		}
	})

	// The bridge would scan the first of repeated keys, the agent's parser
	// keep the last. Upstream answers are held to the strict JSON
	// of agents' requests.
	t.Run("two-faced answers are refused", func(t *testing.T) {
		for _, tool := range []string{"twofaced", "casefaced", "errorfaced"} {
			_, err := c.CallTool(testkit.Context(t), "mcp.faults."+tool, nil)
			if rpcCode(err) != CodeUpstream || !strings.Contains(err.Error(), "invalid_result") || strings.Contains(err.Error(), "Ignore all") {
				t.Fatalf("%s ended with %v, want invalid_result", tool, err)
			}
		}
		if _, err := c.CallTool(testkit.Context(t), "mcp.faults.ok", nil); err != nil {
			t.Fatalf("the next call to the same server failed: %v", err)
		}
	})

	// A server's JSON-RPC error must not carry its Secret value or a token to
	// the agent or into the audit log, and is scanned.
	t.Run("an error message is redacted and scanned like a result", func(t *testing.T) {
		_, err := c.CallTool(testkit.Context(t), "mcp.faults.leakyerror", nil)
		if err == nil || strings.Contains(err.Error(), bridgetest.LeakedValue) || strings.Contains(err.Error(), bridgetest.LeakedToken) ||
			!strings.Contains(err.Error(), "login as admin with [REDACTED:secret] failed") || strings.Contains(err.Error(), "󠁹") {
			t.Fatalf("the agent got %v", err)
		}
		list, err := c.Call(testkit.Context(t), "tools/list", nil)
		if err != nil || !strings.Contains(string(list), "leakyerror, with [REDACTED:github-token]") || strings.Contains(string(list), `\u200b`) || invisible.Contains(string(list)) {
			t.Fatalf("tools/list gave %s (%v)", list, err)
		}
		h.events(t) // flushes the audit log
		if log := h.sink.String(); strings.Contains(log, bridgetest.LeakedValue) || strings.Contains(log, bridgetest.LeakedToken) || !strings.Contains(log, "[REDACTED:secret]") {
			t.Fatalf("the audit log holds the server's Secret or token, or not the failure:\n%s", log)
		}
	})

	// A body that is not JSON-RPC is quoted in the client's error: the
	// agent got it with the shapes redacted but the server's Secret value
	// in clear.
	t.Run("a failure quoting a body that is not JSON-RPC is redacted with the server's Secret values", func(t *testing.T) {
		_, err := c.CallTool(testkit.Context(t), "mcp.faults.leakyplain", nil)
		if err == nil || strings.Contains(err.Error(), bridgetest.LeakedValue) {
			t.Fatalf("the agent got %v", err)
		}
	})

	t.Run("slower than the deadline", func(t *testing.T) {
		start := time.Now()
		_, err := c.CallTool(testkit.Context(t), "mcp.faults.silent", nil)
		if rpcCode(err) != CodeUpstream || !strings.Contains(err.Error(), "timeout") {
			t.Fatalf("a silent server ended the call with %v, want timeout", err)
		}
		if r, ok := retryable(err); !ok || r {
			t.Fatalf("a timeout ended with %v: want retryable false in its data (the call may have run)", err)
		}
		if took := time.Since(start); took > 6*time.Second {
			t.Fatalf("the deadline of 3s ended the call after %s", took)
		}
	})
}
