package main

import (
	"context"
	"net/http"
	"slices"
	"sync/atomic"
	"time"
)

// idleWatch tells when a server has been unused for a while: no request in
// flight (an open page's live stream counts as one) and none started or
// ended for the quiet time.
type idleWatch struct {
	inFlight atomic.Int64
	last     atomic.Int64 // unix nanoseconds of the last request's start or end
}

func newIdleWatch() *idleWatch {
	w := &idleWatch{}
	w.last.Store(time.Now().UnixNano())
	return w
}

// wrap counts h's requests, except those for the paths named: the
// kubelet's probes, which come every few seconds whether anyone uses the
// server or not.
func (w *idleWatch) wrap(h http.Handler, notUse ...string) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if slices.Contains(notUse, r.URL.Path) {
			h.ServeHTTP(rw, r)
			return
		}
		w.inFlight.Add(1)
		w.last.Store(time.Now().UnixNano())
		defer func() {
			w.last.Store(time.Now().UnixNano())
			w.inFlight.Add(-1)
		}()
		h.ServeHTTP(rw, r)
	})
}

// run calls idle once each time the server falls quiet for quiet after
// being used (or after its start), until ctx ends. It looks every quarter
// of quiet, so idle comes between quiet and 1.25 quiet after the last
// request.
func (w *idleWatch) run(ctx context.Context, quiet time.Duration, idle func()) {
	tick := time.NewTicker(quiet / 4)
	defer tick.Stop()
	var handled int64 // the last use idle was called for
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			last := w.last.Load()
			if w.inFlight.Load() == 0 && last != handled && now.UnixNano()-last >= int64(quiet) {
				handled = last
				idle()
			}
		}
	}
}
