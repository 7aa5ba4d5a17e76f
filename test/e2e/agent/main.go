// Command agent is the e2e tests' agent. It runs in a pod with a projected
// ServiceAccount token (audience mcp-operator), calls the bridge as an agent
// would, and prints each step's outcome as a JSON line for the test to read
// from the pod's log.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
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
}

func report(s step) {
	line, _ := json.Marshal(s)
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
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
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
	c, err := client.Connect(ctx, conn, client.Options{ClientName: "e2e-agent", ClientVersion: "1"})
	if err != nil {
		report(step{Step: "connect", Error: err.Error()})
		os.Exit(1)
	}
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
		res, err := c.CallTool(ctx, name, json.RawMessage(args))
		s := step{Step: "call", Tool: name, Result: res}
		if err != nil {
			s.Error = err.Error()
		}
		report(s)
	}
}
