package devidp

import (
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	httphelper "github.com/zitadel/oidc/v3/pkg/http"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Dynamic client registration (RFC 7591), which desktop MCP clients use when they have no client
// id configured. Every registered client is public (PKCE, no secret) and may only redirect to
// loopback addresses: the provider runs for development on one machine.

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
	for _, u := range req.RedirectURIs {
		if _, loopback := op.HTTPLoopbackOrLocalhost(u); !loopback || !httpScheme(u) {
			registrationError(w, "invalid_redirect_uri", "only http loopback redirect URIs can be registered here: "+u)
			return
		}
	}
	c := Client{ID: "dyn-" + randomID(), RedirectURIs: req.RedirectURIs,
		GrantTypes: []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}}
	p.store.mu.Lock()
	p.store.clients[c.ID] = &c
	p.store.mu.Unlock()

	httphelper.MarshalJSONWithStatus(w, registration{
		ClientID: c.ID, ClientIDIssuedAt: time.Now().Unix(), ClientName: req.ClientName,
		RedirectURIs: req.RedirectURIs, TokenEndpointAuthMethod: string(oidc.AuthMethodNone),
		GrantTypes: []string{string(oidc.GrantTypeCode), string(oidc.GrantTypeRefreshToken)}, ResponseTypes: []string{string(oidc.ResponseTypeCode)},
	}, http.StatusCreated)
}

func httpScheme(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Scheme == "http"
}
