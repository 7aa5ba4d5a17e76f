package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// BenchmarkToolCall is one tools/call, in one process but for the
// everything-server: the agent (the bench's: mcp-go's client in a
// 2025-11-25 session, ours in the 2026-07-28 era; agent.go) calls an
// upstream directly, or through a bridge of the bench's (TokenReview behind
// its cache, one allow rule, the output pipeline, audit to a file), over
// loopback HTTP both hops. The
// bridge's own cost per call is the difference between the two: allocs/op
// and B/op are exact, ns/op is as loaded as the machine is, and cpu-ns/op
// is the CPU the process spent per call (the client's and the bridge's, and
// the fast upstream's, which runs in it; not the everything-server's). Two upstreams,
// as in the bench: fast (mcp-go's echo in this process, JSON answers, both
// eras) and everything (the go-sdk everything-server's test_simple_text in
// its own process, built by make peers; session era, SSE answers), whose
// allocations are not counted. Each upstream has its own bridge, so that
// the fast rows run without the everything-server.
//
//	go test ./bench/bridge -run x -bench ToolCall -benchmem -count 6
func BenchmarkToolCall(b *testing.B) {
	for _, up := range []struct {
		name, tool, answer string
		args               json.RawMessage
		eras               []client.Era
		start              func(*testing.B) string // starts the upstream, returns its URL
	}{
		{"fast", "echo", fastAnswer, fastArgs, []client.Era{client.EraSession, client.EraStateless}, startFast},
		// Started in its own rows: without bin/everything-server they fail
		// (GoEverything says to run make peers), the fast rows still run.
		{"everything", "test_simple_text", everythingAnswer, nil, []client.Era{client.EraSession}, func(b *testing.B) string { return testpeers.GoEverything(b, false).URL }},
	} {
		b.Run(up.name, func(b *testing.B) {
			url := up.start(b)
			front := startBridge(b, up.name, url)
			for _, path := range []struct{ name, url, tool string }{
				{"direct", url, up.tool},
				{"bridge", front, "mcp." + up.name + "." + up.tool},
			} {
				for _, era := range up.eras {
					b.Run(path.name+"/"+string(era), func(b *testing.B) {
						benchCalls(b, path.url, era, path.tool, up.args, up.answer)
					})
				}
			}
		})
	}
}

// startFast serves the fast upstream (mcp-go's echo) in this process.
func startFast(b *testing.B) string {
	fast := httptest.NewServer(fastServer())
	b.Cleanup(fast.Close)
	return fast.URL
}

// startBridge serves the bench's bridge in front of one upstream, and
// returns the bridge's MCP endpoint.
func startBridge(b *testing.B, name, url string) string {
	br, stop, err := newBridge(context.Background(), name+"="+url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(stop)
	front := httptest.NewServer(br.Handler())
	b.Cleanup(front.Close)
	return front.URL + "/mcp"
}

// benchCalls times b.N calls of tool in one agent session, after a first
// call (which makes the bridge's upstream session) that must answer a
// text ending in answer (the bridge prefixes it with where it came from).
func benchCalls(b *testing.B, url string, era client.Era, tool string, args json.RawMessage, answer string) {
	c, err := connect(url, benchToken, era)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := checkedCall(ctx, c, tool, args, answer); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := testkit.ProcessCPU()
	for range b.N {
		if _, err := c.CallTool(ctx, tool, args); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(testkit.ProcessCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// A tool's error result comes back from CallTool as a success: the bench's
// check of an answer refuses it, and any text but the one expected.
func TestCheckAnswer(t *testing.T) {
	for _, c := range []struct {
		res string
		ok  bool
	}{
		{`{"content":[{"type":"text","text":"[fast] hello"}]}`, true},
		{`{"content":[{"type":"text","text":"hello"}],"isError":true}`, false},
		{`{"content":[{"type":"text","text":"tool echo failed"}]}`, false},
		{`{"content":[]}`, false},
		{`not json`, false},
	} {
		if err := checkAnswer("echo", json.RawMessage(c.res), fastAnswer); (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok %v", c.res, err, c.ok)
		}
	}
}

// mcp-go's client hands back its typed result: encoded again for the
// check, an error result (isError) and a wrong text are still refused.
func TestCheckAnswerOfMCPGoResults(t *testing.T) {
	for _, c := range []struct {
		res *mcpgo.CallToolResult
		ok  bool
	}{
		{mcpgo.NewToolResultText("[mcp:fast:echo] hello"), true},
		{mcpgo.NewToolResultError("hello"), false},
		{mcpgo.NewToolResultText("hello there"), false},
	} {
		raw, err := mcpgoResult{c.res}.JSON()
		if err != nil {
			t.Fatal(err)
		}
		if err := checkAnswer("echo", raw, fastAnswer); (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok %v", raw, err, c.ok)
		}
	}
}
