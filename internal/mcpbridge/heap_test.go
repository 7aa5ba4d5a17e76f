package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// BenchmarkHeapUnderMixedLoad: agents of both eras open ever-new sessions
// and, in each, call tools (allowed, denied, asked and allowed once, with
// progress, now and then a 1 MiB result), read a resource, get a prompt,
// subscribe and unsubscribe, then end the session. It reports what the
// bridge's live heap grew by per 1,000 sessions after a warm-up: state
// kept per session, per call or per requestState that is never freed
// shows here; a bounded remembrance of ended sessions (tombstones) and of
// used requestStates (until their deadline) is the expected rest. Run it
// with -benchtime=3000x or more, and -memprofile to see what grew.
func BenchmarkHeapUnderMixedLoad(t *testing.B) {
	everything := testpeers.GoEverything(t, false)
	server := bridgetest.Published(t, "tools", "everything", everything.URL, v1alpha1.ToolsSpec{})
	echo := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	type msg struct {
		Message string `json:"message"`
	}
	mcp.AddTool(echo, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in msg) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
	})
	echoSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echo }, nil))
	t.Cleanup(echoSrv.Close)
	echoServer := bridgetest.Published(t, "tools", "echo", echoSrv.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice")},
		rule("allow", "mcp.everything.*", "mcp.echo.*"), rule("ask", "mcp.everything.test_audio_content"), rule("deny", "mcp.everything.test_image_content"))
	pol.Spec.Resources = []v1alpha1.ResourceRule{{Servers: []string{"everything"}, Decision: "allow"}}
	pol.Spec.Prompts = []v1alpha1.PromptRule{{Prompts: []string{"mcp.everything.*"}, Decision: "allow"}}
	aw := audit.New(audit.Options{Sink: io.Discard, ArgsMode: audit.ArgsFull})
	h := newHarness(t, []v1alpha1.MCPServer{server, echoServer}, []v1alpha1.ToolPolicy{pol}, func(c *Config) {
		c.Log = logr.Discard()
		c.Audit = aw
		c.CallTimeout = time.Minute
	})
	var sessions, calls, failures atomic.Int64
	big := strings.Repeat("x", 1<<20)
	agent := func(n int) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if n%5 == 4 {
			// an agent that is asked, and allows once
			c := mcp.NewClient(&mcp.Implementation{Name: "go-agent", Version: "1.0.0"}, &mcp.ClientOptions{
				ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "allow_once"}}, nil
				}})
			tr := &mcp.StreamableClientTransport{Endpoint: h.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{"alice-token", http.DefaultTransport}}, DisableStandaloneSSE: true}
			var sopts *mcp.ClientSessionOptions
			if n%10 == 4 {
				sopts = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
			}
			cs, err := c.Connect(ctx, tr, sopts)
			if err != nil {
				t.Logf("a Go SDK agent could not connect: %v", err)
				failures.Add(1)
				return
			}
			sessions.Add(1)
			for range 3 {
				calls.Add(1)
				if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp.everything.test_audio_content"}); err != nil || res.IsError {
					if failures.Add(1) < 20 {
						t.Logf("a call a Go SDK agent allowed once: %v %+v", err, res)
					}
				}
			}
			cs.Close()
			return
		}
		era := client.EraSession
		if n%2 == 1 {
			era = client.EraStateless
		}
		conn, err := streamhttp.New(streamhttp.Options{URL: h.url + "/mcp", BearerToken: "alice-token", MaxMessageBytes: 128 << 20})
		if err != nil {
			t.Error(err)
			return
		}
		c, err := client.Connect(ctx, conn, client.Options{Era: era, ClientName: "soak-agent"})
		if err != nil {
			t.Logf("an agent could not connect: %v", err)
			failures.Add(1)
			return
		}
		defer c.Close()
		sessions.Add(1)
		do := func(err error) {
			calls.Add(1)
			if err != nil {
				if failures.Add(1) < 20 {
					t.Logf("era %v: %v", era, err)
				}
			}
		}
		for j := range 4 {
			_, err := c.CallTool(ctx, "mcp.echo.echo", json.RawMessage(fmt.Sprintf(`{"message":"s%d-%d"}`, n, j)))
			do(err)
		}
		// denied by the policy: an error is what is wanted
		_, err = c.CallTool(ctx, "mcp.everything.test_image_content", json.RawMessage(`{}`))
		calls.Add(1)
		if err == nil {
			t.Log("a denied call ran")
			failures.Add(1)
		}
		_, err = c.CallToolParams(ctx, json.RawMessage(`{"name":"mcp.everything.test_tool_with_progress","arguments":{},"_meta":{"progressToken":"p"}}`))
		do(err)
		_, err = c.Call(ctx, "resources/read", json.RawMessage(`{"uri":"`+textURI+`"}`))
		do(err)
		_, err = c.Call(ctx, "prompts/get", json.RawMessage(`{"name":"mcp.everything.test_simple_prompt"}`))
		do(err)
		if era == client.EraSession {
			uri := BridgeURI("everything", watched)
			_, err = c.Call(ctx, "resources/subscribe", json.RawMessage(`{"uri":"`+uri+`"}`))
			do(err)
			_, err = c.Call(ctx, "resources/unsubscribe", json.RawMessage(`{"uri":"`+uri+`"}`))
			do(err)
		}
		if n%20 == 0 {
			_, err = c.CallTool(ctx, "mcp.echo.echo", json.RawMessage(`{"message":"`+big+`"}`))
			do(err)
		}
	}
	// run has 8 agents at a time open n sessions in all.
	run := func(n int) {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1); i <= int64(n); i = next.Add(1) {
					agent(int(i))
				}
			}()
		}
		wg.Wait()
	}
	live := func() (bytes, objects uint64) {
		// The audit queue may still hold a 1 MiB result's event.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := aw.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		var ms runtime.MemStats
		for range 3 {
			runtime.GC()
		}
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc, ms.HeapObjects
	}
	run(200)
	bytes0, objects0 := live()
	t.ResetTimer()
	run(t.N)
	t.StopTimer()
	bytes1, objects1 := live()
	if f := failures.Load(); f > 0 {
		t.Fatalf("%d of %d requests failed", f, calls.Load())
	}
	perK := func(v0, v1 uint64) float64 { return (float64(v1) - float64(v0)) * 1000 / float64(t.N) }
	t.ReportMetric(perK(bytes0, bytes1), "heap-B/1k-sessions")
	t.ReportMetric(perK(objects0, objects1), "heap-objects/1k-sessions")
	t.ReportMetric(float64(calls.Load())/float64(sessions.Load()), "requests/session")
}
