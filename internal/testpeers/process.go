package testpeers

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// Process is an upstream server process in its own process group.
type Process struct {
	URL  string
	Port int
	cmd  *exec.Cmd
	done chan struct{}
	log  string

	// mu orders Kill's signal before the reaping of the process: once it is
	// reaped its PID, the group's id, may be another process's.
	mu     sync.Mutex
	reaped bool
}

// Start runs a server listening on port (path /mcp), waits until it accepts
// connections, and kills its process group when the test ends.
func Start(t testkit.TB, port int, env []string, name string, args ...string) *Process {
	t.Helper()
	p, err := start(t, port, env, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// start is Start with an error when the process exits before it listens
// (its log says why), so that a caller can try again with other ports.
func start(t testkit.TB, port int, env []string, name string, args ...string) (*Process, error) {
	t.Helper()
	p := &Process{URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), Port: port, done: make(chan struct{})}
	p.cmd = exec.Command(name, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.log = filepath.Join(t.TempDir(), "server.log")
	logf, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("while starting %s: %w", name, err)
	}
	go func() { p.wait(); logf.Close(); close(p.done) }()
	t.Cleanup(p.Kill)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	const wait = 60 * time.Second
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if p.Exited() {
			return p, fmt.Errorf("%s exited before listening on %s: %s", name, addr, p.Log())
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return p, nil
		}
	}
	return p, fmt.Errorf("%s did not listen on %s within %s", name, addr, wait)
}

// Exited says whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the process to exit, kills what it left in its group, and
// only then reaps it: until then the unreaped process keeps its PID, the
// group's id, from being reused, so the signal reaches no other process.
func (p *Process) wait() {
	pid := p.cmd.Process.Pid
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = p.cmd.Wait()
	p.reaped = true
}

// Kill stops the whole process group at once (a crash) and waits for it.
// Killing again, or a process that has ended, does nothing.
func (p *Process) Kill() {
	p.mu.Lock()
	if !p.reaped {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	p.mu.Unlock()
	<-p.done
}

// Log is what the process printed.
func (p *Process) Log() string {
	data, _ := os.ReadFile(p.log)
	return string(data)
}

// GoEverything starts the go-sdk conformance everything-server over HTTP
// (the session era unless stateless).
func GoEverything(t testkit.TB, stateless bool) *Process {
	t.Helper()
	bin, err := EverythingServer()
	if err != nil {
		t.Fatal(err)
	}
	port := testkit.FreePort(t)
	return Start(t, port, nil, bin, "-http=127.0.0.1:"+strconv.Itoa(port), "-stateless="+strconv.FormatBool(stateless))
}

// NodeEverything starts @modelcontextprotocol/server-everything over
// Streamable HTTP with extra environment.
func NodeEverything(t testkit.TB, env ...string) *Process {
	t.Helper()
	bin, err := NPMBin("mcp-server-everything")
	if err != nil {
		t.Fatal(err)
	}
	port := testkit.FreePort(t)
	return Start(t, port, append([]string{"PORT=" + strconv.Itoa(port)}, env...), bin, "streamableHttp")
}
