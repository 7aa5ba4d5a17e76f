package controller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// Prober reads a server's catalog. The real one speaks MCP (internal/mcp);
// the interface keeps the reconciler independent of the wire.
type Prober interface {
	Probe(ctx context.Context, target ProbeTarget) (*Catalog, error)
}

// ProbeTarget is where and how to reach a server.
type ProbeTarget struct {
	// Server is the MCPServer probed: its name prefixes the tools and its
	// spec.tools decides exclusions and risks.
	Server *mcpv1alpha1.MCPServer
	URL    string
	Header http.Header
	// TLS is nil for the default TLS settings.
	TLS     *tls.Config
	Timeout time.Duration
}

// Catalog is what a probe publishes in status.
type Catalog struct {
	ServerInfo   mcpv1alpha1.ServerInfo
	Capabilities mcpv1alpha1.ServerCapabilities
	// Tools are the valid tools, sorted by namespaced name.
	Tools []mcpv1alpha1.ToolStatus
	// Invalid names the tools left out and why ("name: reason"), sorted.
	Invalid       []string
	Prompts       []mcpv1alpha1.PromptStatus
	ResourceCount int32
	// Digest is "sha256:<hex>" of the canonical catalog.
	Digest string
}

// errCredentials marks a missing Secret or key: the server can't be reached
// until the user creates it, so it is not a crash.
type errCredentials struct{ msg string }

func (e errCredentials) Error() string { return e.msg }

// remoteTarget reads the Secrets a remote server's spec names.
func remoteTarget(ctx context.Context, c client.Reader, s *mcpv1alpha1.MCPServer) (ProbeTarget, error) {
	r := s.Spec.Remote
	t := ProbeTarget{Server: s, URL: r.URL, Header: http.Header{}, Timeout: s.Spec.Probe.Timeout.Duration}
	if r.Auth != nil && r.Auth.BearerTokenSecretRef != nil {
		token, err := secretValue(ctx, c, s.Namespace, *r.Auth.BearerTokenSecretRef)
		if err != nil {
			return t, err
		}
		t.Header.Set("Authorization", "Bearer "+strings.TrimSpace(token))
	}
	for _, h := range r.HeadersFrom {
		v, err := secretValue(ctx, c, s.Namespace, h.SecretKeyRef)
		if err != nil {
			return t, err
		}
		t.Header.Set(h.Name, v)
	}
	if r.Auth != nil && r.Auth.TLSSecretRef != nil {
		cfg, err := tlsConfig(ctx, c, s.Namespace, r.Auth.TLSSecretRef.Name)
		if err != nil {
			return t, err
		}
		t.TLS = cfg
	}
	return t, nil
}

func secretValue(ctx context.Context, c client.Reader, namespace string, ref mcpv1alpha1.SecretKeySelector) (string, error) {
	var secret corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, &secret); err != nil {
		return "", errCredentials{fmt.Sprintf("Secret %s: %v", ref.Name, err)}
	}
	v, ok := secret.Data[ref.Key]
	if !ok {
		return "", errCredentials{fmt.Sprintf("Secret %s has no key %q", ref.Name, ref.Key)}
	}
	return string(v), nil
}

// tlsConfig builds the client TLS settings from a Secret holding ca.crt and,
// for mutual TLS, tls.crt and tls.key.
func tlsConfig(ctx context.Context, c client.Reader, namespace, name string) (*tls.Config, error) {
	var secret corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &secret); err != nil {
		return nil, errCredentials{fmt.Sprintf("Secret %s: %v", name, err)}
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca, ok := secret.Data["ca.crt"]; ok {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, errCredentials{fmt.Sprintf("Secret %s: ca.crt holds no PEM certificate", name)}
		}
		cfg.RootCAs = pool
	}
	crt, hasCrt := secret.Data["tls.crt"]
	key, hasKey := secret.Data["tls.key"]
	if hasCrt != hasKey {
		return nil, errCredentials{fmt.Sprintf("Secret %s: tls.crt and tls.key go together", name)}
	}
	if hasCrt {
		pair, err := tls.X509KeyPair(crt, key)
		if err != nil {
			return nil, errCredentials{fmt.Sprintf("Secret %s: tls.crt/tls.key: %v", name, err)}
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// workloadURL is the pod's MCP endpoint: the bridge and the probe dial the pod
// IP, so a restart shows as a new endpoint and cluster DNS is not needed.
func workloadURL(s *mcpv1alpha1.MCPServer, pod *corev1.Pod) string {
	port := s.Spec.Workload.Port
	if port == 0 {
		port = 8080
	}
	path := s.Spec.Workload.Path
	if path == "" {
		path = "/mcp"
	}
	host := pod.Status.PodIP
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return fmt.Sprintf("http://%s:%d%s", host, port, path)
}
