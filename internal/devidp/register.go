package devidp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	httphelper "github.com/zitadel/oidc/v3/pkg/http"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Dynamic client registration (RFC 7591), which desktop MCP clients use when they have no client
// id configured. Every registered client is a public native client (PKCE, no secret), and only
// the redirect URIs such a client can receive on this machine are registered (RFC 8252): http
// loopback ones (any port at the time of the request) and private-use schemes (cursor://…,
// vscode://…). A request naming others as well registers the acceptable ones and answers with
// that list, as RFC 7591 lets a server replace requested metadata; one naming none is refused.

// maxDynamicClients bounds how many clients may register: each is kept in memory until the
// provider stops.
const maxDynamicClients = 1000

// notPrivateUse are schemes that are not an application's own: a browser handles them itself.
var notPrivateUse = []string{"http", "https", "javascript", "data", "file", "about", "blob", "vbscript", "ftp", "ws", "wss"}

// acceptableRedirect says whether a native public client may register u.
func acceptableRedirect(raw string) bool {
	// A '*' would make the URI a glob (opClient.RedirectURIGlobs), matching redirects the
	// client never named.
	if strings.Contains(raw, "*") {
		return false
	}
	u, err := url.Parse(raw)
	if err != nil || u.Fragment != "" || u.Scheme == "" {
		return false
	}
	if u.Scheme == "http" {
		_, loopback := op.HTTPLoopbackOrLocalhost(raw)
		return loopback
	}
	return !slices.Contains(notPrivateUse, strings.ToLower(u.Scheme))
}

type registration struct {
	RedirectURIs            []string `json:"redirect_uris"`
	ClientName              string   `json:"client_name,omitempty"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method,omitempty"`
	GrantTypes              []string `json:"grant_types,omitempty"`
	ResponseTypes           []string `json:"response_types,omitempty"`
	ClientID                string   `json:"client_id,omitempty"`
	ClientIDIssuedAt        int64    `json:"client_id_issued_at,omitempty"`
}

func registrationError(w http.ResponseWriter, kind, description string) {
	httphelper.MarshalJSONWithStatus(w, map[string]string{"error": kind, "error_description": description}, http.StatusBadRequest)
}

func (p *Provider) register(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var req registration
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil {
		registrationError(w, "invalid_client_metadata", "the body must be a JSON client metadata document")
		return
	}
	if len(req.RedirectURIs) == 0 {
		registrationError(w, "invalid_redirect_uri", "redirect_uris is required")
		return
	}
	redirects := slices.DeleteFunc(slices.Clone(req.RedirectURIs), func(u string) bool { return !acceptableRedirect(u) })
	if len(redirects) == 0 {
		registrationError(w, "invalid_redirect_uri", "none of the redirect URIs can be registered here: only http loopback ones (http://127.0.0.1:PORT/PATH, http://localhost…, http://[::1]…) and private-use schemes (app://…) are, for a native client on this machine")
		return
	}
	c := Client{ID: "dyn-" + randomID(), RedirectURIs: redirects,
		GrantTypes: []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}}
	p.store.mu.Lock()
	full := p.store.dynamic >= maxDynamicClients
	if !full {
		p.store.dynamic++
		p.store.clients[c.ID] = &c
	}
	p.store.mu.Unlock()
	if full {
		registrationError(w, "invalid_client_metadata", fmt.Sprintf("%d clients have registered already, the most this provider keeps: restart it, or use client id %s", maxDynamicClients, MCPClientID))
		return
	}

	httphelper.MarshalJSONWithStatus(w, registration{
		ClientID: c.ID, ClientIDIssuedAt: time.Now().Unix(), ClientName: req.ClientName,
		RedirectURIs: redirects, TokenEndpointAuthMethod: string(oidc.AuthMethodNone),
		GrantTypes: []string{string(oidc.GrantTypeCode), string(oidc.GrantTypeRefreshToken)}, ResponseTypes: []string{string(oidc.ResponseTypeCode)},
	}, http.StatusCreated)
}
