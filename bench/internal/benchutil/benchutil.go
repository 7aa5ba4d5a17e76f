// Package benchutil holds what the benchmarks under bench/ share: reading a
// child process's CPU and memory from /proc, running and stopping children,
// and the statistics they print.
package benchutil

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Stat is a process's parent pid, command name and user+system CPU time,
// from /proc.
func Stat(pid int) (ppid int, comm string, cpu time.Duration, ok bool) {
	if pid == 0 {
		return 0, "", 0, false
	}
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

// CPU is a process's user+system CPU time.
func CPU(pid int) time.Duration {
	_, _, cpu, _ := Stat(pid)
	return cpu
}

// RSS is a process's resident set in bytes.
func RSS(pid int) int64 {
	if pid == 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// FreeAddr is a loopback address nothing listens on now.
func FreeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Stop kills a child started in its own process group, and its children.
func Stop(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
}

// Pct is the p-th percentile of d.
func Pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, len(s)*p/100)]
}

// Verdict is how every benchmark prints whether a target was met.
func Verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// Median of v.
func Median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// ThreadCPU is a process's CPU time to the nanosecond: the sum of its
// threads' run time from /proc/PID/task/*/schedstat, where CPU counts in
// clock ticks (10 ms). A thread that ended is not counted (Go's runtime
// keeps its threads), so it is for short windows of a running process:
// the CPU of a few hundred calls, and whether a process is quiet.
func ThreadCPU(pid int) time.Duration {
	cpu, _ := ThreadSched(pid)
	return cpu
}

// ThreadSched is ThreadCPU and how many times the process's threads were
// put on a CPU (each wake-up of a sleeping thread is one).
func ThreadSched(pid int) (cpu time.Duration, runs int64) {
	if pid == 0 {
		return 0, 0
	}
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0
	}
	for _, t := range tasks {
		data, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread ended meanwhile
		}
		f := strings.Fields(string(data))
		if len(f) < 3 {
			continue
		}
		ns, _ := strconv.ParseInt(f[0], 10, 64)
		n, _ := strconv.ParseInt(f[2], 10, 64)
		cpu += time.Duration(ns)
		runs += n
	}
	return cpu, runs
}
