// Package activity tells the controller that a server is in use, and asks
// for a sleeping server, through the server's activity Lease
// (coordination.k8s.io/v1, named <server>-activity, created and owned by
// the controller). A replica writes spec.renewTime (and holderIdentity) with
// a merge patch, never a create, and decides whether to write from the
// Lease its informer holds, so deciding costs no API read: while a server is
// busy all replicas together write about once a minute; while it is idle,
// never.
package activity

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
)

// Labels the controller puts on an activity Lease; the bridge's informer
// selects on ServerLabel.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ServerLabel    = "mcp-operator.dev/server"
)

// LeaseName is the activity Lease of the server named server.
func LeaseName(server string) string { return server + "-activity" }

// MaxInterval is the longest time between two writes of a busy server's
// Lease; a server that sleeps after a shorter idle time gets a quarter of it.
const MaxInterval = time.Minute

// Interval is how often a busy server's Lease is renewed: min(1m, idle/4).
// idle is the Lease's spec.leaseDurationSeconds, which the controller sets
// to spec.workload.idle; zero when unset (then a minute).
func Interval(idle time.Duration) time.Duration {
	if idle > 0 && idle/4 < MaxInterval {
		return idle / 4
	}
	return MaxInterval
}

// Due reports whether activity seen at now must be written: the last
// renewal known (the Lease's, or this replica's own write its informer has
// not shown yet) is at least one interval old.
func Due(lastRenewal, now time.Time, interval time.Duration) bool {
	return now.Sub(lastRenewal) >= interval
}

// Leases reads activity Leases from an informer's store; ok is false when
// the server has none (it never sleeps: nothing is written).
type Leases func(namespace, name string) (*coordinationv1.Lease, bool)

// Patcher writes spec.renewTime and spec.holderIdentity of an existing
// Lease (a merge patch: a missing Lease is an error, never created).
type Patcher func(ctx context.Context, namespace, name string, renew time.Time, holder string) error

// Recorder writes activity and wakes. Safe for concurrent use.
type Recorder struct {
	Leases Leases
	Patch  Patcher
	// Identity is the holderIdentity written: the bridge pod's name.
	Identity string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	Log logr.Logger
	// Wrote, when set, is told of each write: "activity" or "wake".
	Wrote func(kind string)

	// writes are the background writes under way (Wait).
	writes sync.WaitGroup

	mu sync.Mutex
	// written is when this replica last wrote (or began writing) each
	// Lease, by namespace/name: its informer may not show it yet.
	written map[string]time.Time
	// woken is the sleep (its start) each server was last woken from;
	// waking is the wake being written, which other callers wait for.
	woken  map[string]time.Time
	waking map[string]chan struct{}
}

func (r *Recorder) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Touch records activity on a served server: its Lease's renewTime moves
// to now when the last renewal is an interval old. The write runs in the
// background (a call is not held for it); a failed one is logged and the
// next activity tries again.
func (r *Recorder) Touch(namespace, name string) {
	if r == nil || r.Leases == nil {
		return
	}
	lease, ok := r.Leases(namespace, LeaseName(name))
	if !ok {
		return
	}
	key := namespace + "/" + name
	now := r.now()
	interval := Interval(leaseIdle(lease))
	r.mu.Lock()
	last := r.written[key]
	if t := renewTime(lease); t.After(last) {
		last = t
	}
	if !Due(last, now, interval) {
		r.mu.Unlock()
		return
	}
	prev := r.written[key]
	r.mark(key, now)
	r.mu.Unlock()
	r.writes.Add(1)
	go func() {
		defer r.writes.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.write(ctx, namespace, name, now, "activity"); err != nil {
			r.Log.Info("the activity Lease was not renewed", "server", key, "error", err.Error())
			r.mu.Lock()
			if r.written[key].Equal(now) {
				r.written[key] = prev // let the next activity try again
			}
			r.mu.Unlock()
		}
	}()
}

// Wait returns once the activity writes under way have ended: a stopping
// replica's last activity is not lost to its exit.
func (r *Recorder) Wait() {
	if r != nil {
		r.writes.Wait()
	}
}

// Wake asks for a sleeping server: its Lease's renewTime becomes now, newer
// than since (when the server fell asleep), which the controller reads as a
// wake. Once per sleep: callers for the same sleep share one write, and a
// Lease another replica renewed after since needs none.
func (r *Recorder) Wake(ctx context.Context, namespace, name string, since time.Time) error {
	key := namespace + "/" + name
	for {
		r.mu.Lock()
		if t, ok := r.woken[key]; ok && t.Equal(since) {
			r.mu.Unlock()
			return nil
		}
		// since is read from a condition's time, whole seconds: a renewal
		// within the second after it may be from before the sleep, and is
		// not taken for a wake (one write too many is harmless, a wake
		// missed is not).
		if lease, ok := r.Leases(namespace, LeaseName(name)); ok && !renewTime(lease).Before(since.Add(time.Second)) {
			r.setWoken(key, since)
			r.mu.Unlock()
			return nil
		}
		if wait := r.waking[key]; wait != nil {
			r.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		done := make(chan struct{})
		if r.waking == nil {
			r.waking = map[string]chan struct{}{}
		}
		r.waking[key] = done
		now := r.now()
		r.mu.Unlock()

		err := r.write(ctx, namespace, name, now, "wake")
		r.mu.Lock()
		delete(r.waking, key)
		if err == nil {
			r.setWoken(key, since)
			r.mark(key, now)
		}
		r.mu.Unlock()
		close(done)
		if err != nil {
			return fmt.Errorf("while asking for server %s (its activity Lease): %w", key, err)
		}
		return nil
	}
}

func (r *Recorder) write(ctx context.Context, namespace, name string, at time.Time, kind string) error {
	if err := r.Patch(ctx, namespace, LeaseName(name), at, r.Identity); err != nil {
		return err
	}
	if r.Wrote != nil {
		r.Wrote(kind)
	}
	return nil
}

// mark and setWoken are called with r.mu held.
func (r *Recorder) mark(key string, at time.Time) {
	if r.written == nil {
		r.written = map[string]time.Time{}
	}
	r.written[key] = at
}

func (r *Recorder) setWoken(key string, since time.Time) {
	if r.woken == nil {
		r.woken = map[string]time.Time{}
	}
	r.woken[key] = since
}

func renewTime(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime != nil {
		return l.Spec.RenewTime.Time
	}
	return time.Time{}
}

func leaseIdle(l *coordinationv1.Lease) time.Duration {
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		return time.Duration(*d) * time.Second
	}
	return 0
}
