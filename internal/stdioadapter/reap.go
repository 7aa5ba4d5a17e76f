package stdioadapter

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// In a pod the adapter is PID 1, so every process that loses its parent —
// a grandchild whose parent, the stdio server, died — becomes the adapter's
// child. Outside a container the same holds once the adapter is a child
// subreaper (see BecomeSubreaper). Such adopted processes must be reaped, or
// they stay zombies, and killed at the end, or they outlive the server.

// adoptedChildren lists this process's children other than except, with
// their state letter from /proc (Z: zombie).
func adoptedChildren(except int) map[int]byte {
	self := os.Getpid()
	out := map[int]byte{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // the process is gone
		}
		// "pid (comm) state ppid …"; comm may hold spaces and parentheses.
		rest := string(data)
		if i := strings.LastIndexByte(rest, ')'); i >= 0 {
			rest = rest[i+1:]
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if ppid == self && pid != except {
			out[pid] = f[0][0]
		}
	}
	return out
}

// reapZombies collects adopted children that have exited. It never waits
// for the server process itself (except), whose status os/exec collects.
func reapZombies(except int) {
	for pid, state := range adoptedChildren(except) {
		if state == 'Z' {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
	}
}

// killAdopted kills and reaps every adopted child left once the server has
// exited: the processes that left its process group (setsid) and so escaped
// the group kill. It gives up after timeout.
func killAdopted(except int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		left := adoptedChildren(except)
		if len(left) == 0 || time.Now().After(deadline) {
			return
		}
		for pid, state := range left {
			if state != 'Z' {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
