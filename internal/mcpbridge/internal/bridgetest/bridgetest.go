// Package bridgetest holds what the bridge's tests share: real upstream MCP
// servers started as local processes that a test can kill mid-call, the
// MCPServer objects the controller would publish for them (probed exactly as
// it probes), and a thread-safe audit sink.
package bridgetest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/mcpstatus"
	"github.com/mcp-operator/mcp-operator/internal/mcp/probe"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/stdioadapter"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// Process is an upstream server process in its own process group.
type Process struct {
	URL  string
	Port int
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// Port returns a loopback port that is free right now.
func Port(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("while finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start runs a server listening on port (path /mcp), waits until it accepts
// connections, and kills its process group when the test ends.
func Start(t testing.TB, port int, env []string, name string, args ...string) *Process {
	t.Helper()
	p := &Process{URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), Port: port, done: make(chan struct{})}
	p.cmd = exec.Command(name, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.log = filepath.Join(t.TempDir(), "server.log")
	logf, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("while starting %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); logf.Close(); close(p.done) }()
	t.Cleanup(p.Kill)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-p.done:
			data, _ := os.ReadFile(p.log)
			t.Fatalf("%s exited before listening on %s: %s", name, addr, data)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return p
		}
	}
	t.Fatalf("%s did not listen on %s within 20s", name, addr)
	return nil
}

// Kill stops the whole process group at once (a crash) and waits for it.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Log is what the process printed.
func (p *Process) Log() string {
	data, _ := os.ReadFile(p.log)
	return string(data)
}

// GoEverything starts the go-sdk conformance everything-server over HTTP
// (the session era unless stateless).
func GoEverything(t testing.TB, stateless bool) *Process {
	t.Helper()
	bin, err := testpeers.EverythingServer()
	if err != nil {
		t.Fatal(err)
	}
	port := Port(t)
	return Start(t, port, nil, bin, "-http=127.0.0.1:"+strconv.Itoa(port), "-stateless="+strconv.FormatBool(stateless))
}

// NodeEverything starts @modelcontextprotocol/server-everything over
// Streamable HTTP with extra environment.
func NodeEverything(t testing.TB, env ...string) *Process {
	t.Helper()
	bin, err := testpeers.NPMBin("mcp-server-everything")
	if err != nil {
		t.Fatal(err)
	}
	port := Port(t)
	return Start(t, port, append([]string{"PORT=" + strconv.Itoa(port)}, env...), bin, "streamableHttp")
}

// Published is the MCPServer the controller would publish for a server at
// url: probed with the controller's probe, Ready, endpoint set.
func Published(t testing.TB, namespace, name, url string, spec v1alpha1.ToolsSpec) v1alpha1.MCPServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := probe.Run(ctx, probe.Target{HTTP: &streamhttp.Options{URL: url}}, probe.Options{Server: name, Tools: spec})
	if err != nil {
		t.Fatalf("while probing %s: %v", url, err)
	}
	s := v1alpha1.MCPServer{}
	s.Namespace, s.Name = namespace, name
	s.CreationTimestamp = metav1.Now()
	s.Spec.Transport = v1alpha1.TransportStreamableHTTP
	s.Spec.Remote = &v1alpha1.Remote{URL: url}
	s.Spec.Tools = spec
	s.Status = StatusOf(res, url, "pod-1")
	return s
}

// StatusOf is the status of a probed, Ready server behind url and pod.
func StatusOf(res *probe.Result, url, pod string) v1alpha1.MCPServerStatus {
	st := v1alpha1.MCPServerStatus{
		Endpoint:      &v1alpha1.Endpoint{URL: url, PodName: pod},
		ServerInfo:    mcpstatus.ServerInfo(res.ServerInfo, res.ProtocolVersion),
		Capabilities:  mcpstatus.Capabilities(res.Capabilities),
		Tools:         mcpstatus.Tools(res.Catalog),
		ToolCount:     int32(len(res.Catalog.Tools)),
		Prompts:       mcpstatus.Prompts(res.Prompts),
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
