package inflight

import (
	"sync"
	"testing"
)

func TestTotalAndPerKeyBounds(t *testing.T) {
	l := New(3, 2)
	first, second := l.Take("alice", 1), l.Take("alice", 1)
	if !first || !second {
		t.Fatal("alice could not take her two units")
	}
	if l.Take("alice", 1) {
		t.Fatal("alice took a third unit past her bound of 2")
	}
	if !l.Take("bob", 1) {
		t.Fatal("bob could not take the last unit")
	}
	if l.Take("carol", 1) {
		t.Fatal("carol took a unit past the total of 3")
	}
	l.Give("alice", 1)
	if total, alice := l.Used("alice"); total != 2 || alice != 1 {
		t.Fatalf("after a give: total %d, alice %d; want 2 and 1", total, alice)
	}
	if !l.Take("carol", 1) {
		t.Fatal("carol could not take the unit alice gave back")
	}
}

func TestWeightedTakes(t *testing.T) {
	l := New(100, 0)
	if !l.Take("", 60) {
		t.Fatal("60 of 100 bytes refused")
	}
	if l.Take("", 41) {
		t.Fatal("41 more bytes taken with 40 left")
	}
	if !l.Take("", 40) {
		t.Fatal("the last 40 bytes refused")
	}
	l.Give("", 60)
	l.Give("", 40)
	if total, _ := l.Used(""); total != 0 {
		t.Fatalf("%d units in use after everything was given back", total)
	}
	if l.Take("", 101) {
		t.Fatal("a take larger than the whole total succeeded")
	}
}

func TestPerKeyOnly(t *testing.T) {
	l := New(0, 1)
	for _, k := range []string{"a", "b", "c", "d"} {
		if !l.Take(k, 1) {
			t.Fatalf("%s refused with no total bound", k)
		}
	}
	if l.Take("a", 1) {
		t.Fatal("a took past its bound of 1")
	}
}

func TestKeysAreForgottenWhenEmpty(t *testing.T) {
	l := New(10, 5)
	for _, k := range []string{"a", "b", "c"} {
		l.Take(k, 2)
		l.Give(k, 2)
	}
	if len(l.by) != 0 {
		t.Fatalf("%d keys kept with nothing in flight: the map would grow with every caller", len(l.by))
	}
}

// TestConcurrentTakesNeverExceedTheTotal: many takers at once never hold
// more than the total together.
func TestConcurrentTakesNeverExceedTheTotal(t *testing.T) {
	l := New(8, 0)
	var mu sync.Mutex
	held, most := int64(0), int64(0)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if !l.Take("", 1) {
					continue
				}
				mu.Lock()
				held++
				most = max(most, held)
				mu.Unlock()
				mu.Lock()
				held--
				mu.Unlock()
				l.Give("", 1)
			}
		}()
	}
	wg.Wait()
	if most > 8 {
		t.Fatalf("%d units held at once, over the total of 8", most)
	}
	if total, _ := l.Used(""); total != 0 {
		t.Fatalf("%d units in use at the end", total)
	}
}
