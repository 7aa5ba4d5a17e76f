package stdioadapter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/testenv"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

var adapterBuild struct {
	once sync.Once
	path string
	err  error
}

// buildAdapter builds the real stdio-adapter binary, the one server pods
// run, once per test run.
func buildAdapter(t *testing.T) string {
	t.Helper()
	adapterBuild.once.Do(func() {
		root, err := testenv.RepoRoot()
		if err != nil {
			adapterBuild.err = err
			return
		}
		dir, err := os.MkdirTemp("", "stdioadapter-test-")
		if err != nil {
			adapterBuild.err = err
			return
		}
		cleanups = append(cleanups, func() { os.RemoveAll(dir) })
		adapterBuild.path = filepath.Join(dir, "stdio-adapter")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		build := exec.CommandContext(ctx, "go", "build", "-o", adapterBuild.path, "./cmd/stdio-adapter")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			adapterBuild.err = fmt.Errorf("go build ./cmd/stdio-adapter: %w\n%s", err, out)
		}
	})
	if adapterBuild.err != nil {
		t.Fatal(adapterBuild.err)
	}
	return adapterBuild.path
}

var addressInLog = regexp.MustCompile(`msg=serving .*address=(\S+)`)

// The real binary, end to end: `stdio-adapter` serves a real client,
// passes the server's stderr through, forwards SIGTERM, exits with the
// server's code, and leaves no process behind — not even one that left the
// server's process group (the binary makes itself a child subreaper and
// kills what it adopted).
func TestAdapterBinary(t *testing.T) {
	adapter := buildAdapter(t)
	pidFile := filepath.Join(t.TempDir(), "escaped.pid")
	// A process that escapes the group with setsid, records its pid, and
	// would sleep for five minutes.
	script := `(setsid sh -c 'echo $$ > "$1"; exec sleep 300' _ "$0" &) ; exec "$1"`
	cmd := exec.Command(adapter, "--listen", "127.0.0.1:0", "--grace-period", "3s", "--",
		"sh", "-c", script, pidFile, peer(t, "mcp-server-everything"))
	// A file, not a pipe: the test must not wait for every holder of the
	// adapter's stderr to close it (that is the kubelet's business).
	stderr := &fileLog{path: filepath.Join(t.TempDir(), "stderr")}
	f, err := os.Create(stderr.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stderr = f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("adapter stderr:\n%s", stderr)
		}
	})

	var addr string
	for deadline := time.Now().Add(15 * time.Second); addr == ""; time.Sleep(20 * time.Millisecond) {
		if m := addressInLog.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the adapter did not report its address:\n%s", stderr)
		}
	}
	out := tsClient(t, "http://"+addr+"/mcp", "sum", "1")
	if out["wrong"].(float64) != 0 {
		t.Errorf("wrong answers: %v", out)
	}
	if !strings.Contains(stderr.String(), "Starting default (STDIO) server...") {
		t.Errorf("the server's stderr did not pass through:\n%s", stderr)
	}
	serverPID := childPID(t, stderr.String())
	escaped := readPID(t, pidFile)
	t.Cleanup(func() {
		if data, err := os.ReadFile("/proc/" + strconv.Itoa(escaped) + "/cmdline"); err == nil && strings.HasPrefix(string(data), "sleep") {
			syscall.Kill(escaped, syscall.SIGKILL) // the test failed; don't leave it behind
		}
	})

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.ExitCode() != 128+int(syscall.SIGTERM) {
			t.Errorf("the adapter exited with %v, want code %d", err, 128+int(syscall.SIGTERM))
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the adapter did not exit after SIGTERM")
	}
	waitGroupGone(t, serverPID, 5*time.Second)
	if _, err := os.Stat("/proc/" + strconv.Itoa(escaped)); err == nil {
		t.Errorf("the process that left the server's group (pid %d) outlived the adapter", escaped)
	}
}

// The real binary exits with the code of a server that fails at start.
func TestAdapterBinaryExitCode(t *testing.T) {
	adapter := buildAdapter(t)
	ctx := testkit.Context(t)
	cmd := exec.CommandContext(ctx, adapter, "--listen", "127.0.0.1:0", "--",
		"sh", "-c", "echo about to fail >&2; exit 3")
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 {
		t.Errorf("exit: %v, want code 3\n%s", err, out)
	}
	if !strings.Contains(string(out), "about to fail") {
		t.Errorf("the server's stderr is missing:\n%s", out)
	}

	usage := exec.CommandContext(ctx, adapter, "--listen", "127.0.0.1:0")
	if err := usage.Run(); !errors.As(err, &exitErr) || exitErr.ExitCode() != 2 {
		t.Errorf("without a command: %v, want code 2", err)
	}
}

// fileLog reads a log file as it grows.
type fileLog struct{ path string }

func (l *fileLog) String() string {
	data, _ := os.ReadFile(l.path)
	return string(data)
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		data, _ := os.ReadFile(path)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
	}
}

// What the adapter container's postStart hook in a stdio server pod runs:
// the real binary copies itself where the server container finds it,
// executable, and when it cannot, says why on stderr and in the container's
// termination log and exits non-zero (the hook fails).
func TestAdapterBinaryInstallsItself(t *testing.T) {
	adapter := buildAdapter(t)
	dst := filepath.Join(t.TempDir(), "stdio-adapter")
	if out, err := exec.Command(adapter, "--install", dst).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want, _ := os.ReadFile(adapter)
	got, err := os.ReadFile(dst)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("installed binary differs from the built one (err %v)", err)
	}
	if info, _ := os.Stat(dst); info.Mode().Perm()&0o111 == 0 {
		t.Errorf("installed binary is not executable: %v", info.Mode())
	}
	termLog := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(termLog, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(adapter, "--install", filepath.Join(dst, "no", "such", "dir"), "--termination-log", termLog).CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 || !strings.Contains(string(out), "stdio-adapter --install:") {
		t.Errorf("install into a missing directory: %v, %s; want exit 1 and the reason", err, out)
	}
	if msg, _ := os.ReadFile(termLog); !strings.HasPrefix(string(msg), "stdio-adapter --install: while creating") || !strings.Contains(string(out), string(msg)) {
		t.Errorf("termination log holds %q, want the error printed (%s)", msg, out)
	}
	// Outside a pod there is no termination log, and none is created.
	missing := filepath.Join(t.TempDir(), "termination-log")
	if _, err := exec.Command(adapter, "--install", filepath.Join(dst, "no", "such", "dir"), "--termination-log", missing).CombinedOutput(); err == nil {
		t.Error("install into a missing directory succeeded")
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("a missing termination log was created (%v)", err)
	}
}

// What the adapter's own container in a stdio server pod runs: the real
// binary holds until SIGTERM and then exits 0, so the pod's end is not
// taken for the adapter's failure.
func TestAdapterBinaryHolds(t *testing.T) {
	adapter := buildAdapter(t)
	cmd := exec.Command(adapter, "--hold")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("exited before any signal: %v", err)
	case <-time.After(time.Second):
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("still running 10 s after SIGTERM")
	}
}
