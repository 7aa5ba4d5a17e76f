package output_test

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/artifact"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/redact"
)

// A tools/call result on its way from the upstream to the agent. The
// Summary feeds tool.completed.
func ExamplePipeline_ToolResult() {
	dir, _ := os.MkdirTemp("", "artifacts")
	defer os.RemoveAll(dir)
	store, _ := artifact.Open(dir)
	p := &output.Pipeline{Store: store} // one per bridge
	c := output.Call{
		Server:   "everything",
		Name:     "get-env",
		Subject:  "system:serviceaccount:agents:bot",
		Redactor: redact.New("s3cr3t-db-password"), // built once per server from its Secrets
	}
	upstream := json.RawMessage(`{"content":[{"type":"text","text":"DB_PASSWORD=s3cr3t-db-password\nGITHUB_TOKEN=ghp_A1b2C3A1b2C3A1b2C3A1b2C3A1b2C3A1b2C3"}]}`)
	out, sum, err := p.ToolResult(c, upstream)
	if err != nil {
		fmt.Println(err) // answer the agent with an error; write tool.failed
		return
	}
	fmt.Println(string(out))
	fmt.Println(sum.Redactions.Map(), sum.Capped, len(sum.Findings))
	// Output:
	// {"content":[{"type":"text","text":"[mcp:everything:get-env] DB_PASSWORD=[REDACTED:secret]\nGITHUB_TOKEN=[REDACTED:github-token]"}]}
	// map[github-token:1 secret:1] false 0
}
