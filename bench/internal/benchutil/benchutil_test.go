package benchutil

import (
	"os"
	"testing"
	"time"
)

// TestThreadCPU burns this process's CPU until the kernel's tick count
// says 50 ms more were spent and checks that the nanosecond reading saw
// about as much: both come from the same accounting.
func TestThreadCPU(t *testing.T) {
	pid := os.Getpid()
	if ThreadCPU(0) != 0 {
		t.Error("ThreadCPU(0) is not 0")
	}
	ticks0 := CPU(pid)
	ns0, runs0 := ThreadSched(pid)
	deadline := time.Now().Add(time.Minute)
	x := 0
	for CPU(pid)-ticks0 < 50*time.Millisecond {
		for i := 0; i < 1e5; i++ {
			x += i
		}
		if time.Now().After(deadline) {
			t.Fatal("50 ms of CPU not spent in a minute")
		}
	}
	ticks := CPU(pid) - ticks0
	ns, runs := ThreadSched(pid)
	if d := ns - ns0; d < ticks-30*time.Millisecond || d > ticks+30*time.Millisecond {
		t.Errorf("ThreadCPU grew %s while the ticks grew %s: want within 30 ms of each other", d, ticks)
	}
	if runs <= runs0 {
		t.Errorf("threads put on a CPU %d, then %d: want more", runs0, runs)
	}
	_ = x
}
