package authn

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// slowReviews is an API server that holds every review until the test
// lets it answer: a slow API server is the fault here, and a real one
// cannot be made slow on demand. It refuses every token, as for an
// attacker's made-up ones.
type slowReviews struct {
	n       atomic.Int32
	entered chan string
	answer  chan struct{}
}

func (r *slowReviews) Create(ctx context.Context, tr *authv1.TokenReview, _ metav1.CreateOptions) (*authv1.TokenReview, error) {
	r.n.Add(1)
	r.entered <- tr.Spec.Token
	select {
	case <-r.answer:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	out := tr.DeepCopy()
	out.Status = authv1.TokenReviewStatus{Authenticated: false, Error: "invalid bearer token"}
	return out, nil
}

func newSlowReviews() *slowReviews {
	return &slowReviews{entered: make(chan string, 16), answer: make(chan struct{})}
}

// TestReviewsInFlightAreBounded: requests with distinct bad tokens each cost a
// TokenReview, so the reviews in flight at once are bounded: past MaxReviews,
// a new token is refused with ErrBusy at once, without a review.
func TestReviewsInFlightAreBounded(t *testing.T) {
	r := newSlowReviews()
	tr := &TokenReview{Reviews: r, MaxReviews: 2}
	ctx := testkit.Context(t)

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, tok := range []string{"bad-1", "bad-2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := tr.Authenticate(ctx, tok)
			errs <- err
		}()
	}
	<-r.entered
	<-r.entered // both reviews are at the API server now
	if _, err := tr.Authenticate(ctx, "bad-3"); !errors.Is(err, ErrBusy) {
		t.Fatalf("a third distinct token with two reviews in flight: %v, want ErrBusy", err)
	}
	if n := r.n.Load(); n != 2 {
		t.Fatalf("%d reviews reached the API server, want 2 (the bound)", n)
	}
	close(r.answer)
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("a reviewed bad token: %v, want ErrUnauthenticated", err)
		}
	}
	// The slots are given back: the next new token is reviewed.
	if _, err := tr.Authenticate(ctx, "bad-3"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a new token after the reviews ended: %v, want ErrUnauthenticated", err)
	}
	if n := r.n.Load(); n != 3 {
		t.Fatalf("%d reviews, want 3", n)
	}
}

// TestConcurrentRequestsWithOneTokenShareAReview: requests carrying the
// same token while it is being reviewed wait for that review; they neither
// start another nor take a slot.
func TestConcurrentRequestsWithOneTokenShareAReview(t *testing.T) {
	r := newSlowReviews()
	tr := &TokenReview{Reviews: r, MaxReviews: 1}
	ctx := testkit.Context(t)

	const callers = 8
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := tr.Authenticate(ctx, "same-bad-token")
			errs <- err
		}()
	}
	<-r.entered
	// Wait until every other caller has joined the review in flight.
	for deadline := time.Now().Add(20 * time.Second); ; {
		tr.mu.Lock()
		joined := 0
		for _, f := range tr.flights {
			joined = f.waiters
		}
		tr.mu.Unlock()
		if joined == callers-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d callers joined the review in flight, want %d", joined, callers-1)
		}
		time.Sleep(time.Millisecond)
	}
	close(r.answer)
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("a caller sharing the review: %v, want ErrUnauthenticated", err)
		}
	}
	if n := r.n.Load(); n != 1 {
		t.Fatalf("%d concurrent requests with one token cost %d reviews, want 1", callers, n)
	}
}

// panickingReviews panics in the middle of a review, once the test lets it:
// a fault no real API server produces on demand.
type panickingReviews struct{ *slowReviews }

func (r panickingReviews) Create(_ context.Context, tr *authv1.TokenReview, _ metav1.CreateOptions) (*authv1.TokenReview, error) {
	r.entered <- tr.Spec.Token
	<-r.answer
	panic("review failed")
}

// A review that panics ends its flight: the requests waiting on it are
// refused, not let in with the empty identity of a flight that ended before
// its review said anything, and its slot is given back.
func TestAPanickingReviewLetsNobodyIn(t *testing.T) {
	r := panickingReviews{newSlowReviews()}
	tr := &TokenReview{Reviews: r, MaxReviews: 1}
	ctx := testkit.Context(t)
	go func() {
		defer func() { _ = recover() }()
		_, _ = tr.Authenticate(ctx, "a-token")
	}()
	<-r.entered
	waited := make(chan error, 1)
	go func() {
		_, err := tr.Authenticate(ctx, "a-token")
		waited <- err
	}()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		tr.mu.Lock()
		joined := 0
		for _, f := range tr.flights {
			joined = f.waiters
		}
		tr.mu.Unlock()
		if joined == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second request did not join the review in flight")
		}
	}
	close(r.answer)
	if err := <-waited; err == nil {
		t.Fatal("a request waiting on a review that panicked was let in")
	}
	if used, _ := tr.reviews.Used(""); used != 0 {
		t.Fatalf("%d review slots still taken after the panic", used)
	}
}
