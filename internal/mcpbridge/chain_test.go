package mcpbridge

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/signed"
)

var update = flag.Bool("update", false, "rewrite the golden event chains in testdata")

// steppingClock advances 1.5 ms at every reading, so durations and times in
// the stream are fixed however fast the machine is.
type steppingClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *steppingClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(1500 * time.Microsecond)
	return c.t
}

// TestEventChainsByteForByte: the event chain of one tool call through the
// bridge, and of one call the server answers with a JSON-RPC error, are
// exactly the golden streams (fixed clock, session and call ids).
func TestEventChainsByteForByte(t *testing.T) {
	up := testpeers.GoEverything(t, false)
	server := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "researchers", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.*"))
	for _, tc := range []struct {
		golden, tool string
		args         json.RawMessage
		wantErr      bool
	}{
		{"chain-success.jsonl", "mcp.everything.test_simple_text", json.RawMessage(`{"note":"token ghp_abcdefghijklmnopqrstuvwxyz0123456789"}`), false},
		{"chain-failure.jsonl", "mcp.everything.test_missing_capability", nil, true},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			clock := &steppingClock{t: time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC)}
			var n int
			sealer, _ := signed.New(testKey)
			h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, func(c *Config) {
				c.Clock = clock.now
				c.NewCallID = func() string { n++; return fmt.Sprintf("call-%d", n) }
				c.Sessions = session.NewManager(sealer, session.Options{NewID: func() string { return "3f1c9a7e-5b2d-4e8a-9c6f-0d1e2f3a4b5c" }})
			})
			// The audit writer reads the same clock.
			h.audit.Close(context.Background())
			h.sink = &bridgetest.Sink{}
			h.audit = audit.New(audit.Options{Sink: h.sink, Clock: clock.now})
			h.b.cfg.Audit = h.audit

			c := h.connect(t, "alice-token", "/mcp", client.EraSession)
			_, err := c.CallTool(ctxT(t), tc.tool, tc.args)
			if (err != nil) != tc.wantErr {
				t.Fatalf("call: %v (want an error: %v)", err, tc.wantErr)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := h.audit.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			got := h.sink.String()
			path := filepath.Join("testdata", tc.golden)
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if got != string(want) {
				t.Fatalf("the event chain differs from %s:\ngot:\n%s\nwant:\n%s", path, got, want)
			}
		})
	}
}
