package activity

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestInterval(t *testing.T) {
	for idle, want := range map[time.Duration]time.Duration{
		0:                time.Minute,
		10 * time.Second: 2500 * time.Millisecond,
		4 * time.Minute:  time.Minute,
		time.Hour:        time.Minute,
	} {
		if got := Interval(idle); got != want {
			t.Errorf("Interval(%s) = %s, want %s", idle, got, want)
		}
	}
}

// leaseStore is an informer's store as the Recorder sees it: the tests move
// renewTime as the API server would after a write (or not, to model an
// informer that lags).
type leaseStore struct {
	mu     sync.Mutex
	leases map[string]*coordinationv1.Lease
}

func (s *leaseStore) get(namespace, name string) (*coordinationv1.Lease, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[namespace+"/"+name]
	if !ok {
		return nil, false
	}
	return l.DeepCopy(), true
}

func (s *leaseStore) set(namespace, name string, renew time.Time, idleSeconds int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leases == nil {
		s.leases = map[string]*coordinationv1.Lease{}
	}
	l := &coordinationv1.Lease{}
	if !renew.IsZero() {
		l.Spec.RenewTime = &metav1.MicroTime{Time: renew}
	}
	if idleSeconds > 0 {
		l.Spec.LeaseDurationSeconds = &idleSeconds
	}
	s.leases[namespace+"/"+LeaseName(name)] = l
}

// fixture is a Recorder on a fake clock whose writes are counted and, when
// echo is set, shown back through the store as the informer would.
type fixture struct {
	r      *Recorder
	store  *leaseStore
	now    time.Time
	writes atomic.Int32
	fail   atomic.Bool
}

func newFixture(t *testing.T, echo bool) *fixture {
	f := &fixture{store: &leaseStore{}, now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	f.r = &Recorder{
		Leases: f.store.get, Identity: "bridge-0", Log: testr.New(t),
		Now: func() time.Time { return f.now },
		Patch: func(_ context.Context, namespace, name string, renew time.Time, holder string) error {
			if holder != "bridge-0" {
				t.Errorf("holderIdentity %q", holder)
			}
			if f.fail.Load() {
				return errors.New("the API server is away")
			}
			f.writes.Add(1)
			if echo {
				f.store.mu.Lock()
				f.store.leases[namespace+"/"+name].Spec.RenewTime = &metav1.MicroTime{Time: renew}
				f.store.mu.Unlock()
			}
			return nil
		},
	}
	return f
}

// touch is one activity; it waits for the write it may start.
func (f *fixture) touch(t *testing.T) {
	t.Helper()
	f.r.Touch("ns", "fs")
	f.r.Wait()
}

// TestTouchWritesAtMostOncePerInterval: a server busy for ten minutes, with
// a call every second, gets ten writes from this replica; one idle for ten
// minutes gets none; an informer that has not shown the replica's own write
// yet does not make it write again.
func TestTouchWritesAtMostOncePerInterval(t *testing.T) {
	f := newFixture(t, false) // the informer lags: only the replica's memory holds its writes
	f.store.set("ns", "fs", f.now.Add(-2*time.Minute), 0)
	for i := 0; i < 600; i++ {
		f.touch(t)
		f.now = f.now.Add(time.Second)
	}
	if got := f.writes.Load(); got != 10 {
		t.Fatalf("busy for 10 minutes: %d writes, want 10", got)
	}
	// After an idle spell, the first request is written at once (the last
	// renewal is long past), and the ones right after it are not.
	f.now = f.now.Add(10 * time.Minute)
	f.touch(t)
	if got := f.writes.Load(); got != 11 {
		t.Fatalf("the first request after an idle spell: %d writes, want 11", got)
	}
	for i := 0; i < 30; i++ {
		f.now = f.now.Add(time.Second)
		f.touch(t)
	}
	if got := f.writes.Load(); got != 11 {
		t.Fatalf("30 s of requests after it: %d writes, want none more", got)
	}
}

// TestTouchSharesTheRateWithOtherReplicas: a renewal another replica wrote
// (seen through the informer) puts this replica's next write an interval
// after it.
func TestTouchSharesTheRateWithOtherReplicas(t *testing.T) {
	f := newFixture(t, true)
	f.store.set("ns", "fs", f.now.Add(-30*time.Second), 0)
	f.touch(t)
	if f.writes.Load() != 0 {
		t.Fatal("wrote 30 s after another replica's renewal")
	}
	f.now = f.now.Add(30 * time.Second)
	f.touch(t)
	if f.writes.Load() != 1 {
		t.Fatal("did not write a minute after the last renewal")
	}
	// Another replica renews 40 s later; 30 s after that, nothing is due.
	f.now = f.now.Add(40 * time.Second)
	f.store.set("ns", "fs", f.now, 0)
	f.now = f.now.Add(30 * time.Second)
	f.touch(t)
	if f.writes.Load() != 1 {
		t.Fatal("wrote 30 s after another replica's renewal")
	}
}

// TestTouchFollowsAShortIdle: a server that sleeps after 20 s is renewed
// every 5 s while busy.
func TestTouchFollowsAShortIdle(t *testing.T) {
	f := newFixture(t, true)
	f.store.set("ns", "fs", f.now.Add(-time.Hour), 20)
	for i := 0; i < 20; i++ {
		f.touch(t)
		f.now = f.now.Add(time.Second)
	}
	if got := f.writes.Load(); got != 4 {
		t.Fatalf("20 s busy with idle 20 s: %d writes, want 4", got)
	}
}

// TestTouchWithoutLeaseWritesNothing: a server with no activity Lease never
// sleeps, and the bridge never creates one.
func TestTouchWithoutLeaseWritesNothing(t *testing.T) {
	f := newFixture(t, true)
	f.store.set("ns", "other", f.now.Add(-time.Hour), 0)
	f.touch(t)
	if f.writes.Load() != 0 {
		t.Fatal("wrote the Lease of a server that has none")
	}
}

// TestTouchRetriesAfterAFailedWrite: a write that failed is tried again at
// the next activity, not an interval later.
func TestTouchRetriesAfterAFailedWrite(t *testing.T) {
	f := newFixture(t, true)
	f.store.set("ns", "fs", f.now.Add(-time.Hour), 0)
	f.fail.Store(true)
	f.touch(t)
	f.fail.Store(false)
	f.now = f.now.Add(time.Second)
	f.touch(t)
	if f.writes.Load() != 1 {
		t.Fatalf("%d writes after a failed one, want 1", f.writes.Load())
	}
}

// TestWakeOncePerSleep: 20 callers waking one sleep write once; a Lease
// another replica renewed after the sleep began needs no write; the next
// sleep is woken again.
func TestWakeOncePerSleep(t *testing.T) {
	f := newFixture(t, false)
	since := f.now.Add(-time.Minute)
	f.store.set("ns", "fs", since.Add(-5*time.Minute), 0)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.r.Wake(context.Background(), "ns", "fs", since); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := f.writes.Load(); got != 1 {
		t.Fatalf("20 callers of one sleep: %d wake writes, want 1", got)
	}
	// Woken by another replica: renewTime after the second sleep's start.
	since2 := f.now.Add(time.Hour)
	f.store.set("ns", "fs", since2.Add(2*time.Second), 0)
	if err := f.r.Wake(context.Background(), "ns", "fs", since2); err != nil || f.writes.Load() != 1 {
		t.Fatalf("a sleep another replica woke was written again (%v, %d writes)", err, f.writes.Load())
	}
	since3 := f.now.Add(2 * time.Hour)
	if err := f.r.Wake(context.Background(), "ns", "fs", since3); err != nil || f.writes.Load() != 2 {
		t.Fatalf("the next sleep was not woken (%v, %d writes)", err, f.writes.Load())
	}
	// A failed wake write is an error, and the next caller tries again.
	f.fail.Store(true)
	since4 := f.now.Add(3 * time.Hour)
	if err := f.r.Wake(context.Background(), "ns", "fs", since4); err == nil {
		t.Fatal("a failed wake write was not an error")
	}
	f.fail.Store(false)
	if err := f.r.Wake(context.Background(), "ns", "fs", since4); err != nil || f.writes.Load() != 3 {
		t.Fatalf("the wake was not tried again (%v, %d writes)", err, f.writes.Load())
	}
	// A renewal within the second after a sleep's start (its time is whole
	// seconds) may be from before it: the wake is written.
	since5 := f.now.Add(5 * time.Hour)
	f.store.set("ns", "fs", since5.Add(500*time.Millisecond), 0)
	if err := f.r.Wake(context.Background(), "ns", "fs", since5); err != nil || f.writes.Load() != 4 {
		t.Fatalf("a renewal in the sleep's first second was taken for a wake (%v, %d writes)", err, f.writes.Load())
	}
}
