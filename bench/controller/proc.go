package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/mcp-operator/mcp-operator/bench/internal/benchutil"
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
		ppid, comm, cpu, ok := benchutil.Stat(pid)
		if ok && ppid == self && (comm == "kube-apiserver" || comm == "etcd") {
			total += cpu
		}
	}
	return total
}
