package signed

import (
	"crypto/sha256"
	"strings"
	"sync"
	"time"
)

// pruneEvery is how many uses pass between sweeps of expired entries.
const pruneEvery = 1024

// Spent remembers sealed values that were used, until they expire, so a
// value meant for one use is refused the second time. It keys on the MAC,
// that is on what was sealed and not on the string, so no other spelling
// of a used value passes (Open accepts one spelling only, and this holds
// even if it did not). The zero value is ready; it is safe for concurrent
// use. It is this replica's memory: another replica does not know what was
// spent here.
type Spent struct {
	mu   sync.Mutex
	used map[[sha256.Size]byte]time.Time
	uses int
}

// Use records sealed (a value Open accepted) as used until expires, and
// reports whether it was unused before. A string that is not a sealed value
// is never usable.
func (sp *Spent) Use(sealed string, expires, now time.Time) bool {
	mac, ok := Tag(sealed)
	if !ok {
		return false
	}
	key := [sha256.Size]byte(mac)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if _, used := sp.used[key]; used {
		return false
	}
	if sp.used == nil {
		sp.used = map[[sha256.Size]byte]time.Time{}
	}
	sp.used[key] = expires
	if sp.uses++; sp.uses%pruneEvery == 0 {
		for k, until := range sp.used {
			if now.After(until) {
				delete(sp.used, k)
			}
		}
	}
	return true
}

// Len is the number of values remembered.
func (sp *Spent) Len() int {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return len(sp.used)
}

// Tag is the MAC of a sealed value: what names it for single use, whatever
// its spelling. false for a string that is not a sealed value.
func Tag(sealed string) ([]byte, bool) {
	_, sig, ok := strings.Cut(sealed, ".")
	mac, decoded := decode(sig)
	if !ok || !decoded || len(mac) != sha256.Size {
		return nil, false
	}
	return mac, true
}

// Forget forgets that sealed was used: its use did not happen after all
// (it could not be recorded elsewhere).
func (sp *Spent) Forget(sealed string) {
	if mac, ok := Tag(sealed); ok {
		sp.mu.Lock()
		delete(sp.used, [sha256.Size]byte(mac))
		sp.mu.Unlock()
	}
}
