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

	"golang.org/x/sys/unix"
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
func RSS(pid int) int64 { return StatusBytes(pid, "VmRSS") }

// StatusBytes is a figure in kB of /proc/<pid>/status (VmRSS, RssAnon, ...),
// in bytes; 0 when pid is 0 or it cannot be read.
func StatusBytes(pid int, field string) int64 {
	if pid == 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
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

// Pct is the p-th percentile of d, by nearest rank.
func Pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[Rank(len(s), p)]
}

// Rank is the index of the p-th percentile in n sorted values by the
// nearest-rank method: the smallest value with at least p % of the values
// at or below it, ceil(n*p/100)-1 (n*p/100 picks one rank too high: the
// median of 1..8 would be 5).
func Rank(n, p int) int {
	return min(n-1, max(0, (n*p+99)/100-1))
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

// ProcCPU is a process's CPU time to the nanosecond, its ended threads'
// included: the kernel's CPU clock of the process (clock_gettime on
// (^pid)<<3 | CPUCLOCK_SCHED, which needs no privilege), where
// /proc/PID/stat counts in clock ticks (10 ms), too coarse for the CPU of
// a few hundred calls, and a sum over /proc/PID/task loses a thread that
// ends between two readings (its whole lifetime's CPU). A pid that reads
// nothing (0, a process gone) is an error, never 0: a reading of 0 would
// make any comparison of two processes' CPU pass.
func ProcCPU(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("no process to read the CPU of (pid %d)", pid)
	}
	const cpuclockSched = 2
	var ts unix.Timespec
	if err := unix.ClockGettime(int32((^pid)<<3|cpuclockSched), &ts); err != nil {
		return 0, fmt.Errorf("while reading the CPU clock of process %d: %w", pid, err)
	}
	return time.Duration(ts.Nano()), nil
}

// Sched is ProcCPU and Wakeups of one process.
func Sched(pid int) (time.Duration, int64, error) {
	cpu, err := ProcCPU(pid)
	if err != nil {
		return 0, 0, err
	}
	runs, err := Wakeups(pid)
	return cpu, runs, err
}

// Wakeups is how many times a process's threads were put on a CPU (each
// wake-up of a sleeping thread is one), summed over its live threads'
// /proc/PID/task/*/schedstat: a thread that ended is not counted, so it
// is for windows in which the process keeps its threads (Go's runtime
// does). A process without a readable thread is an error.
func Wakeups(pid int) (int64, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("no process to read the wake-ups of (pid %d)", pid)
	}
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("while reading the threads of process %d: %w", pid, err)
	}
	var runs int64
	read := 0
	for _, t := range tasks {
		data, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread ended meanwhile
		}
		f := strings.Fields(string(data))
		if len(f) < 3 {
			continue
		}
		n, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			continue
		}
		runs += n
		read++
	}
	if read == 0 {
		return 0, fmt.Errorf("no schedstat readable for any thread of process %d (a kernel without CONFIG_SCHEDSTATS?)", pid)
	}
	return runs, nil
}
