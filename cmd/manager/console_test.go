package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConsoleFlagsRefuseWhatCannotWork(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "mcp-operator-system")
	ok := []string{"--public-url", "https://console.example.com", "--oidc-issuer-url", "https://idp.example.com"}
	if _, err := parseConsoleFlags(ok, io.Discard); err != nil {
		t.Fatalf("valid flags refused: %v", err)
	}
	if _, err := parseConsoleFlags([]string{"--public-url", "http://127.0.0.1:8080", "--oidc-issuer-url", "https://idp.example.com", "--audit-namespace", "x"}, io.Discard); err != nil {
		t.Fatalf("plain http on loopback refused: %v", err)
	}
	if _, err := parseConsoleFlags([]string{"--public-url", "http://10.96.0.82", "--oidc-issuer-url", "https://idp.example.com", "--insecure-http"}, io.Discard); err != nil {
		t.Fatalf("plain http with --insecure-http refused: %v", err)
	}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no public URL":       {[]string{"--oidc-issuer-url", "https://idp.example.com"}, "--public-url is required"},
		"public URL path":     {[]string{"--public-url", "https://c.example.com/x", "--oidc-issuer-url", "https://i"}, "no path"},
		"http off loopback":   {[]string{"--public-url", "http://c.example.com", "--oidc-issuer-url", "https://i"}, "clear text"},
		"no issuer":           {[]string{"--public-url", "https://c.example.com"}, "--authentication-config"},
		"trace URL no id":     {append(ok, "--trace-url", "http://jaeger/trace/"), "{traceId}"},
		"no audit namespace":  {append(ok, "--audit-namespace", ""), "--audit-namespace"},
		"no session lifetime": {append(ok, "--session-max-age", "0s"), "positive"},
		"idle release 2ns":    {append(ok, "--release-when-idle-for", "2ns"), "at least 1s"},
		"idle release -1m":    {append(ok, "--release-when-idle-for", "-1m"), "at least 1s"},
	} {
		var out strings.Builder
		if _, err := parseConsoleFlags(tc.args, &out); err == nil || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%s: error %v, output %q, want it to say %q", name, err, out.String(), tc.want)
		}
	}
}

// The console maps a person with the bridge's AuthenticationConfiguration:
// the issuer named, or the first.
func TestSignInIssuerFromTheBridgesConfiguration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.yaml")
	config := `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
  - issuer: {url: https://one.example.com, audiences: [a]}
    claimMappings: {username: {claim: email, prefix: "one:"}}
  - issuer: {url: https://two.example.com, audiences: [a]}
    claimMappings: {username: {claim: sub, prefix: "two:"}}
`
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	f := consoleFlags{authConfig: path}
	j, err := signInIssuer(f)
	if err != nil || j.Issuer.URL != "https://one.example.com" {
		t.Fatalf("first issuer: %+v, %v", j.Issuer, err)
	}
	f.issuerURL = "https://two.example.com"
	if j, err = signInIssuer(f); err != nil || j.ClaimMappings.Username.Prefix != "two:" {
		t.Fatalf("named issuer: %+v, %v", j, err)
	}
	f.issuerURL = "https://three.example.com"
	if _, err = signInIssuer(f); err == nil || !strings.Contains(err.Error(), "is not an issuer of") {
		t.Fatalf("an issuer the configuration lacks: %v", err)
	}
}
