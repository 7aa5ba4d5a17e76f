package main

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
)

// serveFast is the fast upstream: mcp-go's Streamable HTTP server with its
// defaults, which speak both protocol eras (server/discover and stateless
// 2026-07-28 requests, and initialize with 2025-11-25 sessions), with one
// tool, echo, that answers in about 0.2 ms. It counts what it is sent
// (upstreamStats) so the bench can print what each path does to it.
func serveFast(listen string) error {
	counter := &upstreamCounter{}
	counter.reset()
	mux := http.NewServeMux()
	mux.Handle("/mcp", counter.wrap(fastServer()))
	mux.HandleFunc("/stats", counter.serve)
	return http.ListenAndServe(listen, mux)
}

// upstreamStats is what the fast upstream was sent since the last reset:
// POSTs by protocol version header (none: the handshake's first request),
// distinct session ids, and the content types it answered with.
type upstreamStats struct {
	Posts     int            `json:"posts"`
	Versions  map[string]int `json:"versions"`
	Sessions  int            `json:"sessions"`
	Responses map[string]int `json:"responses"`
}

func (s upstreamStats) String() string {
	list := func(m map[string]int) string {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, k+" "+strconv.Itoa(m[k]))
		}
		return strings.Join(parts, ", ")
	}
	return "upstream sessions " + strconv.Itoa(s.Sessions) + "; versions: " + list(s.Versions) + "; answered: " + list(s.Responses)
}

type upstreamCounter struct {
	mu       sync.Mutex
	stats    upstreamStats
	sessions map[string]bool
}

func (c *upstreamCounter) reset() {
	c.stats = upstreamStats{Versions: map[string]int{}, Responses: map[string]int{}}
	c.sessions = map[string]bool{}
}

func (c *upstreamCounter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if r.Method != http.MethodPost {
			return
		}
		version := r.Header.Get("MCP-Protocol-Version")
		if version == "" {
			version = "none"
		}
		ct, _, _ := strings.Cut(w.Header().Get("Content-Type"), ";")
		c.mu.Lock()
		c.stats.Posts++
		c.stats.Versions[version]++
		c.stats.Responses[ct]++
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			c.sessions[id] = true
		}
		c.mu.Unlock()
	})
}

// serve answers /stats with the counts, and resets them on POST.
func (c *upstreamCounter) serve(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Sessions = len(c.sessions)
	_ = json.NewEncoder(w).Encode(c.stats)
	if r.Method == http.MethodPost {
		c.reset()
	}
}

// fastServer is the fast upstream's MCP endpoint.
func fastServer() http.Handler {
	s := mcpgoserver.NewMCPServer("bench-fast", "1", mcpgoserver.WithToolCapabilities(false))
	s.AddTool(mcpgo.NewTool("echo", mcpgo.WithDescription("Echoes its text."), mcpgo.WithString("text"), mcpgo.WithReadOnlyHintAnnotation(true), mcpgo.WithDestructiveHintAnnotation(false)),
		func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return mcpgo.NewToolResultText(req.GetString("text", "")), nil
		})
	return mcpgoserver.NewStreamableHTTPServer(s)
}
