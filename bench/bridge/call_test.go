package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// BenchmarkToolCall is one tools/call, in one process but for the
// everything-server: the agent (our client) calls an upstream directly, or
// through the bench's bridge (TokenReview behind its cache, one allow rule,
// the output pipeline, audit to a file), over loopback HTTP both hops. The
// bridge's own cost per call is the difference between the two: allocs/op
// and B/op are exact, ns/op is as loaded as the machine is, and cpu-ns/op
// is the CPU the process spent per call (the client's and the bridge's, and
// the fast upstream's, which runs in it; not the everything-server's). Two upstreams,
// as in the bench: fast (mcp-go's echo in this process, JSON answers, both
// eras) and everything (the go-sdk everything-server's test_simple_text in
// its own process, built by make peers; session era, SSE answers), whose
// allocations are not counted.
//
//	go test ./bench/bridge -run x -bench ToolCall -benchmem -count 6
func BenchmarkToolCall(b *testing.B) {
	fast := httptest.NewServer(fastServer())
	defer fast.Close()
	everything := testpeers.GoEverything(b, false)
	br, stop, err := newBridge(context.Background(), "fast="+fast.URL+",everything="+everything.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	front := httptest.NewServer(br.Handler())
	defer front.Close()

	for _, up := range []struct {
		name, url, tool, answer string
		args                    json.RawMessage
		eras                    []client.Era
	}{
		{"fast", fast.URL, "echo", "hello", json.RawMessage(`{"text":"hello"}`), []client.Era{client.EraSession, client.EraStateless}},
		{"everything", everything.URL, "test_simple_text", "This is a simple text response for testing.", nil, []client.Era{client.EraSession}},
	} {
		for _, path := range []struct{ name, url, tool string }{
			{"direct", up.url, up.tool},
			{"bridge", front.URL + "/mcp", "mcp." + up.name + "." + up.tool},
		} {
			for _, era := range up.eras {
				b.Run(up.name+"/"+path.name+"/"+string(era), func(b *testing.B) {
					benchCalls(b, path.url, era, path.tool, up.args, up.answer)
				})
			}
		}
	}
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
	res, err := c.CallTool(ctx, tool, args)
	if err != nil {
		b.Fatal(err)
	}
	var r struct {
		Content []struct{ Text string } `json:"content"`
	}
	if json.Unmarshal(res, &r) != nil || len(r.Content) != 1 || !strings.HasSuffix(r.Content[0].Text, answer) {
		b.Fatalf("%s answered %s", tool, res)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		if _, err := c.CallTool(ctx, tool, args); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time this process has used, user and system: what a
// call costs the cores, which its wall time does not say (a call waits for
// the upstream, and the scheduler's wake-ups are CPU spent off its path).
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
