package devidp

import (
	"slices"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
)

// authRequest is an authorization request between /authorize and the code's redemption.
type authRequest struct {
	id        string
	req       *oidc.AuthRequest
	resources []string // RFC 8707 resource indicators: the access token's audience
	subject   string
	authTime  time.Time
	done      bool
	created   time.Time
}

func (a *authRequest) GetID() string  { return a.id }
func (a *authRequest) GetACR() string { return "" }
func (a *authRequest) GetAMR() []string {
	if a.done {
		return []string{"pwd"}
	}
	return nil
}

// GetAudience names the resources the client asked for and the client itself: the access token
// and the ID token are built from the same request, and an ID token's audience must contain the
// client (OIDC Core 2), while the access token's must name the resource server.
func (a *authRequest) GetAudience() []string {
	return audience(a.resources, a.req.ClientID)
}

func (a *authRequest) GetAuthTime() time.Time { return a.authTime }
func (a *authRequest) GetClientID() string    { return a.req.ClientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge {
	return &oidc.CodeChallenge{Challenge: a.req.CodeChallenge, Method: a.req.CodeChallengeMethod}
}
func (a *authRequest) GetNonce() string                   { return a.req.Nonce }
func (a *authRequest) GetRedirectURI() string             { return a.req.RedirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType { return a.req.ResponseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode { return a.req.ResponseMode }
func (a *authRequest) GetScopes() []string                { return a.req.Scopes }
func (a *authRequest) GetState() string                   { return a.req.State }
func (a *authRequest) GetSubject() string                 { return a.subject }
func (a *authRequest) Done() bool                         { return a.done }

// clientRequest is a client credentials request: the client is its own subject.
type clientRequest struct {
	clientID  string
	scopes    []string
	resources []string
}

func (c *clientRequest) GetSubject() string    { return c.clientID }
func (c *clientRequest) GetAudience() []string { return audience(c.resources, c.clientID) }
func (c *clientRequest) GetScopes() []string   { return c.scopes }

// refreshGrant is what a refresh token stands for; it serves as op.RefreshTokenRequest.
type refreshGrant struct {
	token    string
	subject  string
	clientID string
	audience []string
	scopes   []string
	amr      []string
	authTime time.Time
}

func (g *refreshGrant) GetAMR() []string                 { return g.amr }
func (g *refreshGrant) GetAudience() []string            { return g.audience }
func (g *refreshGrant) GetAuthTime() time.Time           { return g.authTime }
func (g *refreshGrant) GetClientID() string              { return g.clientID }
func (g *refreshGrant) GetScopes() []string              { return g.scopes }
func (g *refreshGrant) GetSubject() string               { return g.subject }
func (g *refreshGrant) SetCurrentScopes(scopes []string) { g.scopes = scopes }

// accessGrant is the record of an issued access token, by its `jti`.
type accessGrant struct {
	subject  string
	clientID string
	audience []string
	scopes   []string
	expires  time.Time
}

func audience(resources []string, clientID string) []string {
	if slices.Contains(resources, clientID) {
		return slices.Clone(resources)
	}
	return append(slices.Clone(resources), clientID)
}
