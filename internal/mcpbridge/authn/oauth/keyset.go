package oauth

import (
	"context"
	"crypto"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
)

// errNoKey marks the refusal of a token naming a key the issuer does not
// publish, even just now: not remembered, as the issuer may publish it in
// a moment (a token signed with a key it rotated in before publishing).
var errNoKey = errors.New("no key")

// keySet is an issuer's signing keys (its JWKS), fetched when first needed
// and again when a token names a key not in it (the issuer rotated), or
// when the set is older than maxAge. A key that is not there is looked for
// at most once per minRefresh: a flood of tokens with made-up key ids costs
// one fetch per interval, not one each.
type keySet struct {
	fetch      func(context.Context) ([]jose.JSONWebKey, error)
	minRefresh time.Duration
	maxAge     time.Duration
	now        func() time.Time

	mu sync.RWMutex
	// named are the keys with a kid, by kid; unnamed the keys without one,
	// by thumbprint (RFC 7638): a token without a kid is tried with each.
	named     map[string]jose.JSONWebKey
	unnamed   map[string]jose.JSONWebKey
	fetchedAt time.Time // of the last fetch tried, successful or not
	loadedAt  time.Time // of the keys held
	// inFlight is closed when the fetch under way ends: requests that
	// need it wait for it instead of starting another.
	inFlight chan struct{}
	fetches  int // fetches tried (tests count them)
	// lastErr is why the last fetch failed (nil when it did not): until
	// the next may be tried, a key not held is the issuer's fault, not
	// the token's (503, not 401).
	lastErr error
}

// keyRef names the key that verified a token: its kid, or for a key
// without one its thumbprint.
type keyRef struct{ kid, thumbprint string }

// candidate is a key that may have signed a token, and how to find it
// again.
type candidate struct {
	key jose.JSONWebKey
	ref keyRef
}

// lookup returns the keys that may have signed a token naming kid ("": the
// keys without a kid). No key: the set is fetched again if the last fetch
// is at least minRefresh old; if it may not be yet, the answer is a
// TryLater (the issuer may have rotated a moment ago), never a refusal.
func (s *keySet) lookup(ctx context.Context, kid string) ([]candidate, error) {
	now := s.now()
	s.mu.RLock()
	found := s.held(kid)
	stale := s.loadedAt.IsZero() || now.Sub(s.loadedAt) >= s.maxAge
	wait := s.minRefresh - now.Sub(s.fetchedAt)
	lastErr := s.lastErr
	s.mu.RUnlock()
	if len(found) > 0 && (!stale || wait > 0) {
		// An old set still verifies until it may be fetched again.
		return found, nil
	}
	if wait > 0 {
		if lastErr != nil {
			return nil, lastErr
		}
		return nil, &authn.TryLater{After: wait, Reason: fmt.Sprintf("no key %q among the issuer's keys read %s ago; they are read again in %s", kid, now.Sub(s.fetchedAt).Round(time.Second), wait.Round(time.Second))}
	}
	err := s.refresh(ctx)
	s.mu.RLock()
	found = s.held(kid)
	s.mu.RUnlock()
	if len(found) > 0 {
		// A failed refresh keeps the keys held: an issuer briefly down
		// does not stop tokens signed with keys already known.
		return found, nil
	}
	if err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: %w %q among the issuer's keys", authn.ErrUnauthenticated, errNoKey, kid)
}

// held is the keys for kid; s.mu held.
func (s *keySet) held(kid string) []candidate {
	if kid != "" {
		if k, ok := s.named[kid]; ok {
			return []candidate{{k, keyRef{kid: kid}}}
		}
		return nil
	}
	var out []candidate
	for t, k := range s.unnamed {
		out = append(out, candidate{k, keyRef{thumbprint: t}})
	}
	return out
}

// has says whether the key ref names is still in the set (a token verified
// earlier by a key the issuer has since removed is no longer accepted).
func (s *keySet) has(ref keyRef) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if ref.kid != "" {
		_, ok := s.named[ref.kid]
		return ok
	}
	_, ok := s.unnamed[ref.thumbprint]
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
	keys, err := s.fetch(context.WithoutCancel(ctx))
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
	named, unnamed := map[string]jose.JSONWebKey{}, map[string]jose.JSONWebKey{}
	for _, k := range keys {
		// Keys for encryption, and private or symmetric keys (which a
		// JWKS must never publish), verify nothing.
		if k.Use == "enc" || !k.Valid() || !k.IsPublic() {
			continue
		}
		if k.KeyID != "" {
			named[k.KeyID] = k
			continue
		}
		t, err := k.Thumbprint(crypto.SHA256)
		if err != nil {
			continue // a key type without a thumbprint: one go-jose cannot use either
		}
		unnamed[base64.RawURLEncoding.EncodeToString(t)] = k
	}
	s.named, s.unnamed, s.loadedAt = named, unnamed, s.now()
	return nil
}

// fetchesTried is the number of fetches tried.
func (s *keySet) fetchesTried() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.fetches
}
