package mcpbridge

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/mcp-operator/mcp-operator/internal/mcp/toolname"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn/oauth"
)

// serveResourceMetadata serves the RFC 9728 protected resource metadata of
// the bridge (/.well-known/oauth-protected-resource) or of one of its MCP
// endpoints (the same followed by the endpoint's path): where clients get
// tokens for it and which scopes to ask for. It needs no token, as a
// client reads it to learn how to get one. The document's resource is the
// configured public URL whatever Host the request named (oauth.Resource).
func (b *Bridge) serveResourceMetadata(w http.ResponseWriter, r *http.Request) {
	if !b.hostAllowed(r.Host) {
		http.Error(w, "Host is not allowed (DNS rebinding protection)", http.StatusForbidden)
		return
	}
	path := strings.TrimPrefix(r.URL.Path, oauth.MetadataPath)
	if name := r.PathValue("name"); name != "" && toolname.ValidateServer(name) != nil {
		http.NotFound(w, r)
		return
	}
	data, err := json.Marshal(b.cfg.OAuth.Metadata(path))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	// Public, and read by browser-based MCP clients from other origins.
	w.Header().Set("Access-Control-Allow-Origin", "*")
	_, _ = w.Write(data)
}
