// Package protocol holds the MCP protocol's names that more than one part
// of the project speaks: the revisions and the keys of the stateless
// revision's per-request _meta. Defined here once.
package protocol

import (
	"encoding/json"

	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// Revisions.
const (
	// StatelessVersion is the first revision without sessions
	// (server/discover, input_required, no Mcp-Session-Id).
	StatelessVersion = "2026-07-28"
	// LatestLegacy is the newest session-era revision.
	LatestLegacy = "2025-11-25"
)

// LegacyVersions are the session-era revisions, newest first.
var LegacyVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// Keys of the stateless revision's per-request _meta.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
)

// Headers of the 2026-07-28 revision that repeat a request's body, so that
// proxies can route and limit without reading it. A receiver that finds one
// differing from the body refuses the request (jsonrpc.CodeHeaderMismatch).
const (
	HeaderMethod = "Mcp-Method"
	HeaderName   = "Mcp-Name"
)

// RequestName is what the Mcp-Name header of a request names: the tool or
// prompt name of tools/call and prompts/get, the URI of resources/read, and
// nothing ("") for other methods.
func RequestName(method string, params json.RawMessage) string {
	key := "name"
	switch method {
	case "tools/call", "prompts/get":
	case "resources/read":
		key = "uri"
	default:
		return ""
	}
	s, _ := rawjson.String(rawjson.Get(params, key))
	return s
}
