package controller

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/k8s/credentials"
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

// remoteTarget reads the Secrets a remote server's spec names.
func remoteTarget(ctx context.Context, c client.Reader, s *mcpv1alpha1.MCPServer) (ProbeTarget, error) {
	creds, err := credentials.Read(ctx, c, s)
	header := creds.Header
	if header == nil {
		header = http.Header{}
	}
	if creds.BearerToken != "" {
		header.Set("Authorization", "Bearer "+creds.BearerToken)
	}
	return ProbeTarget{Server: s, URL: s.Spec.Remote.URL, Header: header, TLS: creds.TLS, Timeout: s.Spec.Probe.Timeout.Duration}, err
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
