package otlp

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Protocols of the exporter (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Config is where and how the exporter sends spans.
type Config struct {
	// Protocol is ProtocolGRPC or ProtocolHTTP.
	Protocol string
	// URL is the whole URL the spans are posted to: {endpoint}/v1/traces
	// over HTTP, {endpoint}/<the Export method> over gRPC. Its scheme says
	// whether the connection is encrypted.
	URL *url.URL
	// Headers go on every request (gRPC metadata over gRPC).
	Headers http.Header
	// Timeout bounds one batch's export, its retries included.
	Timeout time.Duration
	// Gzip compresses the request.
	Gzip bool
	// TLS is the client side of https URLs: the roots the collector's
	// certificate is checked against (the system's when nil), and a client
	// certificate.
	TLS *tls.Config
	// Version is the operator's, sent in the User-Agent.
	Version string
}

// The exporter's variables of the OTLP exporter specification; each
// OTEL_EXPORTER_OTLP_TRACES_* variable, when set, replaces its generic
// OTEL_EXPORTER_OTLP_* one.
const (
	envPrefix       = "OTEL_EXPORTER_OTLP_"
	envTracesPrefix = "OTEL_EXPORTER_OTLP_TRACES_"
)

// The defaults of the specification.
const (
	defaultTimeout      = 10 * time.Second
	defaultHTTPEndpoint = "http://localhost:4318"
	defaultGRPCEndpoint = "http://localhost:4317"
	// The path of traces below a generic HTTP endpoint; a traces endpoint
	// is taken as it is.
	httpTracesPath = "/v1/traces"
	grpcExportPath = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
)

// env is one variable's value: the per-signal one if set, else the generic
// one, with the name that was read, for the errors.
func env(getenv func(string) string, name string) (value, from string) {
	if v := strings.TrimSpace(getenv(envTracesPrefix + name)); v != "" {
		return v, envTracesPrefix + name
	}
	return strings.TrimSpace(getenv(envPrefix + name)), envPrefix + name
}

// ConfigFromEnv reads the exporter's OTEL_EXPORTER_OTLP_* variables through
// getenv (os.Getenv in a process): protocol, endpoint, headers, timeout,
// compression, insecure, certificate, client certificate and key. A value
// the exporter cannot honour is an error naming the variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{Protocol: ProtocolHTTP, Timeout: defaultTimeout}
	if p, from := env(getenv, "PROTOCOL"); p != "" {
		if p != ProtocolGRPC && p != ProtocolHTTP {
			return Config{}, fmt.Errorf("OTLP protocol %q is not supported (%s): use %s or %s", p, from, ProtocolGRPC, ProtocolHTTP)
		}
		c.Protocol = p
	}
	var err error
	if c.URL, err = endpoint(getenv, c.Protocol); err != nil {
		return Config{}, err
	}
	if c.Headers, err = headers(env(getenv, "HEADERS")); err != nil {
		return Config{}, err
	}
	if v, from := env(getenv, "TIMEOUT"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(v, "-") {
			ms, err = math.MaxInt64, nil
		}
		if err != nil || ms <= 0 {
			return Config{}, fmt.Errorf("%s=%q is not a timeout: give a positive number of milliseconds", from, v)
		}
		c.Timeout = scaled(ms, time.Millisecond)
	}
	switch v, from := env(getenv, "COMPRESSION"); v {
	case "gzip":
		c.Gzip = true
	case "", "none":
	default:
		return Config{}, fmt.Errorf("%s=%q is not supported: use gzip or none", from, v)
	}
	if c.URL.Scheme == "https" {
		if c.TLS, err = tlsConfig(getenv); err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

// endpoint is the URL spans are posted to. Over gRPC an endpoint may be a
// bare host:port, encrypted unless OTEL_EXPORTER_OTLP_INSECURE=true (the
// specification's rule: a scheme, when given, decides); over HTTP it must
// be an http or https URL.
func endpoint(getenv func(string) string, protocol string) (*url.URL, error) {
	raw, from := strings.TrimSpace(getenv(envTracesPrefix+"ENDPOINT")), envTracesPrefix+"ENDPOINT"
	asIs := raw != "" // a traces endpoint is the whole URL, over HTTP
	if raw == "" {
		raw, from = strings.TrimSpace(getenv(envPrefix+"ENDPOINT")), envPrefix+"ENDPOINT"
	}
	if raw == "" {
		raw = defaultHTTPEndpoint
		if protocol == ProtocolGRPC {
			raw = defaultGRPCEndpoint
		}
	}
	if !strings.Contains(raw, "://") && protocol == ProtocolGRPC {
		insecure, err := boolEnv(env(getenv, "INSECURE"))
		if err != nil {
			return nil, err
		}
		scheme := "https"
		if insecure {
			scheme = "http"
		}
		raw = scheme + "://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		// Not echoed: the value may hold a password.
		return nil, fmt.Errorf("%s is not a URL", from)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// Nothing of the value but a scheme that is one: "user:s3cret@host"
		// parses as the scheme "user" and the opaque "s3cret@host".
		scheme := ""
		if u.Scheme != "" && u.Opaque == "" {
			scheme = fmt.Sprintf(" (its scheme is %q)", u.Scheme)
		}
		return nil, fmt.Errorf("%s is not an http:// or https:// URL%s", from, scheme)
	}
	switch {
	case protocol == ProtocolGRPC:
		// The gRPC method is the whole path.
		u = &url.URL{Scheme: u.Scheme, Host: u.Host, Path: grpcExportPath}
	case !asIs:
		u.Path = strings.TrimSuffix(u.Path, "/") + httpTracesPath
	}
	return u, nil
}

func boolEnv(v, from string) (bool, error) {
	switch strings.ToLower(v) {
	case "true":
		return true, nil
	case "false", "":
		return false, nil
	}
	return false, fmt.Errorf("%s=%q is not true or false", from, v)
}

// headers parses a list of key=value pairs separated by commas, each key
// and value URL-encoded (the W3C baggage format the specification names);
// empty entries (a trailing comma) are skipped. A pair that cannot be sent
// as a header is refused here, once, rather than by every export. The
// errors name an entry by its position, and by its key when that is a
// header name: a value, or what may be one, is never shown (it is often a
// secret).
func headers(v, from string) (http.Header, error) {
	h := http.Header{}
	for i, entry := range strings.Split(v, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		at := fmt.Sprintf("%s, entry %d", from, i+1)
		rawKey, rawValue, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, fmt.Errorf("%s is not a key=value pair (no '=')", at)
		}
		key, err := url.PathUnescape(strings.TrimSpace(rawKey))
		if err != nil || !httpguts.ValidHeaderFieldName(key) {
			return nil, fmt.Errorf("%s: the key is not a URL-encoded header name", at)
		}
		at += fmt.Sprintf(" (%s)", key)
		value, err := url.PathUnescape(strings.TrimSpace(rawValue))
		if err != nil {
			return nil, fmt.Errorf("%s: the value is not URL-encoded", at)
		}
		if !httpguts.ValidHeaderFieldValue(value) {
			return nil, fmt.Errorf("%s: the value holds a character a header cannot carry (a control character such as a line break)", at)
		}
		if connectionHeader(key, value) {
			return nil, fmt.Errorf("%s: a connection's own header, which HTTP/2 (gRPC) refuses and the exporter sets itself", at)
		}
		h.Add(key, value)
	}
	return h, nil
}

// connectionHeader says whether key: value is a header of the connection
// rather than of the request, which an HTTP/2 request must not carry
// (RFC 9113, 8.2.2); TE is allowed as "trailers" only.
func connectionHeader(key, value string) bool {
	switch http.CanonicalHeaderKey(key) {
	case "Connection", "Upgrade", "Transfer-Encoding", "Keep-Alive", "Proxy-Connection":
		return true
	case "Te":
		return !strings.EqualFold(value, "trailers")
	}
	return false
}

// scaled is n units, at most the longest time.Duration.
func scaled(n int64, unit time.Duration) time.Duration {
	if n > math.MaxInt64/int64(unit) {
		return math.MaxInt64
	}
	return time.Duration(n) * unit
}

// tlsConfig reads the certificate files: the CA to check the collector
// against, and the client's certificate and key for mutual TLS.
func tlsConfig(getenv func(string) string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if file, from := env(getenv, "CERTIFICATE"); file != "" {
		pem, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("while reading %s: %w", from, err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s=%q holds no PEM certificate", from, file)
		}
	}
	certFile, certFrom := env(getenv, "CLIENT_CERTIFICATE")
	keyFile, keyFrom := env(getenv, "CLIENT_KEY")
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("%s and %s go together: set both or neither", certFrom, keyFrom)
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("while reading the client certificate (%s, %s): %w", certFrom, keyFrom, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}
