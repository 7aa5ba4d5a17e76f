package benchutil

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// burnerEnv makes the test binary, run as a child, the process
// TestProcCPUCountsEndedThreads measures.
const burnerEnv = "BENCHUTIL_TEST_BURNER"

func TestMain(m *testing.M) {
	if os.Getenv(burnerEnv) != "" {
		burnInAThreadThatEnds()
		return
	}
	os.Exit(m.Run())
}

// burnInAThreadThatEnds spends 200 ms of CPU in a goroutine locked to its
// thread that returns without unlocking, so that the runtime ends the
// thread, says so on stdout and waits for stdin to close.
func burnInAThreadThatEnds() {
	// Hold the main thread, which the runtime never ends (a locked
	// goroutine that exits there wedges it instead), so that the burner
	// runs on another.
	runtime.LockOSThread()
	self := os.Getpid()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		x := 0
		for {
			cpu, err := ProcCPU(self)
			if err != nil || cpu >= 200*time.Millisecond {
				break
			}
			for i := 0; i < 1e5; i++ {
				x += i
			}
		}
		_ = x
	}()
	<-done
	os.Stdout.WriteString("burnt\n")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
}

// TestProcCPUCountsEndedThreads reads the CPU of a child whose busy thread
// has ended: the process CPU clock still has that thread's 200 ms, where
// the child's live threads' schedstat (what the bench summed before) has
// lost it.
func TestProcCPUCountsEndedThreads(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), burnerEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "burnt\n" {
		t.Fatalf("the child said %q (%v), want burnt", line, err)
	}
	// The runtime ends the thread after its goroutine returned: wait
	// until the live threads' run time shows it gone.
	var cpu, live time.Duration
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if cpu, err = ProcCPU(pid); err != nil {
			t.Fatal(err)
		}
		live = liveThreadsCPU(t, pid)
		if live < cpu-150*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child's live threads still ran %s of its %s after 20 s: its busy thread did not end", live, cpu)
		}
	}
	if cpu < 200*time.Millisecond {
		t.Errorf("ProcCPU read %s after the child burnt 200 ms", cpu)
	}
	if ticks := CPU(pid); cpu < ticks-30*time.Millisecond {
		t.Errorf("ProcCPU read %s where /proc/PID/stat reads %s: want it within its 10 ms ticks", cpu, ticks)
	}
	if _, err := Wakeups(pid); err != nil {
		t.Errorf("Wakeups of a live child: %v", err)
	}
	stdin.Close()
	_ = cmd.Wait()
	if got, err := ProcCPU(pid); err == nil {
		t.Errorf("ProcCPU of a reaped child read %s and no error", got)
	}
	if _, err := Wakeups(pid); err == nil {
		t.Error("Wakeups of a reaped child: no error")
	}
}

// liveThreadsCPU sums the run time of a process's live threads from
// /proc/PID/task/*/schedstat.
func liveThreadsCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var sum time.Duration
	for _, task := range tasks {
		var ns int64
		f, err := os.Open(dir + "/" + task.Name() + "/schedstat")
		if err != nil {
			continue
		}
		_, _ = fmt.Fscan(f, &ns)
		f.Close()
		sum += time.Duration(ns)
	}
	return sum
}

func TestProcCPURefusesNoProcess(t *testing.T) {
	if _, err := ProcCPU(0); err == nil {
		t.Error("ProcCPU(0): no error")
	}
	if _, err := Wakeups(0); err == nil {
		t.Error("Wakeups(0): no error")
	}
}

// TestProcCPUAgreesWithTicks burns this process's CPU until the kernel's
// tick count says 50 ms more were spent and checks that the nanosecond
// reading saw about as much, and more wake-ups.
func TestProcCPUAgreesWithTicks(t *testing.T) {
	pid := os.Getpid()
	ticks0 := CPU(pid)
	ns0, err := ProcCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	runs0, err := Wakeups(pid)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	x := 0
	for CPU(pid)-ticks0 < 50*time.Millisecond {
		for i := 0; i < 1e5; i++ {
			x += i
		}
		if time.Now().After(deadline) {
			t.Fatal("50 ms of CPU not spent in a minute")
		}
		time.Sleep(time.Millisecond) // a wake-up at least
	}
	ticks := CPU(pid) - ticks0
	ns, _ := ProcCPU(pid)
	runs, _ := Wakeups(pid)
	if d := ns - ns0; d < ticks-30*time.Millisecond || d > ticks+30*time.Millisecond {
		t.Errorf("ProcCPU grew %s while the ticks grew %s: want within 30 ms of each other", d, ticks)
	}
	if runs <= runs0 {
		t.Errorf("threads put on a CPU %d, then %d: want more", runs0, runs)
	}
	_ = x
}

func TestPct(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 8; i++ {
		d = append(d, time.Duration(i))
	}
	for _, c := range []struct{ p, want int }{{25, 2}, {50, 4}, {75, 6}, {99, 8}, {100, 8}, {0, 1}} {
		if got := Pct(d, c.p); got != time.Duration(c.want) {
			t.Errorf("Pct(1..8, %d) = %d, want %d (nearest rank)", c.p, got, c.want)
		}
	}
	if got := Pct([]time.Duration{5}, 99); got != 5 {
		t.Errorf("Pct of one value = %d, want it", got)
	}
}
