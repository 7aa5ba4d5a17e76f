package identity

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const validConfig = `
apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: https://idp.example.com
    audiences: [mcp-client]
    audienceMatchPolicy: MatchAny
  claimValidationRules:
  - claim: hd
    requiredValue: example.com
  - expression: "claims.exp - claims.iat <= 3600"
    message: tokens must live an hour at most
  claimMappings:
    username: {claim: email, prefix: "corp:"}
    groups: {claim: groups, prefix: "corp:"}
- issuer:
    url: http://127.0.0.1:5556/dex
  claimMappings:
    username:
      expression: "'ci:' + claims.sub"
`

func TestLoadAuthenticationConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.yaml")
	if err := os.WriteFile(path, []byte(validConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadAuthenticationConfig(path)
	if err != nil {
		t.Fatalf("a valid configuration: %v", err)
	}
	if len(c.JWT) != 2 || c.JWT[0].Issuer.URL != "https://idp.example.com" || c.JWT[0].ClaimMappings.Username.Prefix != "corp:" {
		t.Fatalf("decoded %+v", c)
	}
	if _, err := LoadAuthenticationConfig(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("a missing file was accepted")
	}
}

func TestV1beta1Accepted(t *testing.T) {
	if _, err := ParseAuthenticationConfig([]byte(strings.Replace(validConfig, "/v1\n", "/v1beta1\n", 1))); err != nil {
		t.Fatal(err)
	}
}

// Every configuration that must not start, and the words of its message
// that tell what to fix.
func TestConfigRefused(t *testing.T) {
	const head = "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\n"
	cases := map[string]struct{ yaml, want string }{
		"no issuer":             {head + "jwt: []\n", "jwt lists no issuer"},
		"issuer without url":    {head + "jwt:\n- issuer: {}\n  claimMappings: {username: {claim: sub, prefix: 'x:'}}\n", "issuer.url is required"},
		"http issuer":           {head + "jwt:\n- issuer: {url: 'http://idp.example.com'}\n  claimMappings: {username: {claim: sub, prefix: 'x:'}}\n", "not loopback"},
		"issuer with query":     {head + "jwt:\n- issuer: {url: 'https://idp.example.com/?a=b'}\n  claimMappings: {username: {claim: sub, prefix: 'x:'}}\n", "no query"},
		"empty prefix":          {head + "jwt:\n- issuer: {url: 'https://idp.example.com'}\n  claimMappings: {username: {claim: sub}}\n", "prefix is empty"},
		"system prefix":         {head + "jwt:\n- issuer: {url: 'https://idp.example.com'}\n  claimMappings: {username: {claim: sub, prefix: 'system:x:'}}\n", "Kubernetes keeps"},
		"empty groups prefix":   {head + "jwt:\n- issuer: {url: 'https://idp.example.com'}\n  claimMappings: {username: {claim: sub, prefix: 'x:'}, groups: {claim: groups}}\n", "claimMappings.groups.prefix is empty"},
		"claim and expression":  {head + "jwt:\n- issuer: {url: 'https://idp.example.com'}\n  claimMappings: {username: {claim: sub, prefix: 'x:', expression: 'claims.sub'}}\n", "not both"},
		"no username":           {head + "jwt:\n- issuer: {url: 'https://idp.example.com'}\n  claimMappings: {}\n", "needs a claim"},
		"bad CEL":               {head + "jwt:\n- issuer: {url: 'https://idp.example.com'}\n  claimMappings: {username: {expression: 'claims.sub +'}}\n", "does not compile"},
		"bad rule":              {head + "jwt:\n- issuer: {url: 'https://idp.example.com'}\n  claimValidationRules: [{message: m}]\n  claimMappings: {username: {claim: sub, prefix: 'x:'}}\n", "claimValidationRules[0]"},
		"match policy":          {head + "jwt:\n- issuer: {url: 'https://idp.example.com', audienceMatchPolicy: MatchAll}\n  claimMappings: {username: {claim: sub, prefix: 'x:'}}\n", "MatchAny"},
		"bad CA":                {head + "jwt:\n- issuer: {url: 'https://idp.example.com', certificateAuthority: 'nope'}\n  claimMappings: {username: {claim: sub, prefix: 'x:'}}\n", "no PEM"},
		"unknown field":         {head + "jwt:\n- issuer: {url: 'https://idp.example.com', audience: x}\n  claimMappings: {username: {claim: sub, prefix: 'x:'}}\n", "unknown field"},
		"wrong kind":            {"apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\njwt:\n- issuer: {url: 'https://idp.example.com'}\n  claimMappings: {username: {claim: sub, prefix: 'x:'}}\n", "kind must be"},
		"wrong version":         {"apiVersion: apiserver.config.k8s.io/v2\nkind: AuthenticationConfiguration\njwt:\n- issuer: {url: 'https://idp.example.com'}\n  claimMappings: {username: {claim: sub, prefix: 'x:'}}\n", "apiVersion must be"},
		"introspection no auth": {head + "jwt:\n- issuer: {url: 'https://idp.example.com', introspection: {url: 'https://idp.example.com/introspect'}}\n  claimMappings: {username: {claim: sub, prefix: 'x:'}}\n", "clientID and clientSecretFile"},
		"duplicate issuer": {head + "jwt:\n- issuer: {url: 'https://idp.example.com'}\n  claimMappings: {username: {claim: sub, prefix: 'a:'}}\n" +
			"- issuer: {url: 'https://idp.example.com'}\n  claimMappings: {username: {claim: sub, prefix: 'b:'}}\n", "configured once"},
		"shared prefix": {head + "jwt:\n- issuer: {url: 'https://a.example.com'}\n  claimMappings: {username: {claim: sub, prefix: 'x:'}}\n" +
			"- issuer: {url: 'https://b.example.com'}\n  claimMappings: {username: {claim: sub, prefix: 'x:'}}\n", "its own prefix"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseAuthenticationConfig([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestInsecureIssuerOnlyWhenAllowed(t *testing.T) {
	if _, err := IssuerConfig("http://idp.dev.svc:5556"); err == nil {
		t.Fatal("an http issuer on a cluster name was accepted without AllowInsecureIssuers")
	}
	if _, err := IssuerConfig("http://idp.dev.svc:5556", AllowInsecureIssuers()); err != nil {
		t.Fatal(err)
	}
	for _, loopback := range []string{"http://127.0.0.1:8080", "http://localhost:8080/realms/x", "http://[::1]:9"} {
		if _, err := IssuerConfig(loopback); err != nil {
			t.Errorf("%s: %v", loopback, err)
		}
	}
}

func TestIssuerConfigDefaults(t *testing.T) {
	c, err := IssuerConfig("https://idp.example.com")
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMapper(c.JWT[0])
	if err != nil {
		t.Fatal(err)
	}
	id, err := m.Identity(map[string]any{"sub": "alice", "groups": []any{"dev", "ops"}})
	if err != nil {
		t.Fatal(err)
	}
	if id.Kind != User || id.Username != "oidc:alice" || strings.Join(id.Groups, ",") != "oidc:dev,oidc:ops,system:authenticated" || id.Issuer != "https://idp.example.com" {
		t.Fatalf("identity %+v", id)
	}
}
