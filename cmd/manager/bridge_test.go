package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
)

func TestBridgeFlags(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"needs namespaces", nil, "--namespaces"},
		{"bad name style", []string{"--namespaces=a", "--tool-name-style=camel"}, "dotted or underscore"},
		{"bad audit args", []string{"--namespaces=a", "--audit-args=some"}, "full, preview or none"},
		{"stray arguments", []string{"--namespaces=a", "extra"}, "unexpected arguments"},
		{"metrics on the agents' port", []string{"--namespaces=a", "--listen=:8090", "--metrics-bind-address=:8090"}, "must differ from --listen"},
		{"no metrics address, no listen host", []string{"--namespaces=a", "--listen=8090"}, "cannot default to its host"},
		{"bad artifact size", []string{"--namespaces=a", "--artifact-max-size=lots"}, "positive quantity"},
		{"body budget under one body", []string{"--namespaces=a", "--max-body-bytes=1000", "--max-body-bytes-in-flight=999"}, "at least as large"},
		{"no artifact retention", []string{"--namespaces=a", "--artifact-retention=0s"}, "must be positive"},
		{"public URL with a path", []string{"--namespaces=a", "--public-url=https://bridge.example.com/mcp"}, "--public-url must be"},
		{"public URL without a scheme", []string{"--namespaces=a", "--public-url=bridge.example.com"}, "--public-url must be"},
		{"shutdown delay past the grace period", []string{"--namespaces=a", "--shutdown-delay=13s"}, "--shutdown-delay must be between 0s and 12s"},
		{"negative shutdown delay", []string{"--namespaces=a", "--shutdown-delay=-1s"}, "--shutdown-delay must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := dispatch(append([]string{"bridge"}, tc.args...), &bytes.Buffer{}, &stderr); code != 2 {
				t.Fatalf("exit code %d, want 2", code)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("stderr %q does not say %q", stderr.String(), tc.want)
			}
		})
	}
}

func TestBridgeOptions(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logged []string
	log := funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{})

	f, err := parseBridgeFlags([]string{"--namespaces=a, b", "--listen=127.0.0.1:9000", "--session-key-file=" + keyFile,
		"--audit-args=none", "--tool-name-style=underscore", "--allowed-origins=https://x",
		"--artifact-max-size=2Gi", "--artifact-retention=2h", "--max-caller-sessions=7", "--max-body-bytes-in-flight=8388608", "--max-upstream-sessions=9"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("POD_NAMESPACE", "bridge-ns")
	o, closeSink, err := bridgeOptions(f, log)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSink()
	if strings.Join(o.Namespaces, ",") != "a,b" || o.OnceNamespace != "bridge-ns" || string(o.SessionKey) != "0123456789abcdef0123456789abcdef" ||
		o.ArgsMode != audit.ArgsNone || o.Bridge.ToolNameStyle != "underscore" || !o.Bridge.LoopbackOnly ||
		len(o.Bridge.AllowedOrigins) != 1 || o.Auth != nil ||
		o.ArtifactLimits.MaxBytes != 2<<30 || o.ArtifactLimits.MaxAge != 2*time.Hour || o.Session.MaxPerSubject != 7 ||
		o.Bridge.MaxBodyBytesInFlight != 8<<20 || o.MaxUpstreamSessions != 9 {
		t.Fatalf("options %+v", o)
	}
	if len(logged) != 0 {
		t.Fatalf("no warning expected, got %q", logged)
	}

	// The ops listener binds the agents' host unless told otherwise: a
	// loopback bridge does not serve /metrics on every interface.
	if f.opsListen != "127.0.0.1:8091" {
		t.Fatalf("ops listener %q, want the --listen host 127.0.0.1:8091", f.opsListen)
	}
	for _, tc := range [][]string{{"--listen=:8443", ":8091"}, {"--listen=[::1]:1", "[::1]:8091"}, {"--metrics-bind-address=0.0.0.0:9", "0.0.0.0:9"}} {
		if f, err := parseBridgeFlags([]string{"--namespaces=a", tc[0]}, &bytes.Buffer{}); err != nil || f.opsListen != tc[1] {
			t.Errorf("%s: ops listener %q, %v; want %q", tc[0], f.opsListen, err, tc[1])
		}
	}

	f, _ = parseBridgeFlags([]string{"--namespaces=a", "--insecure-anonymous"}, &bytes.Buffer{})
	o, _, err = bridgeOptions(f, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := o.Auth.(authn.Anonymous); !ok || !o.Bridge.LoopbackOnly {
		t.Fatalf("--insecure-anonymous must use anonymous auth and loopback Host checks: %+v", o.Bridge)
	}
	joined := strings.Join(logged, "\n")
	if !strings.Contains(joined, "WITHOUT AUTHENTICATION") || !strings.Contains(joined, "no --session-key-file") {
		t.Fatalf("the warnings were not logged: %q", joined)
	}
}

func TestBridgeApprovalFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--approval-webhook-url=https://hooks.example/x"}, "go together"},
		{[]string{"--approval-webhook-secret-file=/s"}, "go together"},
		{[]string{"--approval-webhook-url=https://hooks.example/x", "--approval-webhook-secret-file=/s", "--tool-approvals=false"}, "needs --tool-approvals"},
		{[]string{"--tls-cert-file=/tls/tls.crt"}, "--tls-cert-file and --tls-key-file go together"},
		{[]string{"--tls-key-file=/tls/tls.key"}, "--tls-cert-file and --tls-key-file go together"},
	} {
		var stderr bytes.Buffer
		if _, err := parseBridgeFlags(append([]string{"--namespaces=a"}, c.args...), &stderr); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}

	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := parseBridgeFlags([]string{"--namespaces=a", "--approval-webhook-url=https://hooks.example/x", "--approval-webhook-secret-file=" + secret}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := bridgeOptions(f, funcr.New(func(_, _ string) {}, funcr.Options{})); err == nil || !strings.Contains(err.Error(), "at least 16 bytes") {
		t.Errorf("a short webhook secret: %v", err)
	}
	if err := os.WriteFile(secret, []byte("0123456789abcdef-long-enough\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, _, err := bridgeOptions(f, funcr.New(func(_, _ string) {}, funcr.Options{}))
	if err != nil || !o.ToolApprovals || o.ApprovalNotifier == nil {
		t.Errorf("options %+v, %v: want ToolApprovals on with the webhook", o, err)
	}
}

func TestBridgeOAuthFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--oidc-issuer-url=https://idp.example.com"}, "needs --public-url"},
		{[]string{"--oidc-issuer-url=https://idp.example.com", "--authentication-config=/x", "--public-url=https://b.example.com"}, "give one"},
		{[]string{"--oidc-issuer-url=https://idp.example.com", "--public-url=https://b.example.com", "--insecure-anonymous"}, "check nothing"},
		{[]string{"--required-scopes=mcp", "--public-url=https://b.example.com"}, "needs --authentication-config or --oidc-issuer-url"},
		{[]string{"--oidc-issuer-url=https://idp.example.com", "--public-url=http://b.example.com"}, "--oauth-allow-http"},
	} {
		var stderr bytes.Buffer
		if _, err := parseBridgeFlags(append([]string{"--namespaces=a"}, c.args...), &stderr); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
	log := funcr.New(func(_, _ string) {}, funcr.Options{})
	// The configuration is checked when the options are built: the bridge
	// does not start with an issuer it would refuse.
	f, err := parseBridgeFlags([]string{"--namespaces=a", "--oidc-issuer-url=http://idp.example.com", "--public-url=https://b.example.com"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := bridgeOptions(f, log); err == nil || !strings.Contains(err.Error(), "not loopback") {
		t.Fatalf("an http issuer: %v", err)
	}
	f, err = parseBridgeFlags([]string{"--namespaces=a", "--oidc-issuer-url=https://idp.example.com", "--public-url=https://b.example.com", "--required-scopes=mcp:tools, mcp:read"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	o, closeSink, err := bridgeOptions(f, log)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSink()
	if o.Authentication == nil || o.Authentication.JWT[0].Issuer.URL != "https://idp.example.com" || strings.Join(o.RequiredScopes, " ") != "mcp:tools mcp:read" {
		t.Fatalf("options %+v %v", o.Authentication, o.RequiredScopes)
	}
}
