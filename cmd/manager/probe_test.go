package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

func probeCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	start := time.Now()
	code = dispatch(append([]string{"probe"}, args...), &out, &errOut)
	t.Logf("manager probe %s: exit %d in %s; stderr: %s", strings.Join(args, " "), code, time.Since(start).Round(time.Millisecond), errOut.String())
	return code, out.String(), errOut.String()
}

func everythingServer(t *testing.T) string {
	t.Helper()
	bin, err := testpeers.EverythingServer()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestProbeCommandStdioJSON(t *testing.T) {
	code, stdout, _ := probeCmd(t, "-o", "json", "--name", "conf", "--", everythingServer(t))
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var out probeOutput
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, stdout)
	}
	if out.Server != "conf" || out.Transport != "stdio" || out.ProtocolVersion != "2026-07-28" || out.Era != "stateless" {
		t.Errorf("header fields %+v", out)
	}
	if len(out.Tools) != 28 || out.Tools[0].Name != "mcp.conf.json_schema_2020_12_tool" || out.Tools[0].UnderscoreName != "mcp__conf__json_schema_2020_12_tool" {
		t.Errorf("%d tools, first %+v", len(out.Tools), out.Tools[0])
	}
	if !strings.HasPrefix(out.CatalogDigest, "sha256:") || len(out.CatalogDigest) != 71 || !out.Capabilities.Tools {
		t.Errorf("digest %q, capabilities %+v", out.CatalogDigest, out.Capabilities)
	}
	// The documented shape: these keys are always present.
	var generic map[string]any
	_ = json.Unmarshal([]byte(stdout), &generic)
	for _, key := range []string{"server", "transport", "target", "protocolVersion", "era", "serverInfo", "capabilities", "catalogDigest", "tools", "rejectedTools", "excludedTools", "resources", "prompts", "notes", "durationMs"} {
		if _, ok := generic[key]; !ok {
			t.Errorf("JSON output lacks %q", key)
		}
	}
}

func TestProbeCommandYAMLAndTable(t *testing.T) {
	bin := everythingServer(t)
	code, stdout, _ := probeCmd(t, "-o", "yaml", "--exclude", "test_*", "--", bin)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var out probeOutput
	if err := yaml.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("output is not YAML: %v", err)
	}
	if len(out.Tools) != 1 || out.Tools[0].UpstreamName != "json_schema_2020_12_tool" || len(out.ExcludedTools) != 27 {
		t.Errorf("tools %d, excluded %d", len(out.Tools), len(out.ExcludedTools))
	}
	code, stdout, _ = probeCmd(t, "--risk", "test_simple_text=read", "--", bin)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"Protocol:      2026-07-28 (stateless era)", "mcp.mcp-conformance-test-server.test_simple_text", "read     override", "test_prompt_with_arguments", "arg1*, arg2*", "test://static-text"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
}

// recordingProxy forwards to a real server and remembers request headers.
type recordingProxy struct {
	mu      sync.Mutex
	headers []http.Header
	next    http.Handler
}

func (p *recordingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.headers = append(p.headers, r.Header.Clone())
	p.mu.Unlock()
	// Full duplex, as internal/mtlstest's Front: else net/http's HTTP/1
	// server closes the request body once the answer starts, the proxy's
	// transport fails its last read of it and drops the backend connection
	// under the answer (golang/go#40747), and the probe gets it cut.
	if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	p.next.ServeHTTP(w, r)
}

func TestProbeCommandHTTPWithHeadersTokenAndMutualTLS(t *testing.T) {
	upstream, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", testpeers.GoEverything(t, false).Port))
	proxy := &recordingProxy{next: httputil.NewSingleHostReverseProxy(upstream)}
	dir := t.TempDir()
	clientCert, clientKey, clientPool := writeClientCert(t, dir)
	srv := httptest.NewUnstartedServer(proxy)
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientPool}
	srv.StartTLS()
	defer srv.Close()
	caFile := filepath.Join(dir, "ca.crt")
	writePEM(t, caFile, "CERTIFICATE", srv.Certificate().Raw)
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mcpURL := srv.URL + "/mcp"

	code, _, stderr := probeCmd(t, "--url", mcpURL, "--ca-file", caFile, "-o", "json")
	if code != 1 || !strings.Contains(stderr, "probing "+mcpURL) || !strings.Contains(stderr, "certificate") {
		t.Errorf("without a client certificate: exit %d, stderr %q; want exit 1 naming the URL and the TLS failure", code, stderr)
	}

	code, stdout, _ := probeCmd(t, "--url", mcpURL, "--ca-file", caFile, "--cert-file", clientCert, "--key-file", clientKey,
		"--bearer-token-file", tokenFile, "--header", "X-Api-Key=k1", "--header", "X-Tenant=blue", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var out probeOutput
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Era != "session" || out.ProtocolVersion != "2025-11-25" || len(out.Tools) != 28 {
		t.Errorf("era %s %s, %d tools", out.Era, out.ProtocolVersion, len(out.Tools))
	}
	proxy.mu.Lock()
	defer proxy.mu.Unlock()
	if len(proxy.headers) < 5 {
		t.Fatalf("only %d requests reached the server", len(proxy.headers))
	}
	sessions := 0
	for _, h := range proxy.headers {
		if h.Get("Authorization") != "Bearer s3cret-token" || h.Get("X-Api-Key") != "k1" || h.Get("X-Tenant") != "blue" {
			t.Errorf("request without the configured credentials: %v", h)
		}
		if h.Get("Mcp-Session-Id") != "" {
			sessions++
		}
	}
	if sessions == 0 {
		t.Error("no request carried the session id the server assigned")
	}
	if last := proxy.headers[len(proxy.headers)-1]; last.Get("Mcp-Session-Id") == "" {
		t.Error("the session was not ended with its id")
	}
}

func TestProbeCommandFailures(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := "http://" + l.Addr().String() + "/mcp"
	l.Close()
	code, _, stderr := probeCmd(t, "--url", closed, "--timeout", "3s")
	if code != 1 || !strings.Contains(stderr, "manager probe: probing "+closed) || !strings.Contains(stderr, "connection refused") {
		t.Errorf("closed port: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = probeCmd(t, "--env", "WHY=the variable reached the server", "--", "sh", "-c", `echo "$WHY" >&2; exit 4`)
	if code != 1 || !strings.Contains(stderr, "exit status 4") || !strings.Contains(stderr, "the variable reached the server") {
		t.Errorf("dying stdio server: exit %d, stderr %q", code, stderr)
	}
	usage := [][]string{
		{},
		{"--url", "http://x/mcp", "--", "cmd"},
		{"-o", "xml", "--url", "http://x/mcp"},
		{"--name", "Not.A.Label", "--url", "http://x/mcp"},
		{"--header", "novalue", "--url", "http://x/mcp"},
		{"--risk", "t=scary", "--url", "http://x/mcp"},
		{"--env", "A=b", "--url", "http://x/mcp"},
		{"--header", "A=b", "--", "cmd"},
		{"--url", "ftp://x/mcp"},
	}
	for _, args := range usage {
		code, _, stderr := probeCmd(t, args...)
		if code == 0 || !strings.HasPrefix(stderr, "manager probe: ") && !strings.Contains(stderr, "usage") {
			t.Errorf("args %q: exit %d, stderr %q; want a usage error", args, code, stderr)
		}
	}
}

// writeClientCert makes a self-signed client certificate and returns the
// cert and key files and a pool that trusts it.
func writeClientCert(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "probe-client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", keyDER)
	return certFile, keyFile, pool
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestPrintableEscapesWhatCouldFoolAReader(t *testing.T) {
	cases := []struct {
		in   string
		max  int
		want string
	}{
		{"plain text", 80, "plain text"},
		{"two\nlines\there", 80, "two lines here"},
		{"evil\u202Etxt.exe", 80, `evil\u202Etxt.exe`},
		{"zero\u200bwidth", 80, `zero\u200Bwidth`},
		{"bell\a", 80, `bell\u0007`},
		{"日本語テキスト", 3, "日本語…"},
	}
	for _, tc := range cases {
		if got := printable(tc.in, tc.max); got != tc.want {
			t.Errorf("printable(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}
