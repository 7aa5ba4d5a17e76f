// Package bridgetest holds what the bridge's tests share: real upstream MCP
// servers started as local processes that a test can kill mid-call, the
// MCPServer objects the controller would publish for them (probed exactly as
// it probes), and a thread-safe audit sink.
package bridgetest

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/k8s/mcpstatus"
	"github.com/mcp-operator/mcp-operator/internal/mcp/probe"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/stdioadapter"
)

// Published is the MCPServer the controller would publish for a server at
// url: probed with the controller's probe, Ready, endpoint set.
func Published(t testing.TB, namespace, name, url string, spec v1alpha1.ToolsSpec) v1alpha1.MCPServer {
	t.Helper()
	return publish(t, namespace, name, streamhttp.Options{URL: url}, spec, v1alpha1.ServerRequests{})
}

// PublishedOver is Published for a server reached with the given options
// (a remote server's credentials, as the controller reads them).
func PublishedOver(t testing.TB, namespace, name string, opts streamhttp.Options, spec v1alpha1.ToolsSpec) v1alpha1.MCPServer {
	t.Helper()
	return publish(t, namespace, name, opts, spec, v1alpha1.ServerRequests{})
}

// PublishedRelaying is Published for a server with spec.serverRequests set
// to requests (the probe declares what the bridge will relay).
func PublishedRelaying(t testing.TB, namespace, name, url string, spec v1alpha1.ToolsSpec, requests v1alpha1.ServerRequests) v1alpha1.MCPServer {
	t.Helper()
	return publish(t, namespace, name, streamhttp.Options{URL: url}, spec, requests)
}

func publish(t testing.TB, namespace, name string, opts streamhttp.Options, spec v1alpha1.ToolsSpec, requests v1alpha1.ServerRequests) v1alpha1.MCPServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := probe.Run(ctx, probe.Target{HTTP: &opts}, probe.Options{Server: name, Tools: spec, ClientCapabilities: requests.ClientCapabilities()})
	if err != nil {
		t.Fatalf("while probing %s: %v", opts.URL, err)
	}
	s := v1alpha1.MCPServer{}
	s.Namespace, s.Name = namespace, name
	s.CreationTimestamp = metav1.Now()
	s.Spec.Transport = v1alpha1.TransportStreamableHTTP
	s.Spec.Remote = &v1alpha1.Remote{URL: opts.URL}
	s.Spec.Tools = spec
	s.Spec.ServerRequests = requests
	s.Status = StatusOf(res, opts.URL, "pod-1")
	return s
}

// StatusOf is the status of a probed, Ready server behind url and pod.
func StatusOf(res *probe.Result, url, pod string) v1alpha1.MCPServerStatus {
	st := v1alpha1.MCPServerStatus{
		Endpoint:      &v1alpha1.Endpoint{URL: url, PodName: pod},
		ServerInfo:    mcpstatus.ServerInfo(res.ServerInfo, res.ProtocolVersion, nil),
		Capabilities:  mcpstatus.Capabilities(res.Capabilities),
		Tools:         mcpstatus.Tools(res.Catalog, nil),
		ToolCount:     int32(len(res.Catalog.Tools)),
		Prompts:       mcpstatus.Prompts(res.Prompts, nil),
		Skills:        mcpstatus.Skills(res.Skills, nil),
		CatalogDigest: res.Catalog.Digest,
	}
	st.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonServing, Message: "the catalog is published", LastTransitionTime: metav1.Now()}}
	return st
}

// Sink is a thread-safe audit sink.
type Sink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *Sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// String is everything written so far.
func (s *Sink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// ServeStdio runs a stdio MCP server (a real one, such as
// server-filesystem) behind the project's stdio adapter, in this process,
// as it runs in a server's pod; it returns the adapter's URL. Both stop when
// the test ends.
func ServeStdio(t testing.TB, command ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr Sink
	go func() {
		done <- stdioadapter.Run(ctx, stdioadapter.Config{Command: command, Listener: ln, Stderr: &stderr, GracePeriod: 2 * time.Second})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("the stdio adapter did not stop: %s", stderr.String())
		}
	})
	return "http://" + ln.Addr().String() + "/mcp"
}
