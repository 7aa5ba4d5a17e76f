package devidp

import (
	"crypto/subtle"
	"slices"
	"strings"

	"github.com/zitadel/oidc/v3/pkg/oidc"
)

// User is a person who signs in on the login page. Their Email is both the token's `sub` and its
// `email` claim, so a resource server that maps either claim to a username sees the same name.
type User struct {
	// Username is what the person types on the login page.
	Username string
	// Password is compared as typed. The default users' passwords are published below: this
	// provider is for tests and local development only.
	Password string
	Email    string
	Name     string
	Groups   []string
}

// The default people. Their passwords are public on purpose: the provider never runs anywhere a
// real person signs in.
var (
	Alice = User{Username: "alice", Password: "alice-password", Email: "alice@example.com", Name: "Alice Example", Groups: []string{"engineering"}}
	Bob   = User{Username: "bob", Password: "bob-password", Email: "bob@example.com", Name: "Bob Example", Groups: []string{"sales"}}
)

// Client is an OAuth client known to the provider.
type Client struct {
	ID string
	// Secret is empty for a public client (a desktop MCP client); a public client must use PKCE
	// and its loopback redirects match on any port (RFC 8252 section 7.3), never another path.
	Secret string
	// RedirectURIs are matched exactly or as globs (`*` within a segment, `**` across them).
	RedirectURIs []string
	GrantTypes   []oidc.GrantType
	// ExchangeAudiences are, for a client with the token-exchange grant, the resources it
	// serves: it may only exchange a subject token whose audience names one of them or a URL
	// beneath one (as Keycloak requires the subject token to be meant for the exchanging
	// client), so a resource server cannot trade a token it was never meant to receive.
	// Empty: it may exchange none.
	ExchangeAudiences []string
	// Claims go into tokens whose subject is the client itself (client credentials), so an agent
	// has a name and groups the way a person does.
	Claims map[string]any
}

// The default clients' ids and secrets (test-only values, like the users' passwords).
const (
	MCPClientID     = "mcp-client"
	BridgeClientID  = "mcp-bridge"
	BridgeSecret    = "mcp-bridge-secret"
	ConsoleClientID = "mcp-console"
	ConsoleSecret   = "mcp-console-secret"
	AgentClientID   = "mcp-agent"
	AgentSecret     = "mcp-agent-secret"
)

// loopbackRedirects are the callbacks of a client on this machine: any port at the time of the
// request, nothing else (RFC 8252 section 7.3); the paths are fixed, /callback (Claude Code, the
// TypeScript SDK's examples) and /oauth/callback (the MCP Inspector). op matches a public
// (native) client's loopback redirects on any port by itself; a confidential (web) client's only
// exactly or by glob, so for one each gets a port glob (`*` stays within the host's segment).
func loopbackRedirects(confidential bool) []string {
	var uris []string
	for _, host := range []string{"127.0.0.1", "localhost", "[::1]"} {
		for _, path := range []string{"/callback", "/oauth/callback"} {
			uris = append(uris, "http://"+host+path)
			if confidential {
				// Brackets would be a character class in a glob: escaped.
				glob := strings.NewReplacer("[", `\[`, "]", `\]`).Replace(host)
				uris = append(uris, "http://"+glob+":*"+path)
			}
		}
	}
	return uris
}

// DefaultClients returns the clients every provider starts with:
//   - mcp-client: public, authorization code with PKCE (S256) and refresh tokens, loopback redirects;
//   - mcp-bridge: confidential, RFC 8693 token exchange (the bridge trading a caller's token for
//     one whose audience is an upstream server), of subject tokens for Config.BridgeResources;
//   - mcp-console: confidential, authorization code with PKCE, loopback redirects plus consoleRedirects;
//   - mcp-agent: confidential, client credentials; its tokens name it `mcp-agent` in group `agents`.
func DefaultClients(consoleRedirects ...string) []Client {
	code := []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
	return []Client{
		{ID: MCPClientID, RedirectURIs: loopbackRedirects(false), GrantTypes: code},
		{ID: BridgeClientID, Secret: BridgeSecret, GrantTypes: []oidc.GrantType{oidc.GrantTypeTokenExchange}},
		{ID: ConsoleClientID, Secret: ConsoleSecret, RedirectURIs: append(loopbackRedirects(true), consoleRedirects...), GrantTypes: code},
		{ID: AgentClientID, Secret: AgentSecret, GrantTypes: []oidc.GrantType{oidc.GrantTypeClientCredentials},
			Claims: map[string]any{"preferred_username": AgentClientID, "groups": []string{"agents"}}},
	}
}

// claims are the claims that name a user in access tokens, ID tokens and userinfo.
func (u *User) claims() map[string]any {
	return map[string]any{
		"email":              u.Email,
		"email_verified":     true,
		"preferred_username": u.Username,
		"name":               u.Name,
		"groups":             slices.Clone(u.Groups),
	}
}

func (u *User) userInfo(info *oidc.UserInfo) {
	info.Subject = u.Email
	info.Email = u.Email
	info.EmailVerified = true
	info.PreferredUsername = u.Username
	info.Name = u.Name
	info.AppendClaims("groups", slices.Clone(u.Groups))
}

func secretMatches(want, got string) bool {
	return subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1
}
