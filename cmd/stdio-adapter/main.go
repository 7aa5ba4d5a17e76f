// Command stdio-adapter serves a stdio MCP server over Streamable HTTP inside
// the server's pod: `manager stdio-adapter` alone, in a binary of its own. A
// sidecar of the operator's image installs it next to the server (its
// postStart hook runs --install, then it idles with --hold), and it runs as
// the server container's entrypoint; a sixth of the manager's size and
// without its libraries, it is copied and started in a fraction of the time,
// which a server's start (and a sleeping server's wake) waits for.
package main

import (
	"os"

	"github.com/mcp-operator/mcp-operator/internal/stdioadapter"
)

func main() {
	os.Exit(stdioadapter.Main("stdio-adapter", os.Args[1:], os.Stderr))
}
