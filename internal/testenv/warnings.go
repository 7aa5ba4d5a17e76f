package testenv

import (
	"context"
	"sync"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Warnings collects the warnings the API server returns (the Warning
// headers client-go hands to a rest.WarningHandlerWithContext), as kubectl
// prints them after an apply.
type Warnings struct {
	mu   sync.Mutex
	seen []string
}

// HandleWarningHeaderWithContext records one warning.
func (w *Warnings) HandleWarningHeaderWithContext(_ context.Context, code int, _ string, message string) {
	if code != 299 || message == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, message)
}

// Take returns the warnings recorded since the last Take.
func (w *Warnings) Take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen
	w.seen = nil
	return out
}

// ClientWithWarnings is a client of cfg whose requests' warnings are
// recorded in the returned Warnings.
func ClientWithWarnings(cfg *rest.Config) (client.Client, *Warnings, error) {
	w := &Warnings{}
	c := rest.CopyConfig(cfg)
	c.WarningHandler = nil
	c.WarningHandlerWithContext = w
	cl, err := client.New(c, client.Options{Scheme: Scheme()})
	return cl, w, err
}
