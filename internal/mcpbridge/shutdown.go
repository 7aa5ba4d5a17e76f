package mcpbridge

import (
	"context"
	"net/http"
	"time"
)

// DefaultShutdownDelay is how long a stopping replica goes on serving.
const DefaultShutdownDelay = 5 * time.Second

// Shutdown stops srv the way a pod behind a Service must stop. A deleted pod
// leaves the Service's endpoints when it gets SIGTERM, but kube-proxy (or a
// load balancer) takes a moment to stop sending it new connections. So srv
// goes on serving for delay, with keep-alives off: each agent's next request
// opens a new connection, which lands on another replica once the Service
// has caught up, and no connection is left idle to be cut under a request.
// Only then does it stop accepting and wait, until ctx ends, for the
// requests in flight. Stopping at once made requests sent in the first
// second after a deletion hang on a pod that no longer answered (seen by
// test/e2e, replicas_test.go).
func Shutdown(ctx context.Context, srv *http.Server, delay time.Duration) error {
	srv.SetKeepAlivesEnabled(false) // also closes the connections idle now
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	return srv.Shutdown(ctx)
}
