package streamhttp

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// closeCounter is a body whose Close is counted.
type closeCounter struct {
	closes atomic.Int32
	closed chan struct{}
	once   sync.Once
}

func newCloseCounter() *closeCounter { return &closeCounter{closed: make(chan struct{})} }

func (c *closeCounter) Close() error {
	c.closes.Add(1)
	c.once.Do(func() { close(c.closed) })
	return nil
}

// The pool's one timer closes every drain that outlasts drainWait, and only
// those: a drain done in time is never closed, however the drains of many
// calls overlap, and the timer is set again for drains that start after it
// ran out.
func TestDrainWatchClosesOnlyLateDrains(t *testing.T) {
	var w drainWatch
	for round := range 2 { // the second round finds the timer run out and sets it again
		const n = 40
		bodies := make([]*closeCounter, n)
		inTime := make([]bool, n)
		var wg sync.WaitGroup
		for i := range n {
			bodies[i] = newCloseCounter()
			wg.Go(func() {
				id := w.start(bodies[i])
				if i%2 == 0 {
					inTime[i] = w.done(id)
				}
			})
		}
		wg.Wait()
		for i, b := range bodies {
			if i%2 == 1 {
				select {
				case <-b.closed:
				case <-time.After(10 * time.Second):
					t.Fatalf("round %d: drain %d was never done and its body never closed", round, i)
				}
			}
		}
		// Every late drain's body is closed: the watch has let go of all.
		w.mu.Lock()
		left := len(w.waiting)
		w.mu.Unlock()
		if left != 0 {
			t.Fatalf("round %d: %d drains still watched", round, left)
		}
		for i, b := range bodies {
			switch {
			case i%2 == 0 && inTime[i] && b.closes.Load() != 0:
				t.Fatalf("round %d: drain %d was done in time, but its body was closed", round, i)
			case b.closes.Load() > 1:
				t.Fatalf("round %d: drain %d's body was closed %d times", round, i, b.closes.Load())
			}
		}
	}
}
