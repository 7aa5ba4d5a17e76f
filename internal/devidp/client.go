package devidp

import (
	"slices"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// opClient adapts a Client to the op.Client interface.
type opClient struct {
	Client
	loginURL string
}

var _ op.HasRedirectGlobs = (*opClient)(nil)

func (c *opClient) public() bool { return c.Secret == "" }

func (c *opClient) GetID() string                    { return c.ID }
func (c *opClient) PostLogoutRedirectURIs() []string { return nil }
func (c *opClient) PostLogoutRedirectURIGlobs() []string {
	return nil
}

// RedirectURIs are the exact ones; the globs come through RedirectURIGlobs.
func (c *opClient) RedirectURIs() []string {
	return slices.DeleteFunc(slices.Clone(c.Client.RedirectURIs), isGlob)
}

func (c *opClient) RedirectURIGlobs() []string {
	return slices.DeleteFunc(slices.Clone(c.Client.RedirectURIs), func(u string) bool { return !isGlob(u) })
}

func isGlob(u string) bool {
	return slices.ContainsFunc([]rune(u), func(r rune) bool { return r == '*' })
}

// ApplicationType: a public client is native (loopback redirects on any port), a confidential
// one a web application.
func (c *opClient) ApplicationType() op.ApplicationType {
	if c.public() {
		return op.ApplicationTypeNative
	}
	return op.ApplicationTypeWeb
}

func (c *opClient) AuthMethod() oidc.AuthMethod {
	if c.public() {
		return oidc.AuthMethodNone
	}
	return oidc.AuthMethodBasic
}

func (c *opClient) ResponseTypes() []oidc.ResponseType {
	if slices.Contains(c.Client.GrantTypes, oidc.GrantTypeCode) {
		return []oidc.ResponseType{oidc.ResponseTypeCode}
	}
	return nil
}

func (c *opClient) GrantTypes() []oidc.GrantType         { return c.Client.GrantTypes }
func (c *opClient) LoginURL(id string) string            { return c.loginURL + "?authRequestID=" + id }
func (c *opClient) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeJWT }
func (c *opClient) IDTokenLifetime() time.Duration       { return time.Hour }
func (c *opClient) DevMode() bool                        { return false }
func (c *opClient) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *opClient) ClockSkew() time.Duration             { return 0 }
func (c *opClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

func (c *opClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// IsScopeAllowed allows every scope: resource servers define their own (the bridge's
// scopes_supported), and a development provider has no reason to refuse one.
func (c *opClient) IsScopeAllowed(string) bool { return true }
