package mcpbridge

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/identity"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn/oauth"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn/oauth/oauthtest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// publicURL is the bridge's URL as outside clients use it (an ingress in
// front); the tests reach the same handler on loopback.
const publicURL = "https://bridge.example.com"

// withOAuth makes a harness's bridge an OAuth resource for idp's tokens
// (prefix oidc:) in front of fallback, requiring scopes.
func withOAuth(t testing.TB, idp *oauthtest.Issuer, fallback authn.Authenticator, scopes ...string) func(*Config) {
	t.Helper()
	cfg, err := identity.IssuerConfig(idp.URL)
	if err != nil {
		t.Fatal(err)
	}
	res, err := oauth.NewResource(publicURL, []string{idp.URL}, scopes)
	if err != nil {
		t.Fatal(err)
	}
	a, err := oauth.New(cfg, oauth.Options{Resource: res, Fallback: fallback})
	if err != nil {
		t.Fatal(err)
	}
	return func(c *Config) { c.Auth, c.OAuth = a, res }
}

func user(name string) v1alpha1.Subject {
	return v1alpha1.Subject{Kind: v1alpha1.SubjectUser, Name: name}
}

// TestOAuthUsersSeeTheirCatalogs: two people with access tokens of the same
// issuer, each under a User-subject ToolPolicy naming them with the oidc:
// prefix, see their own tools in both eras; a ServiceAccount token still
// works on the same endpoint.
func TestOAuthUsersSeeTheirCatalogs(t *testing.T) {
	idp := oauthtest.New()
	defer idp.Close()
	up := testpeers.GoEverything(t, false)
	server := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{
		toolPolicy("tools", "alice", []v1alpha1.Subject{user("oidc:alice")}, rule("allow", "mcp.everything.test_simple_text")),
		toolPolicy("tools", "bob", []v1alpha1.Subject{user("oidc:bob")}, rule("allow", "mcp.everything.test_error_handling")),
		toolPolicy("tools", "agent", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.test_image_content")),
		// A person whose sub is a ServiceAccount's name is not it.
		toolPolicy("tools", "sa-named", []v1alpha1.Subject{user("system:serviceaccount:agents:mallory")}, rule("allow", "mcp.everything.test_audio_content")),
	}, withOAuth(t, idp, testCallers))

	alice := idp.Sign(idp.Claims("alice", publicURL+"/mcp"))
	bob := idp.Sign(idp.Claims("bob", publicURL+"/mcp"))
	mallory := idp.Sign(idp.Claims("system:serviceaccount:agents:mallory", publicURL+"/mcp"))
	for _, era := range []client.Era{client.EraSession, client.EraStateless} {
		t.Run(string(era), func(t *testing.T) {
			for token, want := range map[string][]string{
				alice:         {"mcp.everything.test_simple_text"},
				bob:           {"mcp.everything.test_error_handling"},
				"alice-token": {"mcp.everything.test_image_content"},
				mallory:       nil,
			} {
				if got := listNames(t, h.connect(t, token, "/mcp", era)); !slices.Equal(got, want) {
					t.Errorf("tools/list = %v, want %v", got, want)
				}
			}
			c := h.connect(t, alice, "/mcp", era)
			if _, err := c.CallTool(testkit.Context(t), "mcp.everything.test_simple_text", nil); err != nil {
				t.Fatalf("alice's allowed call: %v", err)
			}
			if _, err := c.CallTool(testkit.Context(t), "mcp.everything.test_error_handling", nil); rpcCode(err) != CodeDenied {
				t.Fatalf("alice calling bob's tool: %v, want denied", err)
			}
		})
	}
	// The audit names the person by the prefixed name.
	found := false
	for _, ev := range h.events(t) {
		if ev["subject"] == "oidc:alice" {
			found = true
		}
	}
	if !found {
		t.Fatal("no audit event names oidc:alice")
	}
}

// TestOAuthChallenges: what a client without a usable token is told, in
// RFC 6750 and RFC 9728 terms.
func TestOAuthChallenges(t *testing.T) {
	idp := oauthtest.New()
	defer idp.Close()
	h := newHarness(t, nil, nil, withOAuth(t, idp, testCallers, "mcp:tools"))
	meta := publicURL + "/.well-known/oauth-protected-resource"
	good := idp.Claims("alice", publicURL+"/mcp")
	good["scope"] = "mcp:tools"
	noScope := idp.Claims("alice", publicURL+"/mcp")
	otherAudience := idp.Claims("alice", "https://other.example.com/mcp")
	otherAudience["scope"] = "mcp:tools"

	for _, tc := range []struct {
		name, path, token string
		status            int
		challenge         string
	}{
		{"no token", "/mcp", "", 401, `Bearer resource_metadata="` + meta + `/mcp", scope="mcp:tools"`},
		{"no token, a server's endpoint", "/servers/github/mcp", "", 401, `Bearer resource_metadata="` + meta + `/servers/github/mcp", scope="mcp:tools"`},
		{"refused token", "/mcp", idp.Sign(otherAudience), 401, `Bearer resource_metadata="` + meta + `/mcp", scope="mcp:tools", error="invalid_token"`},
		{"garbage", "/mcp", "not-a-token", 401, `error="invalid_token"`},
		{"lacking the scope", "/mcp", idp.Sign(noScope), 403, `Bearer resource_metadata="` + meta + `/mcp", scope="mcp:tools", error="insufficient_scope"`},
		{"good", "/mcp", idp.Sign(good), 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, hdr := post(t, h.url+tc.path, tc.token, "", initBody, nil)
			got := hdr.Get("WWW-Authenticate")
			if status != tc.status || !strings.Contains(got, tc.challenge) || (tc.challenge == "") != (got == "") {
				t.Fatalf("status %d, WWW-Authenticate %q; want %d with %q", status, got, tc.status, tc.challenge)
			}
		})
	}
}

// A token in the URL is refused, never used, even a good one.
func TestTokenInQueryRefused(t *testing.T) {
	idp := oauthtest.New()
	defer idp.Close()
	h := newHarness(t, nil, nil, withOAuth(t, idp, testCallers))
	good := idp.Sign(idp.Claims("alice", publicURL+"/mcp"))
	for name, token := range map[string]string{"without the header": "", "beside the header": good} {
		status, _, hdr := post(t, h.url+"/mcp?access_token="+good, token, "", initBody, nil)
		if status != http.StatusBadRequest || !strings.Contains(hdr.Get("WWW-Authenticate"), `error="invalid_request"`) {
			t.Errorf("%s: status %d, WWW-Authenticate %q; want 400 invalid_request", name, status, hdr.Get("WWW-Authenticate"))
		}
	}
	// The same in a bridge with ServiceAccount tokens only.
	sa := newHarness(t, nil, nil, nil)
	if status, _, _ := post(t, sa.url+"/mcp?access_token=alice-token", "alice-token", "", initBody, nil); status != http.StatusBadRequest {
		t.Errorf("ServiceAccount-only bridge: status %d, want 400", status)
	}
}

func getMetadata(t *testing.T, url, host string) (int, oauth.Metadata, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var m oauth.Metadata
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("%s: %v (%s)", url, err, body)
		}
	}
	return resp.StatusCode, m, resp.Header
}

// TestProtectedResourceMetadata: the RFC 9728 documents of the bridge and
// of each endpoint, whose resource is always the configured URL.
func TestProtectedResourceMetadata(t *testing.T) {
	idp := oauthtest.New()
	defer idp.Close()
	h := newHarness(t, nil, nil, withOAuth(t, idp, testCallers, "mcp:tools"))
	for path, resource := range map[string]string{
		"":                    publicURL,
		"/mcp":                publicURL + "/mcp",
		"/mcp/search":         publicURL + "/mcp/search",
		"/servers/github/mcp": publicURL + "/servers/github/mcp",
	} {
		status, m, hdr := getMetadata(t, h.url+oauth.MetadataPath+path, "")
		if status != 200 || m.Resource != resource || !slices.Equal(m.AuthorizationServers, []string{idp.URL}) ||
			!slices.Equal(m.ScopesSupported, []string{"mcp:tools"}) || !slices.Equal(m.BearerMethodsSupported, []string{"header"}) ||
			hdr.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%q: %d %+v", path, status, m)
		}
	}
	// A client that came by another name (or an attacker's Host) is told
	// the configured resource, which then does not match its URL: a
	// conforming client stops there, and no token is ever minted for a
	// name the request chose.
	if _, m, _ := getMetadata(t, h.url+oauth.MetadataPath+"/mcp", "evil.example.com"); m.Resource != publicURL+"/mcp" {
		t.Fatalf("metadata for Host evil.example.com names %q", m.Resource)
	}
	if status, _, _ := getMetadata(t, h.url+oauth.MetadataPath+"/servers/Not_A_Name/mcp", ""); status != http.StatusNotFound {
		t.Errorf("a name no server can have: %d, want 404", status)
	}
	// ServiceAccount-only mode serves no metadata and keeps its challenge.
	sa := newHarness(t, nil, nil, nil)
	if status, _, _ := getMetadata(t, sa.url+oauth.MetadataPath+"/mcp", ""); status != http.StatusNotFound {
		t.Errorf("metadata without OAuth: %d, want 404", status)
	}
	if _, _, hdr := post(t, sa.url+"/mcp", "", "", initBody, nil); hdr.Get("WWW-Authenticate") != `Bearer realm="mcp-operator"` {
		t.Errorf("ServiceAccount-only challenge %q", hdr.Get("WWW-Authenticate"))
	}
}

// Start's OAuth wiring: the public URL is required, and it is the resource
// of both the metadata and the audience check.
func TestOAuthAuthenticatorWiring(t *testing.T) {
	idp := oauthtest.New()
	defer idp.Close()
	cfg, err := identity.IssuerConfig(idp.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := oauthAuthenticator(Options{Authentication: cfg}, testCallers); err == nil || !strings.Contains(err.Error(), "--public-url") {
		t.Fatalf("without a public URL: %v", err)
	}
	o := Options{Authentication: cfg, RequiredScopes: []string{"mcp"}}
	o.Bridge.PublicURL = "https://Bridge.example.com"
	res, auth, err := oauthAuthenticator(o, testCallers)
	if err != nil {
		t.Fatal(err)
	}
	if res.URL != "https://bridge.example.com" || !slices.Equal(res.AuthorizationServers, []string{idp.URL}) || !slices.Equal(res.Scopes, []string{"mcp"}) {
		t.Fatalf("resource %+v", res)
	}
	c := idp.Claims("alice", "https://bridge.example.com/mcp")
	c["scope"] = "mcp"
	if id, err := auth.Authenticate(testkit.Context(t), idp.Sign(c)); err != nil || id.Username != "oidc:alice" {
		t.Fatalf("%+v %v", id, err)
	}
	if id, err := auth.Authenticate(testkit.Context(t), "alice-token"); err != nil || id.Kind != identity.ServiceAccount {
		t.Fatalf("a ServiceAccount token behind OAuth: %+v %v", id, err)
	}
}

// A server name that no server may have is never written into a challenge:
// the card of /servers/a"b/mcp is not found before any token is asked for.
func TestChallengeNamesNoBadServer(t *testing.T) {
	idp := oauthtest.New()
	defer idp.Close()
	h := newHarness(t, nil, nil, withOAuth(t, idp, testCallers))
	for _, path := range []string{"/servers/a%22b/mcp/server-card", "/servers/a%5Cb/mcp/server-card", "/servers/A/mcp/server-card"} {
		req, _ := http.NewRequestWithContext(testkit.Context(t), http.MethodGet, h.url+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("WWW-Authenticate") != "" {
			t.Errorf("%s: status %d, WWW-Authenticate %q; want 404 and no challenge", path, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
}

// The access_token parameter is found however its name is escaped.
func TestEscapedTokenInQueryRefused(t *testing.T) {
	idp := oauthtest.New()
	defer idp.Close()
	h := newHarness(t, nil, nil, withOAuth(t, idp, testCallers))
	good := idp.Sign(idp.Claims("alice", publicURL+"/mcp"))
	for _, name := range []string{"access%5Ftoken", "%61ccess_token"} {
		if status, _, _ := post(t, h.url+"/mcp?"+name+"="+good, good, "", initBody, nil); status != http.StatusBadRequest {
			t.Errorf("?%s=: status %d, want 400", name, status)
		}
	}
}

// A token naming a key the issuer published after the bridge last read its
// keys is answered 503 with a Retry-After, not refused: a client that
// would sign in again on 401 retries instead.
func TestUnknownKeyAnswersRetry(t *testing.T) {
	idp := oauthtest.New()
	defer idp.Close()
	h := newHarness(t, nil, nil, withOAuth(t, idp, testCallers))
	if status, _, _ := post(t, h.url+"/mcp", idp.Sign(idp.Claims("alice", publicURL+"/mcp")), "", initBody, nil); status != http.StatusOK {
		t.Fatalf("a good token: %d", status)
	}
	idp.AddKey("ES256")
	status, _, hdr := post(t, h.url+"/mcp", idp.Sign(idp.Claims("alice", publicURL+"/mcp")), "", initBody, nil)
	retry, _ := strconv.Atoi(hdr.Get("Retry-After"))
	if status != http.StatusServiceUnavailable || retry < 2 || retry > int(oauth.DefaultMinKeyRefresh.Seconds()) || hdr.Get("WWW-Authenticate") != "" {
		t.Fatalf("a just-rotated key's token: status %d, Retry-After %q, WWW-Authenticate %q; want 503 with the wait until the next read",
			status, hdr.Get("Retry-After"), hdr.Get("WWW-Authenticate"))
	}
}
