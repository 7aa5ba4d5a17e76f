package controller

import (
	"fmt"
	"time"
)

// A phase that cannot go on says why with one of these errors; the skeleton
// (Reconcile) turns it into the Ready condition, the requeue and the event.
// Any other error is transient: it is recorded in the Degraded condition
// (reason ReconcileError) and controller-runtime retries with backoff.

// waitingError: the server waits for something that happens by itself or
// that the controller watches (a pod starting, a probe answering). No event;
// the reconcile comes back after `after` (0: when a watched object changes).
type waitingError struct {
	reason, message string
	after           time.Duration
}

func (e *waitingError) Error() string { return fmt.Sprintf("waiting: %s: %s", e.reason, e.message) }

// stalledError: the server stays down until someone changes something (the
// spec, an image, a Secret, the cluster's capacity). A Warning event when the
// server enters the state; the reconcile comes back only when a watched
// object changes, or after recheck for what the controller does not watch
// (Secrets).
type stalledError struct {
	reason, message string
	recheck         time.Duration
}

func (e *stalledError) Error() string { return fmt.Sprintf("stalled: %s: %s", e.reason, e.message) }
