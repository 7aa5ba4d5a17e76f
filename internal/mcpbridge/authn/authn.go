// Package authn tells the bridge who is calling: a bearer token checked by
// the Kubernetes API server (TokenReview, audience mcp-operator), with
// results cached for at most a minute and never past the token's own
// expiry. A refused token is remembered for a short while too, so a client
// repeating a bad token does not cost a TokenReview each time; requests
// with the same new token share one review, and the reviews in flight are
// bounded, so that many distinct bad tokens cannot load the API server
// without end. Anonymous stands in for local development only.
package authn

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-operator/mcp-operator/internal/identity"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/inflight"
)

// Audience is the audience agents' tokens must be issued for.
const Audience = "mcp-operator"

// ErrUnauthenticated means the token was missing or not accepted.
var ErrUnauthenticated = errors.New("unauthenticated")

// ErrInsufficientScope means the token is genuine but lacks a scope the
// bridge requires (RFC 6750: 403 insufficient_scope).
var ErrInsufficientScope = errors.New("insufficient scope")

// ErrBusy means the token could not be checked now: the reviews in flight
// are at their bound. The caller may retry.
var ErrBusy = errors.New("the bridge is checking as many tokens as it may at once")

// Authenticator checks a bearer token ("" when none was sent).
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (identity.Identity, error)
}

// Cached is an Authenticator that can often answer from memory: Cached
// returns a token's identity when it is known without asking anyone, so
// the caller can skip setting up the wait that a review needs.
type Cached interface {
	Authenticator
	Cached(token string) (identity.Identity, bool)
}

// Anonymous accepts every request as system:anonymous. Only for local use:
// every caller gets the policies of that one user.
type Anonymous struct{}

// Authenticate returns the anonymous identity.
func (Anonymous) Authenticate(context.Context, string) (identity.Identity, error) {
	return identity.AnonymousIdentity(), nil
}

// TokenReviewCreator is the part of the Kubernetes client TokenReview needs
// (kubernetes.Interface.AuthenticationV1().TokenReviews()).
type TokenReviewCreator interface {
	Create(ctx context.Context, tr *authv1.TokenReview, opts metav1.CreateOptions) (*authv1.TokenReview, error)
}

// Defaults of TokenReview.
const (
	DefaultCacheTTL     = time.Minute
	DefaultCacheEntries = 10000
	// DefaultRefusedTTL is how long a refused token is refused without
	// asking again. Short: a token is refused for good (bad signature,
	// wrong audience, expired) or, rarely, not yet valid.
	DefaultRefusedTTL = 10 * time.Second
	// DefaultMaxReviews bounds the TokenReviews in flight: each is a
	// request to the API server, made before the caller is known.
	DefaultMaxReviews = 32
	maxTokenBytes     = 16 << 10
)

// TokenReview authenticates with the API server. Safe for concurrent use.
type TokenReview struct {
	Reviews TokenReviewCreator
	// CacheTTL bounds how long an accepted token is trusted without asking
	// again (at most DefaultCacheTTL).
	CacheTTL time.Duration
	// RefusedTTL is how long a refused token is refused from memory
	// (DefaultRefusedTTL when zero, at most DefaultCacheTTL).
	RefusedTTL time.Duration
	// MaxReviews bounds the reviews in flight (DefaultMaxReviews when
	// zero); past it a new token is refused with ErrBusy.
	MaxReviews int
	// Now reads the clock (time.Now when nil).
	Now func() time.Time

	initOnce sync.Once
	reviews  *inflight.Limit

	mu    sync.Mutex
	cache map[[32]byte]cached
	// refused are tokens the API server did not accept, until when they
	// are refused without a review. An API server that did not answer is
	// never remembered: that is not a refusal.
	refused map[[32]byte]time.Time
	// flights are the reviews in flight, by token: a request with a token
	// being reviewed waits for that review instead of starting another.
	flights map[[32]byte]*flight
}

// flight is one review in flight, and its result once done is closed.
type flight struct {
	done    chan struct{}
	waiters int // requests sharing it besides the first (tests read it)
	id      identity.Identity
	err     error
}

type cached struct {
	id      identity.Identity
	expires time.Time
}

// Key is what caches know a token by: its SHA-256, so that no cache holds
// a token itself.
func Key(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// KeyCached is a Cached that can be asked by a token's Key, so that an
// authenticator in front of it hashes each token once.
type KeyCached interface {
	CachedKey(key [32]byte) (identity.Identity, bool)
}

// Cached returns the identity of a token accepted by a review within the
// cache's time.
func (t *TokenReview) Cached(token string) (identity.Identity, bool) {
	if token == "" || len(token) > maxTokenBytes {
		return identity.Identity{}, false
	}
	return t.CachedKey(Key(token))
}

// CachedKey is Cached of the token whose Key is key.
func (t *TokenReview) CachedKey(key [32]byte) (identity.Identity, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cachedLocked(key, t.now())
}

func (t *TokenReview) cachedLocked(key [32]byte, now time.Time) (identity.Identity, bool) {
	if c, ok := t.cache[key]; ok && now.Before(c.expires) {
		return c.id, true
	}
	return identity.Identity{}, false
}

// Authenticate returns the token's identity, from the cache or a review.
func (t *TokenReview) Authenticate(ctx context.Context, token string) (identity.Identity, error) {
	if token == "" || len(token) > maxTokenBytes {
		return identity.Identity{}, ErrUnauthenticated
	}
	now := t.now()
	key := Key(token)
	t.mu.Lock()
	if id, ok := t.cachedLocked(key, now); ok {
		t.mu.Unlock()
		return id, nil
	}
	if until, ok := t.refused[key]; ok && now.Before(until) {
		t.mu.Unlock()
		return identity.Identity{}, ErrUnauthenticated
	}
	if f, ok := t.flights[key]; ok {
		f.waiters++
		t.mu.Unlock()
		select {
		case <-f.done:
			return f.id, f.err
		case <-ctx.Done():
			return identity.Identity{}, fmt.Errorf("while waiting for the review of the bearer token: %w", ctx.Err())
		}
	}
	t.initOnce.Do(func() { t.reviews = inflight.New(int64(cmp.Or(t.MaxReviews, DefaultMaxReviews)), 0) })
	if !t.reviews.Take("", 1) {
		t.mu.Unlock()
		return identity.Identity{}, ErrBusy
	}
	f := &flight{done: make(chan struct{})}
	if t.flights == nil {
		t.flights = map[[32]byte]*flight{}
	}
	t.flights[key] = f
	t.mu.Unlock()

	// The review is shared: the first caller going away must not fail it
	// for the others, but its deadline still bounds it.
	rctx, cancel := context.WithoutCancel(ctx), context.CancelFunc(func() {})
	if deadline, ok := ctx.Deadline(); ok {
		rctx, cancel = context.WithDeadline(rctx, deadline)
	}
	defer func() {
		// Deferred, so that a review that panics still ends its flight
		// (its waiters would wait to their deadline, the token never be
		// reviewed again) and gives its slot back.
		cancel()
		t.mu.Lock()
		delete(t.flights, key)
		t.mu.Unlock()
		t.reviews.Give("", 1)
		close(f.done)
	}()
	// Until the review says otherwise: the waiters of a review that
	// panicked are refused, never let in with an empty identity.
	f.err = errReviewIncomplete
	f.id, f.err = t.review(rctx, token, key, now)
	return f.id, f.err
}

// errReviewIncomplete is the answer of a review that ended without one.
var errReviewIncomplete = errors.New("the token review did not complete")

// review asks the API server about token and remembers the answer.
func (t *TokenReview) review(ctx context.Context, token string, key [32]byte, now time.Time) (identity.Identity, error) {
	res, err := t.Reviews.Create(ctx, &authv1.TokenReview{
		Spec: authv1.TokenReviewSpec{Token: token, Audiences: []string{Audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		return identity.Identity{}, fmt.Errorf("while reviewing the bearer token with the API server: %w", err)
	}
	st := res.Status
	if !st.Authenticated || !slices.Contains(st.Audiences, Audience) {
		t.remember(key, now)
		return identity.Identity{}, ErrUnauthenticated
	}
	id := identity.FromUserInfo(st.User.Username, st.User.Groups)

	ttl := t.CacheTTL
	if ttl <= 0 || ttl > DefaultCacheTTL {
		ttl = DefaultCacheTTL
	}
	expires := now.Add(ttl)
	if exp, ok := jwtExpiry(token); ok && exp.Before(expires) {
		expires = exp
	}
	t.mu.Lock()
	if t.cache == nil {
		t.cache = map[[32]byte]cached{}
	}
	if len(t.cache) >= DefaultCacheEntries {
		t.pruneLocked(now)
	}
	t.cache[key] = cached{id: id, expires: expires}
	t.mu.Unlock()
	return id, nil
}

func (t *TokenReview) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// remember refuses the token of key without a review for RefusedTTL.
func (t *TokenReview) remember(key [32]byte, now time.Time) {
	ttl := t.RefusedTTL
	if ttl <= 0 {
		ttl = DefaultRefusedTTL
	}
	ttl = min(ttl, DefaultCacheTTL)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.refused == nil {
		t.refused = map[[32]byte]time.Time{}
	}
	if len(t.refused) >= DefaultCacheEntries {
		for k, until := range t.refused {
			if !now.Before(until) {
				delete(t.refused, k)
			}
		}
		if len(t.refused) >= DefaultCacheEntries {
			clear(t.refused)
		}
	}
	t.refused[key] = now.Add(ttl)
}

// pruneLocked drops expired entries, and everything if that is not enough:
// the cache is an optimization, a review is always correct.
func (t *TokenReview) pruneLocked(now time.Time) {
	for k, c := range t.cache {
		if !now.Before(c.expires) {
			delete(t.cache, k)
		}
	}
	if len(t.cache) >= DefaultCacheEntries {
		clear(t.cache)
	}
}

// jwtExpiry reads exp from a JWT's payload. It is not verified — the API
// server did that — and is used only to cache for less time, never more.
func jwtExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	secs, err := claims.Exp.Float64()
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(int64(secs), 0), true
}

// BearerToken returns the token of an "Authorization: Bearer <token>" header
// value, "" when there is none.
func BearerToken(header string) string {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
