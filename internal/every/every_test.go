package every

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// Run calls its chore on each tick, not at once, and returns when its
// context ends.
func TestRunTicksUntilItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	done := make(chan struct{})
	go func() {
		Run(ctx, 20*time.Millisecond, func() { calls.Add(1) })
		close(done)
	}()
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d calls before the first interval passed", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for calls.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls in 10 s at a 20 ms interval", calls.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
