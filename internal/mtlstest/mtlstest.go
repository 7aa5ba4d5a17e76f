// Package mtlstest puts a real MCP server behind mutual TLS for tests: it
// makes a short-lived CA and the certificates it signs, and runs a
// TLS-terminating reverse proxy that requires and verifies client
// certificates in front of a plain-HTTP server. The proxy is the test's own;
// what it tests is the TLS handshake of the client (the controller's probe,
// the bridge), with a real MCP server answering behind it.
package mtlstest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// TB is what the helpers need of a test; *testing.T and Ginkgo's GinkgoT()
// both have it.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// CA signs certificates valid for an hour.
type CA struct {
	// PEM is the CA certificate, as ca.crt holds it.
	PEM  []byte
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

var serial atomic.Int64

func newKey(t TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("while generating a key: %v", err)
	}
	return k
}

func template(cn string) *x509.Certificate {
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"mcp-operator tests"}},
		NotBefore:    now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		BasicConstraintsValid: true,
	}
}

// NewCA makes a self-signed CA named cn.
func NewCA(t TB, cn string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := template(cn)
	tmpl.IsCA = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("while making CA %s: %v", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("while reading CA %s: %v", cn, err)
	}
	return &CA{PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert: cert, key: key}
}

// Pool holds the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// Pair is a certificate and its key in PEM, as tls.crt and tls.key hold them.
type Pair struct{ Cert, Key []byte }

// TLS is the pair as crypto/tls uses it.
func (p Pair) TLS(t TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(p.Cert, p.Key)
	if err != nil {
		t.Fatalf("while loading a key pair: %v", err)
	}
	return c
}

// Client issues a client certificate whose subject common name is cn.
func (ca *CA) Client(t TB, cn string) Pair {
	t.Helper()
	tmpl := template(cn)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return ca.issue(t, tmpl)
}

// Server issues a certificate for 127.0.0.1 and localhost.
func (ca *CA) Server(t TB, cn string) Pair {
	t.Helper()
	tmpl := template(cn)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	tmpl.DNSNames = []string{"localhost"}
	return ca.issue(t, tmpl)
}

func (ca *CA) issue(t TB, tmpl *x509.Certificate) Pair {
	t.Helper()
	key := newKey(t)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("while issuing %s: %v", tmpl.Subject.CommonName, err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("while encoding the key of %s: %v", tmpl.Subject.CommonName, err)
	}
	return Pair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
	}
}

// Front is the TLS-terminating proxy: it serves https on a loopback port
// with a certificate of its CA, accepts only clients whose certificate that
// CA signed, and forwards each request to the backend over plain HTTP.
type Front struct {
	// URL is https://127.0.0.1:<port>.
	URL string

	mu       sync.Mutex
	requests []Request
	refused  bytes.Buffer

	hold    atomic.Pointer[Hold]
	backend *httputil.ReverseProxy
}

// Request is a request the proxy let through.
type Request struct {
	Method string
	// Subject is the common name of the client's verified certificate.
	Subject string
}

// Hold stops one request at the proxy until Release.
type Hold struct {
	match    string
	Held     chan struct{} // closed when the request is held
	released chan struct{}
	once     sync.Once
}

// Release lets the held request go on.
func (h *Hold) Release() { h.once.Do(func() { close(h.released) }) }

// NewFront starts a Front for backend (http://host:port) until the test ends.
func NewFront(t TB, ca *CA, backend string) *Front {
	t.Helper()
	return newFront(t, ca, backend, nil)
}

// newFront is NewFront with forwarded, if not nil, wrapping the body of
// each request forwarded to the backend (this package's tests delay its
// reads).
func newFront(t TB, ca *CA, backend string, forwarded func(io.ReadCloser) io.ReadCloser) *Front {
	t.Helper()
	target, err := url.Parse(backend)
	if err != nil {
		t.Fatalf("backend %q: %v", backend, err)
	}
	f := &Front{backend: &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			if forwarded != nil && r.Out.Body != nil && r.Out.Body != http.NoBody {
				r.Out.Body = forwarded(r.Out.Body)
			}
		},
		// Streamed answers (SSE) pass as they come.
		FlushInterval: -1,
	}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	srv.TLS = &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{ca.Server(t, "mcp upstream").TLS(t)},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca.Pool(),
	}
	// Refused handshakes are logged by net/http; the log is what a test
	// reads to see why.
	srv.Config.ErrorLog = log.New(writerFunc(f.logRefusal), "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

func (f *Front) logRefusal(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused.Write(p)
}

func (f *Front) serve(w http.ResponseWriter, r *http.Request) {
	// RequireAndVerifyClientCert lets no other request through; checked
	// again so that a change of the proxy's settings cannot pass silently.
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		http.Error(w, "no verified client certificate", http.StatusForbidden)
		return
	}
	// The request's body is still read, by the transport forwarding it,
	// after the backend's answer has started: without full duplex the
	// HTTP/1 server consumes and closes the body as the answer's header is
	// written, the transport's last read of it (past its Content-Length)
	// fails, and the transport drops the backend connection under the
	// answer, which the client gets cut (unexpected EOF; golang/go#40747).
	if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
		http.Error(w, "full duplex: "+err.Error(), http.StatusInternalServerError)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, Request{Method: r.Method, Subject: r.TLS.VerifiedChains[0][0].Subject.CommonName})
	f.mu.Unlock()
	if h := f.hold.Load(); h != nil && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if strings.Contains(string(body), h.match) && f.hold.CompareAndSwap(h, nil) {
			close(h.Held)
			select {
			case <-h.released:
			case <-r.Context().Done():
				return
			}
		}
	}
	f.backend.ServeHTTP(w, r)
}

// HoldNext holds the next request whose body holds match.
func (f *Front) HoldNext(match string) *Hold {
	h := &Hold{match: match, Held: make(chan struct{}), released: make(chan struct{})}
	f.hold.Store(h)
	return h
}

// Requests are the requests let through so far, in order; Reset forgets
// them.
func (f *Front) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}

// Subjects are the common names of the verified client certificates of the
// requests let through so far, in order.
func (f *Front) Subjects() []string {
	var out []string
	for _, r := range f.Requests() {
		out = append(out, r.Subject)
	}
	return out
}

// Reset forgets the requests and refusals seen so far.
func (f *Front) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = nil
	f.refused.Reset()
}

// Refusals is what the proxy logged about handshakes it refused.
func (f *Front) Refusals() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused.String()
}
