// Command stdio-adapter serves a stdio MCP server over Streamable HTTP inside
// the server's pod: `manager stdio-adapter` alone, in a binary of its own. An
// init container copies it next to the server, and it runs as the server
// container's entrypoint; a sixth of the manager's size and without its
// libraries, it is copied and started in a fraction of the time, which a
// server's start (and a sleeping server's wake) waits for.
package main

import (
	"os"

	"github.com/mcp-operator/mcp-operator/internal/stdioadapter"
)

func main() {
	os.Exit(stdioadapter.Main("stdio-adapter", os.Args[1:], os.Stderr))
}
