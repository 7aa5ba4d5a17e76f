package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
)

// serveMCPGo is the alternative the design suggested for the bridge's
// server side: mcp-go's Streamable HTTP server, forwarding each upstream
// tool over one shared upstream connection — with no authentication,
// policy, output pipeline or audit, so it shows the floor of that design.
func serveMCPGo(listen, upstreamURL string) error {
	conn, err := streamhttp.New(streamhttp.Options{URL: upstreamURL})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	up, err := client.Connect(ctx, conn, client.Options{ClientName: "bench-mcp-go"})
	if err != nil {
		return err
	}
	items, err := up.ListTools(ctx, client.Limits{})
	if err != nil {
		return err
	}
	s := mcpgoserver.NewMCPServer("bench-mcp-go", "1")
	for _, raw := range items {
		var t struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return fmt.Errorf("upstream tool: %w", err)
		}
		tool := mcpgo.NewTool(t.Name, mcpgo.WithDescription(t.Description))
		tool.RawInputSchema = t.InputSchema
		name := t.Name
		s.AddTool(tool, func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			args, _ := json.Marshal(req.GetArguments())
			res, err := up.CallTool(ctx, name, args)
			if err != nil {
				return nil, err
			}
			return mcpgo.ParseCallToolResult(&res)
		})
	}
	return http.ListenAndServe(listen, mcpgoserver.NewStreamableHTTPServer(s))
}
