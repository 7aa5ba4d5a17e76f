package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// tb gives testpeers the little of a test it needs: its processes and
// temporary directories go when the run ends.
type tb struct{ cleanups []func() }

func (t *tb) Helper()                           {}
func (t *tb) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (t *tb) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (t *tb) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }

func (t *tb) TempDir() string {
	dir, err := os.MkdirTemp("", "bench-controller-")
	if err != nil {
		panic(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func (t *tb) close() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

// stat is a process's parent pid, command name and user+system CPU time,
// from /proc.
func stat(pid int) (ppid int, comm string, cpu time.Duration, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", 0, false
	}
	s := string(data)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return 0, "", 0, false
	}
	fields := strings.Fields(s[end+2:])
	ppid, _ = strconv.Atoi(fields[1])
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return ppid, s[open+1 : end], time.Duration(utime+stime) * time.Second / 100, true // USER_HZ
}

func cpuOf(pid int) time.Duration {
	_, _, cpu, _ := stat(pid)
	return cpu
}

// apiServerCPU is the CPU time of the kube-apiserver and etcd envtest started
// as this process's children.
func apiServerCPU() time.Duration {
	entries, _ := filepath.Glob("/proc/[0-9]*")
	var total time.Duration
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(filepath.Base(e))
		if err != nil {
			continue
		}
		ppid, comm, cpu, ok := stat(pid)
		if ok && ppid == self && (comm == "kube-apiserver" || comm == "etcd") {
			total += cpu
		}
	}
	return total
}
