package authn

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// reviews answers like an API server that accepts every token of the right
// audience and counts the reviews. The real API server is exercised in
// internal/mcpbridge (TestTokenReviewOnARealAPIServer); this one lets a fake
// clock test the cache bounds without waiting a minute.
type reviews struct {
	n        int
	audience string
	err      error
	// refuse names tokens the API server does not accept.
	refuse string
}

func (r *reviews) Create(_ context.Context, tr *authv1.TokenReview, _ metav1.CreateOptions) (*authv1.TokenReview, error) {
	r.n++
	if r.err != nil {
		return nil, r.err
	}
	out := tr.DeepCopy()
	if tr.Spec.Token == r.refuse {
		out.Status = authv1.TokenReviewStatus{Authenticated: false, Error: "invalid bearer token"}
		return out, nil
	}
	aud := r.audience
	if aud == "" {
		aud = Audience
	}
	out.Status = authv1.TokenReviewStatus{Authenticated: true, Audiences: []string{aud}, User: authv1.UserInfo{Username: "system:serviceaccount:agents:alice"}}
	return out, nil
}

func jwtWithExp(exp time.Time) string {
	payload := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf(`{"exp":%d}`, exp.Unix())))
	return "eyJhbGciOiJFUzI1NiJ9." + payload + ".sig"
}

func TestTokenReviewCache(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	ctx := context.Background()

	r := &reviews{}
	tr := &TokenReview{Reviews: r, Now: clock, CacheTTL: time.Hour}
	if _, ok := tr.Cached("opaque-token"); ok || r.n != 0 {
		t.Fatalf("Cached knows a token never reviewed (%d reviews)", r.n)
	}
	id, err := tr.Authenticate(ctx, "opaque-token")
	if err != nil || id.Subject().Name != "alice" || id.Subject().Namespace != "agents" {
		t.Fatalf("Authenticate = %+v, %v", id, err)
	}
	now = now.Add(59 * time.Second)
	if _, _ = tr.Authenticate(ctx, "opaque-token"); r.n != 1 {
		t.Fatalf("within a minute the cache must answer (%d reviews)", r.n)
	}
	if cached, ok := tr.Cached("opaque-token"); !ok || cached.Username != id.Username || cached.Subject().Name != "alice" || r.n != 1 {
		t.Fatalf("Cached within a minute = %+v, %v (%d reviews)", cached, ok, r.n)
	}
	now = now.Add(2 * time.Second)
	if _, ok := tr.Cached("opaque-token"); ok {
		t.Fatal("Cached answers past the cache's minute")
	}
	if _, _ = tr.Authenticate(ctx, "opaque-token"); r.n != 2 {
		t.Fatalf("a CacheTTL over a minute must still expire after one (%d reviews)", r.n)
	}

	short := jwtWithExp(now.Add(10 * time.Second))
	_, _ = tr.Authenticate(ctx, short)
	now = now.Add(11 * time.Second)
	before := r.n
	_, _ = tr.Authenticate(ctx, short)
	if r.n != before+1 {
		t.Fatal("a token past its exp must be reviewed again, not served from the cache")
	}

	for name, tc := range map[string]struct {
		r     *reviews
		token string
		want  error
	}{
		"no token":       {&reviews{}, "", ErrUnauthenticated},
		"wrong audience": {&reviews{audience: "other"}, "t", ErrUnauthenticated},
	} {
		if _, err := (&TokenReview{Reviews: tc.r, Now: clock}).Authenticate(ctx, tc.token); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	down := &reviews{err: errors.New("connection refused")}
	if _, err := (&TokenReview{Reviews: down, Now: clock}).Authenticate(ctx, "t"); err == nil || errors.Is(err, ErrUnauthenticated) {
		t.Errorf("an unreachable API server must be an error other than unauthenticated: %v", err)
	}
}

// TestRefusedTokensRemembered: a refused token repeated within
// RefusedTTL costs no TokenReview; after it, the API
// server is asked again. An API server that did not answer is not a
// refusal and is not remembered.
func TestRefusedTokensRemembered(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ctx := context.Background()
	r := &reviews{refuse: "stolen-or-forged"}
	tr := &TokenReview{Reviews: r, Now: func() time.Time { return now }}
	for range 50 {
		if _, err := tr.Authenticate(ctx, "stolen-or-forged"); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("a refused token: %v, want ErrUnauthenticated", err)
		}
	}
	if r.n != 1 {
		t.Fatalf("50 requests with one refused token cost %d TokenReviews, want 1", r.n)
	}
	if _, err := tr.Authenticate(ctx, "good-token"); err != nil || r.n != 2 {
		t.Fatalf("another token is reviewed as usual: %v (%d reviews)", err, r.n)
	}
	now = now.Add(DefaultRefusedTTL)
	_, _ = tr.Authenticate(ctx, "stolen-or-forged")
	if r.n != 3 {
		t.Fatalf("after %s a refused token must be reviewed again (%d reviews)", DefaultRefusedTTL, r.n)
	}

	down := &reviews{err: errors.New("connection refused")}
	tr = &TokenReview{Reviews: down, Now: func() time.Time { return now }}
	_, _ = tr.Authenticate(ctx, "t")
	_, _ = tr.Authenticate(ctx, "t")
	if down.n != 2 {
		t.Fatalf("a failed review must not be remembered as a refusal (%d reviews, want 2)", down.n)
	}
}

func TestBearerToken(t *testing.T) {
	for in, want := range map[string]string{"Bearer abc": "abc", "bearer  abc ": "abc", "Basic abc": "", "": "", "Bearer": ""} {
		if got := BearerToken(in); got != want {
			t.Errorf("BearerToken(%q) = %q, want %q", in, got, want)
		}
	}
}
