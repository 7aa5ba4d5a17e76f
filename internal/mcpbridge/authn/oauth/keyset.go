package oauth

import (
	"context"
	"fmt"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// keySet is an issuer's signing keys (its JWKS), fetched when first needed
// and again when a token names a key not in it (the issuer rotated), or
// when the set is older than maxAge. A key that is not there is looked for
// at most once per minRefresh: a flood of tokens with made-up key ids costs
// one fetch per interval, not one each.
type keySet struct {
	fetch      func(context.Context) (jose.JSONWebKeySet, error)
	minRefresh time.Duration
	maxAge     time.Duration
	now        func() time.Time

	mu        sync.RWMutex
	keys      map[string]jose.JSONWebKey // by kid; "" when the set has one key without a kid
	fetchedAt time.Time                  // of the last fetch tried, successful or not
	loadedAt  time.Time                  // of the keys held
	// inFlight is closed when the fetch under way ends: requests that
	// need it wait for it instead of starting another.
	inFlight chan struct{}
	fetches  int // fetches tried (tests count them)
	// lastErr is why the last fetch failed (nil when it did not): until
	// the next may be tried, a key not held is the issuer's fault, not
	// the token's (503, not 401).
	lastErr error
}

// key returns the key kid names. An unknown kid fetches the set again if
// the last fetch is at least minRefresh old; otherwise it is refused from
// what is known.
func (s *keySet) key(ctx context.Context, kid string) (jose.JSONWebKey, bool, error) {
	now := s.now()
	s.mu.RLock()
	k, ok := s.keys[kid]
	stale := s.loadedAt.IsZero() || now.Sub(s.loadedAt) >= s.maxAge
	mayFetch := now.Sub(s.fetchedAt) >= s.minRefresh
	lastErr := s.lastErr
	s.mu.RUnlock()
	if ok && !stale {
		return k, true, nil
	}
	if !mayFetch {
		// An old set still verifies until it may be fetched again.
		if ok {
			return k, true, nil
		}
		return k, false, lastErr
	}
	err := s.refresh(ctx)
	s.mu.RLock()
	k, ok = s.keys[kid]
	s.mu.RUnlock()
	if ok {
		// A failed refresh keeps the keys held: an issuer briefly down
		// does not stop tokens signed with keys already known.
		return k, true, nil
	}
	return k, false, err
}

// has says whether kid is still in the set (a token verified earlier by a
// key the issuer has since removed is no longer accepted).
func (s *keySet) has(kid string) bool {
	s.mu.RLock()
	_, ok := s.keys[kid]
	s.mu.RUnlock()
	return ok
}

// refresh fetches the set once, shared by the callers that need it at the
// same moment, and never twice within minRefresh.
func (s *keySet) refresh(ctx context.Context) error {
	s.mu.Lock()
	if wait := s.inFlight; wait != nil {
		s.mu.Unlock()
		select {
		case <-wait:
			s.mu.RLock()
			defer s.mu.RUnlock()
			return s.lastErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.now().Sub(s.fetchedAt) < s.minRefresh {
		defer s.mu.Unlock()
		return s.lastErr // another request fetched a moment ago
	}
	done := make(chan struct{})
	s.inFlight, s.fetchedAt = done, s.now()
	s.fetches++
	s.mu.Unlock()

	// Not the request's context: one caller going away must not fail the
	// fetch the others wait for (the HTTP client's timeout bounds it).
	set, err := s.fetch(context.WithoutCancel(ctx))
	s.mu.Lock()
	defer func() {
		s.inFlight = nil
		s.mu.Unlock()
		close(done)
	}()
	if err != nil {
		s.lastErr = fmt.Errorf("while fetching the issuer's keys: %w", err)
		return s.lastErr
	}
	s.lastErr = nil
	keys := make(map[string]jose.JSONWebKey, len(set.Keys))
	for _, k := range set.Keys {
		// Keys for encryption, and private or symmetric keys (which a
		// JWKS must never publish), verify nothing.
		if k.Use == "enc" || !k.Valid() || !k.IsPublic() {
			continue
		}
		keys[k.KeyID] = k
	}
	s.keys, s.loadedAt = keys, s.now()
	return nil
}

// count is the number of fetches tried.
func (s *keySet) count() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.fetches
}
