package identity

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

func mapperOf(t *testing.T, yaml string) *Mapper {
	t.Helper()
	c, err := ParseAuthenticationConfig([]byte("apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt:\n- issuer: {url: 'https://idp.example.com'}\n" + yaml))
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMapper(c.JWT[0])
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMapperExpressions(t *testing.T) {
	m := mapperOf(t, `  claimMappings:
    username: {expression: "'corp:' + claims.preferred_username"}
    groups: {expression: "claims.roles.map(r, 'corp:role:' + r)"}
`)
	id, err := m.Identity(map[string]any{"preferred_username": "bob", "roles": []any{"admin"}})
	if err != nil {
		t.Fatal(err)
	}
	if id.Username != "corp:bob" || strings.Join(id.Groups, ",") != "corp:role:admin,system:authenticated" {
		t.Fatalf("identity %+v", id)
	}
}

func TestMapperRefuses(t *testing.T) {
	m := mapperOf(t, `  claimValidationRules:
  - {claim: hd, requiredValue: example.com}
  - {expression: "claims.aud != 'other'", message: not for us}
  claimMappings:
    username: {claim: email, prefix: "corp:"}
    groups: {claim: groups, prefix: "corp:"}
`)
	ok := func() map[string]any {
		return map[string]any{"hd": "example.com", "aud": "x", "email": "a@example.com", "email_verified": true, "groups": []any{"g"}}
	}
	if id, err := m.Identity(ok()); err != nil || id.Username != "corp:a@example.com" {
		t.Fatalf("%+v %v", id, err)
	}
	cases := map[string]struct {
		change func(map[string]any)
		want   string
	}{
		"required value":     {func(c map[string]any) { c["hd"] = "evil.com" }, `claim hd must be "example.com"`},
		"expression":         {func(c map[string]any) { c["aud"] = "other" }, "not for us"},
		"no username":        {func(c map[string]any) { delete(c, "email") }, "no email claim"},
		"email not verified": {func(c map[string]any) { c["email_verified"] = false }, "email_verified"},
		"username a number":  {func(c map[string]any) { c["email"] = 42.0 }, "not a string"},
		"groups not strings": {func(c map[string]any) { c["groups"] = []any{1.0} }, "not a string"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := ok()
			tc.change(c)
			_, err := m.Identity(c)
			if !errors.Is(err, ErrClaims) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrClaims saying %q", err, tc.want)
			}
		})
	}
}

// An expression may build any name; one Kubernetes keeps is refused all
// the same, so no token can pass for a ServiceAccount or system:masters.
func TestMapperRefusesSystemNames(t *testing.T) {
	m := mapperOf(t, `  claimMappings:
    username: {expression: "claims.sub"}
    groups: {expression: "claims.groups"}
`)
	for name, claims := range map[string]map[string]any{
		"service account": {"sub": "system:serviceaccount:agents:alice", "groups": []any{}},
		"system group":    {"sub": "alice", "groups": []any{"system:masters"}},
	} {
		if _, err := m.Identity(claims); !errors.Is(err, ErrClaims) || !strings.Contains(err.Error(), "system:") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestSubject(t *testing.T) {
	sa := FromUserInfo("system:serviceaccount:agents:alice", []string{"system:serviceaccounts"})
	if s := sa.Subject(); sa.Kind != ServiceAccount || s.Kind != v1alpha1.SubjectServiceAccount || s.Namespace != "agents" || s.Name != "alice" {
		t.Fatalf("%+v -> %+v", sa, s)
	}
	u := Identity{Kind: User, Username: "oidc:alice", Groups: []string{"oidc:dev"}, Issuer: "https://idp.example.com"}
	if s := u.Subject(); s.Kind != v1alpha1.SubjectUser || s.Name != "oidc:alice" || s.Groups[0] != "oidc:dev" {
		t.Fatalf("%+v", s)
	}
	if a := AnonymousIdentity(); a.Subject().Username() != "system:anonymous" {
		t.Fatalf("%+v", a)
	}
}
