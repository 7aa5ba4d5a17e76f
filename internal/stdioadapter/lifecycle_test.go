package stdioadapter

import (
	"errors"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// server-filesystem exits when none of its directories exists: the adapter
// exits with the same code it does when run directly.
func TestServerCrashIsExitCode(t *testing.T) {
	missing := t.TempDir() + "/missing"
	direct := exec.Command(peer(t, "mcp-server-filesystem"), missing)
	var exitErr *exec.ExitError
	if err := direct.Run(); !errors.As(err, &exitErr) {
		t.Fatalf("run directly, the server did not fail: %v", err)
	}
	want := exitErr.ExitCode()

	ln := listen(t)
	stderr := &lockedBuffer{}
	code := runWithTimeout(t, Config{Command: []string{peer(t, "mcp-server-filesystem"), missing}, Listener: ln, Stderr: stderr})
	if code != want || code == 0 {
		t.Errorf("exit code %d, want the server's %d", code, want)
	}
	if !strings.Contains(stderr.String(), "None of the specified directories are accessible") {
		t.Errorf("the server's stderr did not pass through:\n%s", stderr)
	}
}

func TestCommandNotFound(t *testing.T) {
	code := runWithTimeout(t, Config{Command: []string{"/nonexistent/mcp-server"}, Listener: listen(t), Stderr: &lockedBuffer{}})
	if code != 127 {
		t.Errorf("exit code %d, want 127", code)
	}
}

// A server killed in the middle of a call: the call gets a JSON-RPC error at
// once, and the adapter exits with 128+9.
func TestServerKilledDuringCall(t *testing.T) {
	a := startAdapter(t, []string{peer(t, "mcp-server-everything")}, nil)
	c := &rawClient{url: a.url}
	c.initialize(t)
	answer := make(chan []byte, 1)
	go func() {
		_, body := c.post(t, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":20,"steps":2}}}`)
		answer <- body
	}()
	time.Sleep(300 * time.Millisecond)
	if err := syscall.Kill(childPID(t, a.stderr.String()), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case body := <-answer:
		events := sseData(body)
		if len(events) != 1 || jsonField(t, events[0], "id") != float64(5) || jsonField(t, events[0], "error", "code") != float64(codeServerGone) {
			t.Errorf("the call in flight got %s", body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight was not answered after the server died")
	}
	if code := a.wait(t, 10*time.Second); code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit code %d, want %d", code, 128+int(syscall.SIGKILL))
	}
}

// SIGTERM reaches server-everything, which has no handler for it and dies
// of it (143); SIGINT reaches it as SIGINT, which its handler turns into a
// clean exit (0). A grandchild that ignores SIGTERM is killed with the
// group, so nothing of the server is left.
func TestSignalsReachTheServer(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		want int
	}{
		{syscall.SIGTERM, 128 + int(syscall.SIGTERM)},
		{syscall.SIGINT, 0},
	} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			// The subshell ignores SIGTERM and becomes a sleep that outlives
			// the server unless the adapter kills the whole group.
			cmd := []string{"sh", "-c", `(trap "" TERM; exec sleep 300) & exec "$0"`, peer(t, "mcp-server-everything")}
			a := startAdapter(t, cmd, nil)
			c := &rawClient{url: a.url}
			c.initialize(t)
			pid := childPID(t, a.stderr.String())
			if n := len(groupMembers(pid)); n != 2 {
				t.Fatalf("the server's group has %d processes, want 2 (server and sleep): %v", n, groupMembers(pid))
			}
			a.signals <- tc.sig
			if code := a.wait(t, 10*time.Second); code != tc.want {
				t.Errorf("exit code %d, want %d", code, tc.want)
			}
			waitGroupGone(t, pid, 5*time.Second)
		})
	}
}

// A server that ignores SIGTERM is killed when the grace period ends.
func TestGracePeriodEndsInKill(t *testing.T) {
	a := startAdapter(t, fakeChildCommand("stubborn"), func(c *Config) { c.GracePeriod = 500 * time.Millisecond })
	(&rawClient{url: a.url}).initialize(t) // it answers once it ignores SIGTERM
	pid := childPID(t, a.stderr.String())
	start := time.Now()
	a.signals <- syscall.SIGTERM
	if code := a.wait(t, 10*time.Second); code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit code %d, want %d", code, 128+int(syscall.SIGKILL))
	}
	if d := time.Since(start); d < 500*time.Millisecond || d > 5*time.Second {
		t.Errorf("killed after %s, want just after the 500ms grace period", d)
	}
	waitGroupGone(t, pid, 5*time.Second)
}

// A server that crashes leaves no process of its group behind either.
func TestCrashLeavesNoOrphan(t *testing.T) {
	cmd := []string{"sh", "-c", `sleep 300 & exec "$0"`, peer(t, "mcp-server-everything")}
	a := startAdapter(t, cmd, nil)
	(&rawClient{url: a.url}).initialize(t)
	pid := childPID(t, a.stderr.String())
	if n := len(groupMembers(pid)); n != 2 {
		t.Fatalf("the server's group has %d processes, want 2 (server and sleep): %v", n, groupMembers(pid))
	}
	syscall.Kill(pid, syscall.SIGSEGV)
	if code := a.wait(t, 10*time.Second); code != 128+int(syscall.SIGSEGV) {
		t.Errorf("exit code %d, want %d", code, 128+int(syscall.SIGSEGV))
	}
	waitGroupGone(t, pid, 5*time.Second)
}

// A server that closes its stdout but keeps running can answer nobody: it
// is stopped, and its exit code is the adapter's.
func TestServerClosingStdoutIsStopped(t *testing.T) {
	cmd := []string{"sh", "-c", `exec >&-; exec sleep 300`}
	code := runWithTimeout(t, Config{Command: cmd, Listener: listen(t), Stderr: &lockedBuffer{}})
	if code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit code %d, want %d", code, 128+int(syscall.SIGTERM))
	}
}

func runWithTimeout(t *testing.T, cfg Config) int {
	t.Helper()
	done := make(chan int, 1)
	go func() { done <- Run(t.Context(), cfg) }()
	select {
	case code := <-done:
		return code
	case <-time.After(20 * time.Second):
		t.Fatal("the adapter did not exit within 20s")
		return 0
	}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}
