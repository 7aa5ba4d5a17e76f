// Package protocol holds the MCP protocol's names that more than one part
// of the project speaks: the revisions and the keys of the stateless
// revision's per-request _meta. Defined here once.
package protocol

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
