package controller

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Servers reconciled at the same instant (a burst of creates, a controller
// start) have their next probes spread evenly over the interval, none sooner
// than half an interval.
func TestProbesOfServersReconciledTogetherAreSpreadOverTheInterval(t *testing.T) {
	const servers, buckets = 1000, 10
	d := 5 * time.Minute
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	var count [buckets]int
	for i := range servers {
		next := nextProbe(d, types.UID(fmt.Sprintf("4f1c2a7e-0000-4000-8000-%012d", i)), now)
		if next < d/2 || next >= d+d/2 {
			t.Fatalf("next probe in %v, want within [%v, %v)", next, d/2, d+d/2)
		}
		count[int((next-d/2)*buckets/d)]++
	}
	// Evenly: each tenth of the interval holds about a tenth of the probes
	// (a jitter of ±10% would put them all in two or three).
	for b, n := range count {
		if n < servers/buckets*6/10 || n > servers/buckets*14/10 {
			t.Errorf("tenth %d of the interval holds %d of %d probes: %v", b, n, servers, count)
		}
	}
}

// A server keeps its phase: probed a little late, its next probe comes back
// to the same instant of the interval instead of drifting.
func TestAServerKeepsItsProbePhase(t *testing.T) {
	d := 30 * time.Second
	uid := types.UID("9b7d1f52-6c1e-4c4e-9d7a-1e2f3a4b5c6d")
	at := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC).Add(nextProbe(d, uid, time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)))
	for i := range 5 {
		late := time.Duration(i*7) * time.Millisecond
		next := nextProbe(d, uid, at.Add(late))
		if next != d-late {
			t.Fatalf("probed %v late: next in %v, want %v", late, next, d-late)
		}
		at = at.Add(late).Add(next)
	}
	if got := nextProbe(0, uid, at); got < 150*time.Second || got >= 450*time.Second {
		t.Errorf("with no interval set: next in %v, want the 5m default", got)
	}
}
