// Package apiretry tells whether a failed request to the Kubernetes API is
// worth sending again, and when: the API server away (restarting, not
// reachable, overloaded) passes; anything else does not: a refusal of the
// request itself (forbidden, invalid, not found), and a failure on this
// side (a kind the API server does not serve, a type not registered, a
// request cancelled), which fail the same when sent again.
package apiretry

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Wait is the hint where the API server says none: long enough for a
// restarting API server (a few seconds), short enough that an agent is not
// held back much longer than it is away.
const Wait = 5 * time.Second

// After says whether err, a failed API request, may succeed if sent again,
// and after how long (the API server's own Retry-After where it gave one).
func After(err error) (time.Duration, bool) {
	if !Transient(err) {
		return 0, false
	}
	if s, ok := apierrors.SuggestsClientDelay(err); ok && s > 0 {
		return time.Duration(s) * time.Second, true
	}
	return Wait, true
}

// Transient says whether err shows the API server away or busy for now:
// it answered that it is (a timeout, 429, 503, 500, or another status it
// did not expect to give), it was not reached, or it did not answer, in
// full or in time.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	switch {
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err):
		return true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}
