package policy

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// RateLimiter enforces spec.rateLimit: a token bucket per subject and policy,
// refilled at callsPerMinute and holding at most burst tokens. It outlives
// engines (a policy edit does not refill anyone's bucket unless the limit
// itself changed) and is safe for concurrent use.
type RateLimiter struct {
	now     func() time.Time
	mu      sync.Mutex
	buckets map[bucketKey]*bucket
	applied int
}

type bucketKey struct {
	policy, subject string
}

type bucket struct {
	tokens                float64
	last                  time.Time
	callsPerMinute, burst int
}

// pruneEvery is how many Apply calls pass between sweeps of full buckets: a
// full bucket is the same as none, so forgetting it bounds memory by the
// subjects seen within a refill period.
const pruneEvery = 4096

// NewRateLimiter returns a limiter that reads time from now (time.Now when
// nil; tests pass a fake clock).
func NewRateLimiter(now func() time.Time) *RateLimiter {
	if now == nil {
		now = time.Now
	}
	return &RateLimiter{now: now, buckets: map[bucketKey]*bucket{}}
}

// Apply takes one token from the bucket of each policy that had a rule
// matching the request and sets a rate limit. If one of them is empty the
// request is denied and no token is taken. A denied result passes unchanged
// and costs nothing.
func (l *RateLimiter) Apply(s Subject, r Result) Result {
	if l == nil || r.Decision == v1alpha1.DecisionDeny || len(r.rateLimits) == 0 {
		return r
	}
	subject := s.Username()
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.applied++
	if l.applied%pruneEvery == 0 {
		l.prune(now)
	}
	var bufs [4]*bucket
	buckets := bufs[:0]
	// The request passes once every empty bucket holds a token again: it
	// is denied naming the one that takes longest, and when that is.
	var longest *rateLimitSpec
	var wait time.Duration
	for _, spec := range r.rateLimits {
		b := l.bucket(bucketKey{policy: spec.policy, subject: subject}, spec, now)
		if b.tokens < 1 {
			if w := b.untilToken(); longest == nil || w > wait {
				longest, wait = spec, w
			}
		}
		buckets = append(buckets, b)
	}
	if longest != nil {
		r.Decision = v1alpha1.DecisionDeny
		r.Rules = []RuleRef{longest.ref}
		r.SourcedFrom = longest.source
		r.Approval = nil
		r.Reason = fmt.Sprintf("rate limit exceeded: policy %s allows %d calls per minute (burst %d) to each subject",
			longest.policy, longest.callsPerMinute, longest.burst)
		r.RetryAfter = wait
		return r
	}
	for _, b := range buckets {
		b.tokens--
	}
	return r
}

// bucket returns the key's bucket refilled up to now; a new bucket, or one
// whose limit changed, starts full.
func (l *RateLimiter) bucket(k bucketKey, spec *rateLimitSpec, now time.Time) *bucket {
	b := l.buckets[k]
	if b == nil || b.callsPerMinute != spec.callsPerMinute || b.burst != spec.burst {
		b = &bucket{tokens: float64(spec.burst), last: now, callsPerMinute: spec.callsPerMinute, burst: spec.burst}
		l.buckets[k] = b
		return b
	}
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(float64(b.burst), b.tokens+elapsed.Minutes()*float64(b.callsPerMinute))
		b.last = now
	}
	return b
}

// untilToken is how long until b, refilled last at b.last, holds a whole
// token again, rounded up to the millisecond.
func (b *bucket) untilToken() time.Duration {
	minutes := (1 - b.tokens) / float64(b.callsPerMinute)
	return time.Duration(math.Ceil(minutes*float64(time.Minute)/float64(time.Millisecond))) * time.Millisecond
}

func (l *RateLimiter) prune(now time.Time) {
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Minutes()*float64(b.callsPerMinute) >= float64(b.burst) {
			delete(l.buckets, k)
		}
	}
}
