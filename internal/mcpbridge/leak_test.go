package mcpbridge

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// TestSessionsLeaveNoGoroutinesBehind: agents of both eras open sessions,
// call a stateful server and the everything server (progress, a resource
// read, a prompt), and end their sessions, round after round; once they
// have, the bridge's goroutines are back where they were after the first
// round. A goroutine kept per session or per call would grow with the
// rounds (the soak's bridge goroutines grew while its sessions came and
// went).
func TestSessionsLeaveNoGoroutinesBehind(t *testing.T) {
	h, _ := statefulAndEverything(t)
	_, url := serve(t, h.b.Handler())
	h.url = url

	round := func(n int) {
		t.Helper()
		for i := range 10 {
			era := client.EraSession
			if i%2 == 1 {
				era = client.EraStateless
			}
			c := h.connect(t, "alice-token", "/mcp", era)
			for j := range 3 {
				if _, err := c.CallTool(testkit.Context(t), "mcp.stateful.remember", json.RawMessage(fmt.Sprintf(`{"value":"r%d-%d-%d"}`, n, i, j))); err != nil {
					t.Fatalf("round %d: %v", n, err)
				}
			}
			if _, err := c.CallToolParams(testkit.Context(t), json.RawMessage(`{"name":"mcp.everything.test_tool_with_progress","arguments":{},"_meta":{"progressToken":"p"}}`)); err != nil {
				t.Fatalf("round %d: %v", n, err)
			}
			if err := c.Close(); err != nil {
				t.Fatalf("round %d: while ending the session: %v", n, err)
			}
		}
	}
	settled := func() int {
		// Connections idle in the clients' pools end with their
		// transports; what is left is the bridge's and the servers'.
		var n int
		for range 50 {
			runtime.GC()
			n = runtime.NumGoroutine()
			time.Sleep(100 * time.Millisecond)
			if m := runtime.NumGoroutine(); m == n {
				break
			}
		}
		return n
	}
	round(0)
	base := settled()
	var counts []int
	for n := 1; n <= 5; n++ {
		round(n)
		counts = append(counts, settled())
	}
	// A few goroutines come and go with timers and idle connections; one
	// per session would be 10 a round, 50 in all.
	if last := counts[len(counts)-1]; last > base+8 {
		t.Errorf("goroutines after the first round %d, after each of 5 more %v: growing with sessions that ended", base, counts)
	}
	t.Logf("goroutines after the first round %d, after each of 5 more %v", base, counts)
}
