package oauth

import (
	"fmt"
	"net/url"
	"strings"
)

// MetadataPath is where RFC 9728 protected resource metadata is served;
// the metadata of the resource at path P is at MetadataPath + P.
const MetadataPath = "/.well-known/oauth-protected-resource"

// Resource is the bridge as an OAuth protected resource: the URL clients
// use, which every accepted token's aud must name (RFC 8707), where clients
// get tokens, and the scopes a token must carry.
type Resource struct {
	// URL is the bridge's public URL in canonical form (scheme and host
	// lower case, no default port, no trailing slash).
	URL string
	// AuthorizationServers are the issuers clients may get tokens from.
	AuthorizationServers []string
	// Scopes every token must carry (and the metadata's scopes_supported).
	Scopes []string
}

// NewResource checks and canonicalizes the public URL.
func NewResource(publicURL string, authorizationServers, scopes []string) (*Resource, error) {
	c, err := Canonical(publicURL)
	if err != nil || c == "" {
		return nil, fmt.Errorf("the bridge's public URL %q must be an absolute http(s) URL (the resource tokens are minted for)", publicURL)
	}
	return &Resource{URL: c, AuthorizationServers: authorizationServers, Scopes: scopes}, nil
}

// Canonical is u in the canonical form RFC 8707 and the MCP authorization
// spec compare resource URIs in: scheme and host lower case, no default
// port, no trailing slash, no fragment.
func Canonical(u string) (string, error) {
	p, err := url.Parse(u)
	if err != nil {
		return "", err
	}
	if (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" || p.Fragment != "" || p.User != nil {
		return "", fmt.Errorf("%q is not an absolute http(s) URL without fragment", u)
	}
	host := strings.ToLower(p.Host)
	scheme := strings.ToLower(p.Scheme)
	host = strings.TrimSuffix(host, map[string]string{"https": ":443", "http": ":80"}[scheme])
	s := scheme + "://" + host + strings.TrimSuffix(p.EscapedPath(), "/")
	if p.RawQuery != "" {
		s += "?" + p.RawQuery
	}
	return s, nil
}

// ResourcePath is the resource a request path belongs to: the MCP
// endpoint (a server card's endpoint for its card), "" for anything else.
func ResourcePath(path string) string {
	path = strings.TrimSuffix(path, "/server-card")
	switch {
	case path == "/mcp", path == "/mcp/search":
		return path
	case strings.HasPrefix(path, "/servers/") && strings.HasSuffix(path, "/mcp"):
		name := strings.TrimSuffix(strings.TrimPrefix(path, "/servers/"), "/mcp")
		if name != "" && !strings.Contains(name, "/") {
			return path
		}
	}
	return ""
}

// Accepts says whether a token's aud names this bridge: its URL, or one of
// its MCP endpoints under it (clients use the URL of the endpoint they
// connect to as the resource).
func (r *Resource) Accepts(aud string) bool {
	c, err := Canonical(aud)
	if err != nil {
		return false
	}
	if c == r.URL {
		return true
	}
	rest, ok := strings.CutPrefix(c, r.URL)
	return ok && ResourcePath(rest) == rest && rest != ""
}

// MetadataURL is where the metadata of the resource at path is.
func (r *Resource) MetadataURL(path string) string {
	return r.URL + MetadataPath + path
}

// Metadata is an RFC 9728 protected resource metadata document.
type Metadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// Metadata is the document of the resource at path ("" for the bridge as
// a whole). Its resource is always built from the configured URL, never
// from the request's Host: a client that reached the bridge by another
// name sees a resource that differs from the URL it used and, as RFC 9728
// requires, does not use the metadata (nor get a token for a name an
// attacker chose).
func (r *Resource) Metadata(path string) Metadata {
	return Metadata{
		Resource:               r.URL + path,
		AuthorizationServers:   r.AuthorizationServers,
		ScopesSupported:        r.Scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "mcp-operator bridge",
	}
}

// Challenge is the WWW-Authenticate value of a refusal at path (RFC 6750,
// RFC 9728): where the metadata is, the scopes to ask for, and errCode
// (invalid_token, insufficient_scope; "" when no token was sent).
func (r *Resource) Challenge(path, errCode, description string) string {
	var b strings.Builder
	b.WriteString(`Bearer resource_metadata="`)
	b.WriteString(r.MetadataURL(path))
	b.WriteByte('"')
	if len(r.Scopes) > 0 {
		b.WriteString(`, scope="`)
		b.WriteString(strings.Join(r.Scopes, " "))
		b.WriteByte('"')
	}
	if errCode != "" {
		b.WriteString(`, error="`)
		b.WriteString(errCode)
		b.WriteByte('"')
	}
	if description != "" {
		b.WriteString(`, error_description="`)
		b.WriteString(quotable(description))
		b.WriteByte('"')
	}
	return b.String()
}

// quotable keeps what RFC 6750 allows in error_description (printable
// ASCII but " and \).
func quotable(s string) string {
	return strings.Map(func(c rune) rune {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return '\''
		}
		return c
	}, s)
}
