package streamhttp

import (
	"io"
	"sync"
	"time"
)

// drainWatch bounds the drains of a pool's streams (finishStream) with one
// timer for the pool instead of one per drain: each drain registers its
// body, and the timer, armed at a drain's start when it is not and again
// when it fires with drains still waiting, closes the bodies of those that
// waited drainWait. On sequential calls whose stream ends in a
// packet after the response (a quarter of the everything-server's calls
// through the bridge) a timer per drain was a timer put in and taken out of
// the runtime's heap per call, and sometimes a thread woken to watch it
// (make bench-bridge); while calls come one at a time the pool's timer is set about
// once per drainWait (once more for each drain still waiting when it fires).
type drainWatch struct {
	mu      sync.Mutex
	timer   *time.Timer // made at the first drain
	armed   bool
	lastID  uint64
	waiting []waitingDrain
}

type waitingDrain struct {
	id    uint64
	until time.Time
	body  io.Closer
}

// start registers a drain of body, which the watch closes if the drain is
// not done by drainWait from now; the id is done's.
func (w *drainWatch) start(body io.Closer) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lastID++
	w.waiting = append(w.waiting, waitingDrain{id: w.lastID, until: time.Now().Add(drainWait), body: body})
	if !w.armed {
		w.armed = true
		if w.timer == nil {
			w.timer = time.AfterFunc(drainWait, w.expire)
		} else {
			w.timer.Reset(drainWait)
		}
	}
	return w.lastID
}

// done ends the drain id; false when the watch closed its body first (the
// drain outlasted drainWait).
func (w *drainWatch) done(id uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, d := range w.waiting {
		if d.id == id {
			last := len(w.waiting) - 1
			w.waiting[i] = w.waiting[last]
			w.waiting[last] = waitingDrain{} // the body is not kept alive
			w.waiting = w.waiting[:last]
			return true
		}
	}
	return false
}

// expire closes the bodies of the drains past their time (outside the
// lock: a body's Close waits for its connection's reader) and arms the
// timer again for the next one, if any waits.
func (w *drainWatch) expire() {
	w.mu.Lock()
	now := time.Now()
	var late []io.Closer
	var next time.Time
	kept := w.waiting[:0]
	for _, d := range w.waiting {
		switch {
		case !now.Before(d.until):
			late = append(late, d.body)
		default:
			if next.IsZero() || d.until.Before(next) {
				next = d.until
			}
			kept = append(kept, d)
		}
	}
	clear(w.waiting[len(kept):])
	w.waiting = kept
	if len(kept) > 0 {
		w.timer.Reset(next.Sub(now))
	} else {
		w.armed = false
	}
	w.mu.Unlock()
	for _, body := range late {
		_ = body.Close()
	}
}
