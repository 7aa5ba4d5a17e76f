// Package apiretry tells whether a failed request to the Kubernetes API is
// worth sending again, and when: the API server away (restarting, not
// reachable, overloaded) passes; a refusal of the request itself
// (forbidden, invalid, not found) does not.
package apiretry

import (
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
	if s, ok := apierrors.SuggestsClientDelay(err); ok && s > 0 {
		return time.Duration(s) * time.Second, true
	}
	switch {
	case err == nil:
		return 0, false
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), apierrors.IsInvalid(err),
		apierrors.IsBadRequest(err), apierrors.IsNotFound(err), apierrors.IsAlreadyExists(err),
		apierrors.IsMethodNotSupported(err), apierrors.IsNotAcceptable(err),
		apierrors.IsUnsupportedMediaType(err), apierrors.IsRequestEntityTooLargeError(err),
		apierrors.IsGone(err), apierrors.IsConflict(err):
		// The request itself was refused: sent again, it is refused again.
		return 0, false
	}
	// Not reached, no answer in time, or a 5xx/429: the API server is away
	// or busy for now.
	return Wait, true
}
