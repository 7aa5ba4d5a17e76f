// Package once records, for every bridge replica at once, that a one-time
// thing happened (a sealed allow-once state was used, a session ended),
// through the
// Kubernetes API's create-if-absent: the first replica to create the
// record wins, every later attempt (on any replica) finds it there. The
// records are Leases in the bridge's own namespace, named after what they
// record, and deleted by a sweep once what they record has expired.
//
// A Lease rather than a ConfigMap or a kind of our own: it is the API's
// small object for coordination (no data, no CRD to install), nothing
// else in the namespace reads Leases of this label, and the bridge's
// rights on them (create, list, delete) say what it does with them.
package once

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/internal/every"
)

// LabelKind labels each record with what it records.
const LabelKind = "mcp-operator.dev/once"

// Every record is also labelled as the operator's own, as the servers'
// activity Leases are: where the bridge serves its own namespace, its cache
// selects both by this label.
const (
	managedByLabel = "app.kubernetes.io/managed-by"
	managedBy      = "mcp-operator"
)

// Ledger records one-time uses as Leases in Namespace.
type Ledger struct {
	Client    client.Client
	Namespace string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (l *Ledger) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// Name is the record's name for key of kind: the key is hashed, so no
// secret (a sealed value's MAC) or length limit reaches the API.
func Name(kind string, key []byte) string {
	sum := sha256.Sum256(key)
	return kind + "-" + hex.EncodeToString(sum[:20])
}

// ClaimTimeout bounds each Claim: a slow API server holds the request it
// guards no longer than this (and the request is refused).
const ClaimTimeout = 2 * time.Second

// SweepMargin is how long after its expiry a record is left before the
// sweep deletes it: the replicas' clocks may differ by this much without
// one freeing a state another still counts as used.
const SweepMargin = 2 * time.Minute

// sweepPage is how many records one List of the sweep reads.
const sweepPage = 500

// Claim records key of kind as used until until; false when it was used
// already, by any replica. An error (the API server unreachable, the
// bridge without the right) is not a claim: the caller refuses what it
// guards, rather than risk a second use.
func (l *Ledger) Claim(ctx context.Context, kind string, key []byte, until time.Time) (bool, error) {
	now := l.now()
	// The API server refuses a duration under 1 s: a use that is over
	// already (until <= now) is recorded for a second.
	seconds := int32(max(1, min(math.MaxInt32, math.Ceil(until.Sub(now).Seconds()))))
	ctx, cancel := context.WithTimeout(ctx, ClaimTimeout)
	defer cancel()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: l.Namespace, Name: Name(kind, key), Labels: map[string]string{LabelKind: kind, managedByLabel: managedBy}},
		Spec: coordinationv1.LeaseSpec{
			AcquireTime:          &metav1.MicroTime{Time: now},
			LeaseDurationSeconds: &seconds,
		},
	}
	switch err := l.Client.Create(ctx, lease); {
	case err == nil:
		return true, nil
	case apierrors.IsAlreadyExists(err):
		return false, nil
	default:
		return false, fmt.Errorf("while recording a one-time use (%s) with the API server: %w", kind, err)
	}
}

// Sweep deletes the records whose time has been over for SweepMargin, and
// returns how many.
// Every replica sweeps; a record another replica deleted first is no
// error.
func (l *Ledger) Sweep(ctx context.Context) (int, error) {
	now, n, next := l.now().Add(-SweepMargin), 0, ""
	for {
		var list coordinationv1.LeaseList
		if err := l.Client.List(ctx, &list, client.InNamespace(l.Namespace), client.HasLabels{LabelKind},
			client.Limit(sweepPage), client.Continue(next)); err != nil {
			return n, fmt.Errorf("while listing one-time records: %w", err)
		}
		for i := range list.Items {
			lease := &list.Items[i]
			if !expired(lease, now) {
				continue
			}
			if err := l.Client.Delete(ctx, lease, client.Preconditions{UID: &lease.UID}); err != nil && !apierrors.IsNotFound(err) {
				return n, fmt.Errorf("while deleting one-time record %s: %w", lease.Name, err)
			}
			n++
		}
		if next = list.Continue; next == "" {
			return n, nil
		}
	}
}

// expired says whether the lease's use is over; one without its times
// (not written by a Ledger) is left alone.
func expired(lease *coordinationv1.Lease, now time.Time) bool {
	s := lease.Spec
	if s.AcquireTime == nil || s.LeaseDurationSeconds == nil {
		return false
	}
	return now.After(s.AcquireTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second))
}

// Run sweeps every interval until ctx ends, telling failed of each failure.
func (l *Ledger) Run(ctx context.Context, interval time.Duration, failed func(error)) {
	every.Run(ctx, interval, func() {
		if _, err := l.Sweep(ctx); err != nil && ctx.Err() == nil {
			failed(err)
		}
	})
}

// KindSessionEnd names the records of sessions ended by DELETE.
const KindSessionEnd = "session-end"

// Ends shares the ends of sessions (DELETE) between the replicas
// (session.Ends): End creates a record, and Ended reads the set of records
// a watch keeps on every replica (Watch), so a request pays a lookup, not
// a round trip; another replica hears of an end as fast as its watch
// (milliseconds), this one at once.
type Ends struct {
	Ledger *Ledger
	// Failed is told when an end could not be recorded (the other replicas
	// then go on accepting the session until its maximum age).
	Failed func(error)
	// Heard, when set, is told the name (Key) of each end the watch
	// delivers, so that a replica holding the session ends it at once.
	// Set before Watch.
	Heard func(name string)
	ended sync.Map // record names
}

// Key is the name session id's end is recorded by.
func (e *Ends) Key(id string) string { return Name(KindSessionEnd, []byte(id)) }

// End records that session id ended, until it is too old anyway. This
// replica knows at once; the record for the others is written in the
// background (within ClaimTimeout), so that the DELETE is not held by a
// slow API server.
func (e *Ends) End(id string, until time.Time) {
	e.ended.Store(Name(KindSessionEnd, []byte(id)), struct{}{})
	go func() {
		if _, err := e.Ledger.Claim(context.Background(), KindSessionEnd, []byte(id), until); err != nil && e.Failed != nil {
			e.Failed(err)
		}
	}()
}

// Ended says whether any replica recorded session id's end.
func (e *Ends) Ended(id string) bool {
	_, ok := e.ended.Load(Name(KindSessionEnd, []byte(id)))
	return ok
}

// Informer is what Watch needs of an informer (client-go's or
// controller-runtime's).
type Informer interface {
	AddEventHandler(toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error)
}

// Watch keeps the set of ended sessions from inf, an informer of the
// records (Leases labelled KindSessionEnd in the Ledger's namespace).
func (e *Ends) Watch(inf Informer) error {
	name := func(obj any) (string, bool) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		l, ok := obj.(*coordinationv1.Lease)
		if !ok || l.Labels[LabelKind] != KindSessionEnd {
			return "", false
		}
		return l.Name, true
	}
	_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := name(obj); ok {
				e.ended.Store(n, struct{}{})
				if e.Heard != nil {
					e.Heard(n)
				}
			}
		},
		// Deleted by the sweep once the session is too old anyway.
		DeleteFunc: func(obj any) {
			if n, ok := name(obj); ok {
				e.ended.Delete(n)
			}
		},
	})
	return err
}
