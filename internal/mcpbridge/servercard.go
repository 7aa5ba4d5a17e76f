package mcpbridge

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/toolname"
	"github.com/mcp-operator/mcp-operator/internal/policy"
)

// Server cards (the MCP server card extension): a static JSON document at
// <endpoint>/server-card that tells a client, before it connects, what the
// endpoint is and how to reach it. Cards list no tools, prompts or
// resources (the extension leaves those to the lists, which are decided
// per caller), so a card never shows more than a policy allows:
//
//   - /mcp/server-card and /mcp/search/server-card are public, as the
//     extension means cards to be: they name the bridge and its two
//     aggregate endpoints, nothing of the servers behind them.
//   - /servers/<name>/mcp/server-card names a server, so it is served only
//     to an authenticated caller that may call at least one of its tools;
//     to anyone else it does not exist (404, as for a server not served).

// The card's media type and schema.
const (
	serverCardType   = "application/mcp-server-card+json"
	serverCardSchema = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"
	// serverCardName is the bridge's card name: reverse-DNS style, one
	// slash.
	serverCardName = "mcp-operator/bridge"
	// publicCardVersion is the version a public card gives: the schema
	// asks for one, and the build that runs is not told to callers without
	// a token (it would tell an attacker which fixes it lacks).
	publicCardVersion = "0.0.0"
)

// serverCard is the card document (the fields the bridge fills).
type serverCard struct {
	Schema      string   `json:"$schema"`
	Name        string   `json:"name"`
	Version     string   `json:"version"`
	Title       string   `json:"title,omitempty"`
	Description string   `json:"description"`
	Remotes     []remote `json:"remotes"`
}

type remote struct {
	Type                      string        `json:"type"`
	URL                       string        `json:"url"`
	Headers                   []remoteInput `json:"headers"`
	SupportedProtocolVersions []string      `json:"supportedProtocolVersions"`
}

type remoteInput struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	IsRequired  bool   `json:"isRequired"`
	IsSecret    bool   `json:"isSecret"`
}

// serveCard answers GET <endpoint>/server-card; endpoint is "" for /mcp and
// SearchPath, else a server name.
func (b *Bridge) serveCard(w http.ResponseWriter, r *http.Request, endpoint string) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "Method Not Allowed: a server card is read with GET", http.StatusMethodNotAllowed)
		return
	}
	if !b.hostAllowed(r.Host) {
		http.Error(w, "Host is not allowed (DNS rebinding protection)", http.StatusForbidden)
		return
	}
	path := r.URL.Path[:len(r.URL.Path)-len("/server-card")]
	card := serverCard{Schema: serverCardSchema, Name: serverCardName, Version: publicCardVersion, Title: "mcp-operator bridge"}
	cache := "public, max-age=3600"
	switch {
	case endpoint != "":
		id, ok := b.authenticate(w, r)
		if !ok {
			return
		}
		if !b.mayUseServer(r, id.Subject(), endpoint) {
			http.NotFound(w, r)
			return
		}
		card.Name += "." + endpoint
		card.Version = b.cfg.Version
		card.Description = "The MCP server " + endpoint + " through a policy-enforcing bridge"
		// It depends on the caller.
		cache = "private, max-age=60"
	case path == SearchPath:
		card.Description = "MCP servers' tools through a policy-enforcing bridge, found by search"
	default:
		card.Description = "MCP servers' tools through a policy-enforcing bridge"
	}
	card.Remotes = []remote{b.remote(path)}
	data, err := json.Marshal(card)
	if err != nil {
		http.Error(w, "the bridge could not encode its card", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", serverCardType)
	h.Set("Cache-Control", cache)
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", "GET")
	h.Set("Access-Control-Allow-Headers", "Content-Type, Authorization")
	_, _ = w.Write(data)
}

// remote is the endpoint at path: absolute under the configured public URL,
// else the path alone (relative to the card's own URL's origin). A URL
// built from the request would say http:// behind an ingress that
// terminates TLS, and whatever Host the caller sent.
func (b *Bridge) remote(path string) remote {
	return remote{
		Type: "streamable-http",
		URL:  strings.TrimSuffix(b.cfg.PublicURL, "/") + path,
		Headers: []remoteInput{{
			Name: "Authorization", IsRequired: true, IsSecret: true,
			Description: "Bearer and a Kubernetes token with the bridge's audience: the caller's identity, which its ToolPolicies name",
		}},
		SupportedProtocolVersions: supportedVersions(),
	}
}

// supportedVersions are the revisions the bridge speaks, newest first.
func supportedVersions() []string {
	return append([]string{client.StatelessVersion}, client.LegacyVersions...)
}

// mayUseServer says whether subject may call at least one tool of the
// server named name.
func (b *Bridge) mayUseServer(r *http.Request, subject policy.Subject, name string) bool {
	if toolname.ValidateServer(name) != nil {
		return false
	}
	if _, _, ok := b.cfg.Registry.Server(name); !ok {
		return false
	}
	c, err := b.cfg.Registry.Catalog(r.Context(), name)
	if err != nil {
		return false
	}
	eng := b.engine.Load()
	for _, t := range c.Tools {
		if eng.ToolVisible(subject, toolCall(t, nil)) {
			return true
		}
	}
	return false
}
