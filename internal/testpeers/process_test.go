package testpeers

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// TestProcessExitKillsItsGroup: a process that exits on its own takes what
// it left running in its process group with it (killed before the process
// is reaped, while its group id cannot be another's), and Kill after that,
// twice, as a failed start's retry and the test's cleanup both do, returns
// without signalling anything.
func TestProcessExitKillsItsGroup(t *testing.T) {
	childPID := filepath.Join(t.TempDir(), "child.pid")
	// The shell starts a child in its group, then exits without listening.
	p, err := start(t, testkit.FreePort(t), nil, "sh", "-c", `sleep 600 & echo $! > "$0"`, childPID)
	if err == nil || !strings.Contains(err.Error(), "exited before listening") {
		t.Fatalf("start of a process that exits at once: %v, want an error saying it exited", err)
	}
	<-p.done
	data, err := os.ReadFile(childPID)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("the child's pid %q: %v", data, err)
	}
	// Killed, the orphan is reaped by init: until then it is a zombie.
	for deadline := time.Now().Add(30 * time.Second); childRunning(child); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the child %d of the exited process still runs", child)
		}
	}
	p.Kill()
	p.Kill()
	if !p.Exited() {
		t.Fatal("the process has not exited after Kill")
	}
}

// childRunning says whether pid is a live process: not gone, not a zombie.
func childRunning(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name's closing parenthesis.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}
