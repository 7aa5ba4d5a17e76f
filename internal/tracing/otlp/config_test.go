package otlp

import (
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mtlstest"
)

func lookup(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

func TestConfigFromEnv(t *testing.T) {
	cases := map[string]struct {
		env     map[string]string
		url     string
		headers http.Header
		timeout time.Duration
		gzip    bool
	}{
		"defaults over HTTP": {env: map[string]string{}, url: "http://localhost:4318/v1/traces", timeout: 10 * time.Second},
		"defaults over gRPC": {env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			url: "http://localhost:4317" + grpcExportPath, timeout: 10 * time.Second},
		"generic endpoint gets /v1/traces": {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector:4318/otlp/"},
			url: "https://collector:4318/otlp/v1/traces", timeout: 10 * time.Second},
		"traces endpoint as it is": {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://ignored:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/custom"},
			url: "http://collector:4318/custom", timeout: 10 * time.Second},
		"gRPC takes host and port only": {env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317/some/path"},
			url: "http://collector:4317" + grpcExportPath, timeout: 10 * time.Second},
		"gRPC without a scheme is encrypted": {env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317"},
			url: "https://collector:4317" + grpcExportPath, timeout: 10 * time.Second},
		"gRPC without a scheme, insecure": {env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "10.0.0.1:4317", "OTEL_EXPORTER_OTLP_TRACES_INSECURE": "TRUE", "OTEL_EXPORTER_OTLP_INSECURE": "false"},
			url: "http://10.0.0.1:4317" + grpcExportPath, timeout: 10 * time.Second},
		"headers, timeout, gzip; per signal wins": {env: map[string]string{
			"OTEL_EXPORTER_OTLP_HEADERS":            "ignored=1",
			"OTEL_EXPORTER_OTLP_TRACES_HEADERS":     "Authorization=Bearer%20abc%3D%3D , x-tenant=a%2Cb,x-tenant=c",
			"OTEL_EXPORTER_OTLP_TIMEOUT":            "99",
			"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT":     "2500",
			"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "gzip",
			"OTEL_EXPORTER_OTLP_COMPRESSION":        "none"},
			url: "http://localhost:4318/v1/traces", headers: http.Header{"Authorization": {"Bearer abc=="}, "X-Tenant": {"a,b", "c"}}, timeout: 2500 * time.Millisecond, gzip: true},
		"empty header entries skipped": {env: map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "x-tenant=blue, ,"},
			url: "http://localhost:4318/v1/traces", headers: http.Header{"X-Tenant": {"blue"}}, timeout: 10 * time.Second},
		"timeout overflowing a duration is the longest": {env: map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "9223372036854775807"},
			url: "http://localhost:4318/v1/traces", timeout: math.MaxInt64},
		"timeout overflowing int64 is the longest": {env: map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "99999999999999999999"},
			url: "http://localhost:4318/v1/traces", timeout: math.MaxInt64},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ConfigFromEnv(lookup(c.env))
			if err != nil {
				t.Fatal(err)
			}
			if c.headers == nil {
				c.headers = http.Header{}
			}
			if got.URL.String() != c.url || got.Timeout != c.timeout || got.Gzip != c.gzip || !equalHeaders(got.Headers, c.headers) {
				t.Fatalf("got url %s timeout %s gzip %v headers %v; want %s %s %v %v", got.URL, got.Timeout, got.Gzip, got.Headers, c.url, c.timeout, c.gzip, c.headers)
			}
			if (got.TLS != nil) != (got.URL.Scheme == "https") {
				t.Fatalf("TLS %v for %s", got.TLS, got.URL)
			}
		})
	}
}

func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, vs := range a {
		if strings.Join(vs, "\x00") != strings.Join(b[k], "\x00") {
			return false
		}
	}
	return true
}

func TestConfigRefusesBadValues(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pem")
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	https := "https://collector:4318"
	cases := map[string]struct {
		env  map[string]string
		want string
		// absent is a secret the error must not show.
		absent string
	}{
		"protocol":            {map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, `OTLP protocol "http/json" is not supported (OTEL_EXPORTER_OTLP_PROTOCOL)`, ""},
		"endpoint scheme":     {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://collector"}, `OTEL_EXPORTER_OTLP_ENDPOINT is not an http:// or https:// URL (its scheme is "ftp")`, ""},
		"HTTP without scheme": {map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "collector:4318"}, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is not an http:// or https:// URL`, "collector"},
		"insecure":            {map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "c:4317", "OTEL_EXPORTER_OTLP_INSECURE": "yes"}, `OTEL_EXPORTER_OTLP_INSECURE="yes" is not true or false`, ""},
		"header":              {map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "a=1,b"}, `OTEL_EXPORTER_OTLP_HEADERS, entry 2 is not a key=value pair`, ""},
		"header without =":    {map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "Authorization: Bearer s3cret"}, `OTEL_EXPORTER_OTLP_HEADERS, entry 1 is not a key=value pair`, "s3cret"},
		"header secret key":   {map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "a=1,Authorization: Bearer s3cret="}, `entry 2: the key is not a URL-encoded header name`, "s3cret"},
		"header key space":    {map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "x tenant=s3cret"}, `entry 1: the key is not a URL-encoded header name`, "s3cret"},
		"header encoding":     {map[string]string{"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a=s3cret%zz"}, `OTEL_EXPORTER_OTLP_TRACES_HEADERS, entry 1 (a): the value is not URL-encoded`, "s3cret"},
		"header line break":   {map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "authorization=s3cret%0AHost:%20evil"}, `entry 1 (authorization): the value holds a character a header cannot carry`, "s3cret"},
		"header connection":   {map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "a=1,connection=s3cret"}, `entry 2 (connection): a connection's own header, which HTTP/2 (gRPC) refuses`, "s3cret"},
		"header TE":           {map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "TE=gzip-s3cret"}, `entry 1 (TE): a connection's own header`, "s3cret"},
		"header upgrade":      {map[string]string{"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "Upgrade=h2c-s3cret"}, `entry 1 (Upgrade): a connection's own header`, "s3cret"},
		"endpoint password":   {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://user:s3cret@collector"}, `OTEL_EXPORTER_OTLP_ENDPOINT is not an http:// or https:// URL (its scheme is "ftp")`, "s3cret"},
		"endpoint opaque":     {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "user:s3cret@collector:4318"}, `OTEL_EXPORTER_OTLP_ENDPOINT is not an http:// or https:// URL`, "s3cret"},
		"endpoint user":       {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "tok3n@collector:4318"}, `OTEL_EXPORTER_OTLP_ENDPOINT is not a URL`, "tok3n"},
		"endpoint unparsable": {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://user:s3cret@[::1"}, `OTEL_EXPORTER_OTLP_ENDPOINT is not a URL`, "s3cret"},
		"negative timeout":    {map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "-99999999999999999999"}, `OTEL_EXPORTER_OTLP_TIMEOUT="-99999999999999999999" is not a timeout`, ""},
		"timeout":             {map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "10s"}, `OTEL_EXPORTER_OTLP_TIMEOUT="10s" is not a timeout`, ""},
		"zero timeout":        {map[string]string{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "0"}, `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT="0" is not a timeout`, ""},
		"compression":         {map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, `OTEL_EXPORTER_OTLP_COMPRESSION="zstd" is not supported: use gzip or none`, ""},
		"certificate missing": {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": https, "OTEL_EXPORTER_OTLP_CERTIFICATE": missing}, `while reading OTEL_EXPORTER_OTLP_CERTIFICATE`, ""},
		"certificate not PEM": {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": https, "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": notPEM}, `holds no PEM certificate`, ""},
		"client key alone":    {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": https, "OTEL_EXPORTER_OTLP_CLIENT_KEY": notPEM}, `OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY go together`, ""},
		"client pair bad":     {map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": https, "OTEL_EXPORTER_OTLP_CLIENT_KEY": notPEM, "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": notPEM}, `while reading the client certificate`, ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ConfigFromEnv(lookup(c.env))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %s", err, c.want)
			}
			if c.absent != "" && strings.Contains(err.Error(), c.absent) {
				t.Fatalf("error %q shows the secret %q", err, c.absent)
			}
		})
	}
}

// The certificate files become the TLS client configuration.
func TestConfigReadsCertificates(t *testing.T) {
	ca := mtlstest.NewCA(t, "otlp-test-ca")
	dir := certFiles(t, ca)
	c, err := ConfigFromEnv(lookup(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT":           "https://collector:4318",
		"OTEL_EXPORTER_OTLP_CERTIFICATE":        filepath.Join(dir, "ca.crt"),
		"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": filepath.Join(dir, "tls.crt"),
		"OTEL_EXPORTER_OTLP_CLIENT_KEY":         filepath.Join(dir, "tls.key"),
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.TLS == nil || c.TLS.RootCAs == nil || !c.TLS.RootCAs.Equal(ca.Pool()) || len(c.TLS.Certificates) != 1 {
		t.Fatalf("TLS config %+v does not hold the CA and the client certificate", c.TLS)
	}
}

// certFiles writes the CA's certificate and a client certificate it signed
// as ca.crt, tls.crt and tls.key into a new folder.
func certFiles(t *testing.T, ca *mtlstest.CA) string {
	t.Helper()
	client := ca.Client(t, "exporter")
	dir := t.TempDir()
	for name, b := range map[string][]byte{"ca.crt": ca.PEM, "tls.crt": client.Cert, "tls.key": client.Key} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TE is the one connection header HTTP/2 takes, as "trailers" only.
func TestHeadersTakeTETrailers(t *testing.T) {
	h, err := headers("te=Trailers", "OTEL_EXPORTER_OTLP_HEADERS")
	if err != nil || h.Get("Te") != "Trailers" {
		t.Fatalf("headers %v, error %v, want TE: Trailers", h, err)
	}
}
