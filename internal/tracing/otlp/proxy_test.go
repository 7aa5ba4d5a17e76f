package otlp

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/mtlstest"
)

// gRPC over TLS goes through an HTTP proxy's CONNECT tunnel, HTTP/2
// inside; gRPC in clear text (h2c) does not use the proxy, which would be
// spoken h2c to.
func TestGRPCThroughProxy(t *testing.T) {
	ca := mtlstest.NewCA(t, "otlp-test-ca")
	dir := certFiles(t, ca)
	c := newCollector(t)
	srv := httptest.NewUnstartedServer(c)
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(t, "collector").TLS(t)}}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	var tunnels atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "this proxy only tunnels", http.StatusMethodNotAllowed)
			return
		}
		tunnels.Add(1)
		upstream, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		conn, buffered, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			upstream.Close()
			return
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			upstream.Close()
			return
		}
		go func() {
			_, _ = io.Copy(upstream, buffered)
			upstream.Close()
		}()
		_, _ = io.Copy(conn, upstream)
	}))
	t.Cleanup(proxy.Close)
	proxyURL, err := url.Parse(proxy.URL)
	if err != nil {
		t.Fatal(err)
	}

	config, err := ConfigFromEnv(lookup(collectorEnv(ProtocolGRPC, srv.URL, "OTEL_EXPORTER_OTLP_CERTIFICATE", filepath.Join(dir, "ca.crt"))))
	if err != nil {
		t.Fatal(err)
	}
	if transport(config).Proxy == nil {
		t.Fatal("gRPC over TLS ignores the environment's proxy")
	}
	e := exporter(t, collectorEnv(ProtocolGRPC, srv.URL, "OTEL_EXPORTER_OTLP_CERTIFICATE", filepath.Join(dir, "ca.crt")))
	// The environment's proxy is read once a process, and never for
	// 127.0.0.1: the test's proxy is set on the transport instead.
	e.client.Transport.(*http.Transport).Proxy = http.ProxyURL(proxyURL)
	if err := export(e, span(t)); err != nil {
		t.Fatal(err)
	}
	if requests, h := c.got(); len(requests) != 1 || h.Get("Content-Type") != "application/grpc" {
		t.Fatalf("the collector received %d requests, the last with headers %v", len(requests), h)
	}
	if n := tunnels.Load(); n != 1 {
		t.Fatalf("%d tunnels through the proxy, want 1", n)
	}

	clearText, err := ConfigFromEnv(lookup(collectorEnv(ProtocolGRPC, "http://collector:4317")))
	if err != nil {
		t.Fatal(err)
	}
	if transport(clearText).Proxy != nil {
		t.Fatal("gRPC in clear text would speak h2c to the proxy")
	}
}
