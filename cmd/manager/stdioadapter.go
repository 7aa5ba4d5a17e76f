package main

import (
	"io"

	"github.com/mcp-operator/mcp-operator/internal/stdioadapter"
)

// runStdioAdapter serves a stdio MCP server over Streamable HTTP. Server
// pods run the same command line from the small stdio-adapter binary
// (cmd/stdio-adapter), which starts and installs faster.
func runStdioAdapter(args []string, _, stderr io.Writer) int {
	return stdioadapter.Main("manager stdio-adapter", args, stderr)
}
