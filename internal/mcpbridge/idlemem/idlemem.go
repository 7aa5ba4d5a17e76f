// Package idlemem gives the heap's free pages back to the system once the
// bridge has been idle for a while. The Go runtime keeps freed heap pages
// for reuse: its background scavenger returns only what lies beyond about
// 10 % over the heap in use at the last collection, so an idle bridge goes
// on holding the garbage of its last calls (and of its start), about 2 MB
// of its RSS, for good. Between conversations those pages are better given
// back: one collection per idle period, never on a busy bridge's hot path.
package idlemem

import (
	"context"
	"net/http"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// DefaultQuiet is how often the agents' port is checked for requests: the
// heap's free pages are released after a whole period without one, so 10
// to 20 s after the last. Shorter would cost a collection in every pause of
// a bridge with sparse traffic; longer keeps the garbage for longer.
const DefaultQuiet = 10 * time.Second

// Releaser counts the requests of a handler and releases the heap's free
// pages after a quiet period that follows activity. The start's garbage is
// released by Now, when the bridge is ready.
type Releaser struct {
	// Release gives the memory back (debug.FreeOSMemory when nil).
	Release  func()
	requests atomic.Uint64
	// posts is the number of POSTs in flight: a call that outlasts a quiet
	// period (a long tool, one parked for approval) keeps the bridge busy.
	// GETs are not counted: an agent's listen stream stays open while the
	// bridge is idle.
	posts atomic.Int64
	seen  uint64
	dirty bool
}

// Wrap counts h's requests as activity.
func (r *Releaser) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		if req.Method == http.MethodPost {
			r.posts.Add(1)
			defer r.posts.Add(-1)
		}
		h.ServeHTTP(w, req)
	})
}

// Streaming counts a POST in flight that now only streams (a 2026-07-28
// subscriptions/listen kept open for updates) as idle: it may stay open
// for days. What it returns counts it again; call it before the request
// returns. A nil Releaser does nothing.
func (r *Releaser) Streaming() (busyAgain func()) {
	if r == nil {
		return func() {}
	}
	r.posts.Add(-1)
	return func() { r.posts.Add(1) }
}

// Run releases once after each quiet period of DefaultQuiet until ctx ends.
func (r *Releaser) Run(ctx context.Context) {
	t := time.NewTicker(DefaultQuiet)
	defer t.Stop()
	r.Every(ctx, t.C)
}

// Every checks at each tick whether the period since the previous tick was
// quiet, and releases if there was activity before it.
func (r *Releaser) Every(ctx context.Context, ticks <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
			r.tick()
		}
	}
}

func (r *Releaser) tick() {
	if n := r.requests.Load(); n != r.seen || r.posts.Load() > 0 {
		r.seen, r.dirty = n, true
		return
	}
	if !r.dirty {
		return
	}
	r.dirty = false
	r.release()
}

// Now releases at once. The bridge calls it when it is ready: its start
// (the informers' first lists, the schemes) leaves garbage that no call
// reuses soon, and the process is idle until its first agent.
func (r *Releaser) Now() { r.release() }

func (r *Releaser) release() {
	if r.Release != nil {
		r.Release()
		return
	}
	debug.FreeOSMemory()
}
