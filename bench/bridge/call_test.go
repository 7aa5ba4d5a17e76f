package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
)

// BenchmarkToolCall is one tools/call of the fast upstream's echo, in one
// process: the agent (our client) calls it directly, or through the bench's
// bridge (TokenReview behind its cache, one allow rule, the output
// pipeline, audit to a file), over loopback HTTP both hops. The bridge's
// own cost per call is the difference between the two: allocs/op and B/op
// are exact, ns/op is as loaded as the machine is.
//
//	go test ./bench/bridge -run x -bench ToolCall -benchmem -count 6
func BenchmarkToolCall(b *testing.B) {
	up := httptest.NewServer(fastServer())
	defer up.Close()
	br, stop, err := newBridge(context.Background(), "fast="+up.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	front := httptest.NewServer(br.Handler())
	defer front.Close()

	args := json.RawMessage(`{"text":"hello"}`)
	for _, path := range []struct{ name, url, tool string }{
		{"direct", up.URL, "echo"},
		{"bridge", front.URL + "/mcp", "mcp.fast.echo"},
	} {
		for _, era := range []client.Era{client.EraSession, client.EraStateless} {
			b.Run(path.name+"/"+string(era), func(b *testing.B) {
				c, err := connect(path.url, benchToken, era)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				ctx := context.Background()
				// The first call makes the bridge's upstream session; the bridge
				// prefixes the text with where it came from.
				res, err := c.CallTool(ctx, path.tool, args)
				if err != nil {
					b.Fatal(err)
				}
				var r struct {
					Content []struct{ Text string } `json:"content"`
				}
				if json.Unmarshal(res, &r) != nil || len(r.Content) != 1 || !strings.HasSuffix(r.Content[0].Text, "hello") {
					b.Fatalf("the echo answered %s", res)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, err := c.CallTool(ctx, path.tool, args); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
