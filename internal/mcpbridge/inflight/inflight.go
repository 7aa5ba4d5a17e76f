// Package inflight bounds what a bridge replica holds at once: requests
// being served, request body bytes being read, token reviews waiting for
// the API server, calls parked for their agent's answer. Every such bound
// is a Limit, so they all take and give back the same way, and a request
// over one is refused at once (never queued: a queue is memory an attacker
// fills).
package inflight

import "sync"

// Limit is a bound on units in flight (requests, bytes), in total and,
// optionally, per key (a caller, a session). Safe for concurrent use.
type Limit struct {
	total, perKey int64

	mu   sync.Mutex
	used int64
	by   map[string]int64
}

// New is a limit of total units in flight, and of perKey units under one
// key (0: not bounded that way: a per-caller bound has no total of its own).
func New(total, perKey int64) *Limit {
	return &Limit{total: total, perKey: perKey, by: map[string]int64{}}
}

// Take takes n units under key; false, taking nothing, when that would go
// over the total or the key's bound. A Take of more than the whole bound
// never succeeds.
func (l *Limit) Take(key string, n int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if (l.total > 0 && l.used+n > l.total) || (l.perKey > 0 && l.by[key]+n > l.perKey) {
		return false
	}
	l.used += n
	if l.perKey > 0 {
		l.by[key] += n
	}
	return true
}

// Give gives back n units taken under key.
func (l *Limit) Give(key string, n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.used -= n
	if l.perKey > 0 {
		if l.by[key] -= n; l.by[key] <= 0 {
			delete(l.by, key)
		}
	}
}

// Used is the units in flight, in total and under key.
func (l *Limit) Used(key string) (total, underKey int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.used, l.by[key]
}
