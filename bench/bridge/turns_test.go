package main

import (
	"slices"
	"testing"
)

func TestTurnSizes(t *testing.T) {
	for _, c := range []struct {
		n, chunk int
		want     []int
	}{
		{2000, 250, []int{250, 250, 250, 250, 250, 250, 250, 250}},
		{600, 250, []int{250, 250, 100}}, // the remainder is a turn of its own
		{100, 250, []int{100}},           // fewer calls than a turn: those calls
		{1, 1, []int{1}},
	} {
		if got := turnSizes(c.n, c.chunk); !slices.Equal(got, c.want) {
			t.Errorf("turnSizes(%d, %d) = %v, want %v", c.n, c.chunk, got, c.want)
		}
	}
}

// TestOrderFollowers checks that over the passes every target follows
// more than one other, and that each pass has every target once.
func TestOrderFollowers(t *testing.T) {
	ts := []string{"a", "b", "c", "d"}
	follows := map[string]map[string]bool{}
	for pass := range 8 {
		o := order(ts, pass)
		if got := slices.Sorted(slices.Values(o)); !slices.Equal(got, ts) {
			t.Fatalf("pass %d: order %v is not every target once", pass, o)
		}
		for i := 1; i < len(o); i++ {
			if follows[o[i]] == nil {
				follows[o[i]] = map[string]bool{}
			}
			follows[o[i]][o[i-1]] = true
		}
	}
	for _, x := range ts {
		if len(follows[x]) < 2 {
			t.Errorf("%s follows only %v over 8 passes, want at least two others", x, follows[x])
		}
	}
	if o := order(ts, 1); !slices.Equal(o, []string{"d", "c", "b", "a"}) {
		t.Errorf("pass 1 = %v, want the first pass backwards", o)
	}
}
