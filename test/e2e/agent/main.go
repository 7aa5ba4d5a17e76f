// Command agent is the e2e tests' agent. It runs in a pod with a projected
// ServiceAccount token (audience mcp-operator), calls the bridge as an agent
// would, and prints each step's outcome as a JSON line for the test to read
// from the pod's log (while it runs, too: a test can act on what it has
// done so far).
//
// With --repeat it then keeps calling one tool on the same connection for a
// bounded time and never reconnects, so a test can see what a session of the
// 2025-11-25 era (--era session) goes through meanwhile: every call reports
// the Mcp-Session-Id it was sent with.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
)

// step is one line of the agent's report.
type step struct {
	Step   string          `json:"step"`
	Tool   string          `json:"tool,omitempty"`
	Status int             `json:"status,omitempty"`
	Tools  []string        `json:"tools,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	// Session is the Mcp-Session-Id sent ("" in the stateless era), Version
	// the negotiated protocol version.
	Session string `json:"session,omitempty"`
	Version string `json:"version,omitempty"`
	// At is when a repeated call was sent, Ms how long it took.
	At *time.Time `json:"at,omitempty"`
	Ms float64    `json:"ms,omitempty"`
}

// reportMu keeps the lines of calls made at once whole.
var reportMu sync.Mutex

func report(s step) {
	line, _ := json.Marshal(s)
	reportMu.Lock()
	defer reportMu.Unlock()
	fmt.Println(string(line))
}

// calls is a repeated --call flag: TOOL or TOOL=JSON_ARGS.
type calls []string

func (c *calls) String() string     { return strings.Join(*c, ",") }
func (c *calls) Set(v string) error { *c = append(*c, v); return nil }

func main() {
	url := flag.String("url", "", "the bridge's MCP endpoint")
	tokenFile := flag.String("token-file", "/var/run/secrets/mcp-operator/token", "projected ServiceAccount token")
	var toCall calls
	flag.Var(&toCall, "call", "a tool to call, TOOL or TOOL=JSON_ARGS (repeatable)")
	era := flag.String("era", "", `"session" (2025-11-25) or "stateless" (2026-07-28); "" tries stateless first`)
	repeat := flag.String("repeat", "", "after the calls, call this tool (no arguments) again and again on the same connection")
	every := flag.Duration("every", 500*time.Millisecond, "the pause between repeated calls")
	repeatFor := flag.Duration("for", 15*time.Second, "how long to keep repeating")
	callTimeout := flag.Duration("call-timeout", 5*time.Second, "how long a repeated call may take")
	traceparent := flag.String("traceparent", "", "a W3C traceparent to send in each --call's params._meta, as a traced agent does")
	// A call a person approves waits for them: a test that decides
	// ToolApprovals gives the calls more time.
	callsFor := flag.Duration("timeout", time.Minute, "how long connecting and the --call calls may take in all")
	concurrent := flag.Int("concurrent", 1, "send each --call this many times at once, each reported (many first calls at one moment)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *callsFor+*repeatFor)
	defer cancel()

	// Without a token the bridge must refuse.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, *url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		report(step{Step: "no-token", Error: err.Error()})
	} else {
		resp.Body.Close()
		report(step{Step: "no-token", Status: resp.StatusCode})
	}

	token, err := os.ReadFile(*tokenFile)
	if err != nil {
		report(step{Step: "token", Error: err.Error()})
		os.Exit(1)
	}
	conn, err := streamhttp.New(streamhttp.Options{URL: *url, BearerToken: strings.TrimSpace(string(token))})
	if err != nil {
		report(step{Step: "connect", Error: err.Error()})
		os.Exit(1)
	}
	defer conn.Close()
	c, err := client.Connect(ctx, conn, client.Options{ClientName: "e2e-agent", ClientVersion: "1", Era: client.Era(*era)})
	if err != nil {
		report(step{Step: "connect", Error: err.Error()})
		os.Exit(1)
	}
	report(step{Step: "connect", Session: conn.SessionID(), Version: c.ProtocolVersion()})
	items, err := c.ListTools(ctx, client.Limits{})
	list := step{Step: "list"}
	if err != nil {
		list.Error = err.Error()
	}
	for _, raw := range items {
		var t struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(raw, &t)
		list.Tools = append(list.Tools, t.Name)
	}
	report(list)

	for _, call := range toCall {
		name, args, _ := strings.Cut(call, "=")
		var wg sync.WaitGroup
		for range max(*concurrent, 1) {
			wg.Go(func() {
				res, err := callTool(ctx, c, name, json.RawMessage(args), *traceparent)
				s := step{Step: "call", Tool: name, Result: res, Session: conn.SessionID()}
				if err != nil {
					s.Error = err.Error()
				}
				report(s)
			})
		}
		wg.Wait()
	}

	if *repeat != "" {
		repeatCalls(ctx, c, conn, *repeat, *every, *repeatFor, *callTimeout)
	}
}

// callTool calls tool name, in the trace of traceparent when one is given
// (params._meta.traceparent, where OpenTelemetry's conventions for MCP put
// it).
func callTool(ctx context.Context, c *client.Client, name string, args json.RawMessage, traceparent string) (json.RawMessage, error) {
	if traceparent == "" {
		return c.CallTool(ctx, name, args)
	}
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	params, err := json.Marshal(map[string]any{"name": name, "arguments": args, "_meta": map[string]string{"traceparent": traceparent}})
	if err != nil {
		return nil, err
	}
	return c.CallToolParams(ctx, params)
}

// repeatCalls calls tool every interval until d has passed, each call
// bounded by timeout, reporting each call. A failed call is reported and the next one goes out as usual: what
// the test wants to see is whether the same session carries on.
func repeatCalls(ctx context.Context, c *client.Client, conn *streamhttp.Conn, tool string, every, d, timeout time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		at := time.Now()
		s := step{Step: "repeat", Tool: tool, Session: conn.SessionID(), At: &at}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		_, err := c.CallTool(cctx, tool, nil)
		cancel()
		s.Ms = float64(time.Since(at).Microseconds()) / 1000
		if err != nil {
			s.Error = err.Error()
		}
		report(s)
		time.Sleep(every)
	}
}
