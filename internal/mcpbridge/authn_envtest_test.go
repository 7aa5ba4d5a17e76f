package mcpbridge

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn/oauth/oauthtest"
)

// countingReviews counts the TokenReviews that reach the API server.
type countingReviews struct {
	authn.TokenReviewCreator
	n atomic.Int32
}

func (c *countingReviews) Create(ctx context.Context, tr *authv1.TokenReview, o metav1.CreateOptions) (*authv1.TokenReview, error) {
	c.n.Add(1)
	return c.TokenReviewCreator.Create(ctx, tr, o)
}

// TestTokenReviewOnARealAPIServer: ServiceAccount tokens checked by envtest's
// kube-apiserver through the bridge.
func TestTokenReviewOnARealAPIServer(t *testing.T) {
	_, cs := startAPIServer(t)
	reviews := &countingReviews{TokenReviewCreator: cs.AuthenticationV1().TokenReviews()}
	// The cache reads a clock the test moves on (no sleeping through a
	// token's life).
	var ahead atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	h := newHarness(t, nil, nil, func(c *Config) { c.Auth = &authn.TokenReview{Reviews: reviews, Now: now} })
	mcp := h.url + "/mcp"

	alice := saToken(t, cs, "agents", "alice", authn.Audience)
	bob := saToken(t, cs, "agents", "bob", authn.Audience)
	wrongAudience := saToken(t, cs, "agents", "alice", "some-other-service")
	expired := resignedToken(t, alice, time.Now().Add(-5*time.Minute)) // past the API server's one-minute leeway
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`

	sid := openSession(t, mcp, alice)
	if n := reviews.n.Load(); n != 1 {
		t.Fatalf("%d reviews for one token, want 1", n)
	}
	if status, _, _ := post(t, mcp, alice, sid, ping, nil); status != http.StatusOK {
		t.Fatalf("alice on her session: %d", status)
	}
	if n := reviews.n.Load(); n != 1 {
		t.Fatalf("a second request within the minute asked the API server again (%d reviews)", n)
	}
	for name, tok := range map[string]string{"wrong audience": wrongAudience, "expired": expired, "none": "", "garbage": "not.a.jwt"} {
		if status, _, hdr := post(t, mcp, tok, "", initBody, nil); status != http.StatusUnauthorized || hdr.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: status %d (WWW-Authenticate %q), want 401", name, status, hdr.Get("WWW-Authenticate"))
		}
	}
	// Refused tokens are remembered: repeating one costs no TokenReview.
	before := reviews.n.Load()
	for range 5 {
		if status, _, _ := post(t, mcp, wrongAudience, "", initBody, nil); status != http.StatusUnauthorized {
			t.Fatalf("a refused token again: %d, want 401", status)
		}
	}
	if n := reviews.n.Load(); n != before {
		t.Fatalf("a refused token repeated 5 times cost %d more TokenReviews, want 0", n-before)
	}
	if status, _, _ := post(t, mcp, bob, sid, ping, nil); status != http.StatusNotFound {
		t.Fatalf("bob's token on alice's session: %d, want 404", status)
	}

	// A token that expires in two seconds is trusted from the cache only
	// until then: after, the API server is asked again (which, with its
	// one-minute leeway for clock skew, may still accept it).
	short := resignedToken(t, alice, time.Now().Add(2*time.Second))
	if status, _, _ := post(t, mcp, short, "", initBody, nil); status != http.StatusOK {
		t.Fatalf("a token valid for two more seconds: %d", status)
	}
	before = reviews.n.Load()
	post(t, mcp, short, "", initBody, nil)
	if reviews.n.Load() != before {
		t.Fatal("a token within its life was reviewed again instead of coming from the cache")
	}
	ahead.Store(int64(2500 * time.Millisecond)) // past the token's expiry, by the cache's clock
	post(t, mcp, short, "", initBody, nil)
	if reviews.n.Load() != before+1 {
		t.Fatal("a token past its expiry was trusted from the cache")
	}
}

// boundedReviews counts the TokenReviews in flight at the API server, and
// the most at once.
type boundedReviews struct {
	authn.TokenReviewCreator
	n, inFlight, most atomic.Int32
}

func (c *boundedReviews) Create(ctx context.Context, tr *authv1.TokenReview, o metav1.CreateOptions) (*authv1.TokenReview, error) {
	c.n.Add(1)
	now := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	most := c.most.Load()
	for now > most && !c.most.CompareAndSwap(most, now) {
		most = c.most.Load()
	}
	return c.TokenReviewCreator.Create(ctx, tr, o)
}

// TestTokenReviewsBoundedOnARealAPIServer: many
// requests with distinct made-up tokens at once never have more than
// MaxReviews TokenReviews in flight at envtest's kube-apiserver; each is
// answered 401 (reviewed) or 503 with Retry-After (not reviewed), and only
// the 401s cost a review.
func TestTokenReviewsBoundedOnARealAPIServer(t *testing.T) {
	_, cs := startAPIServer(t)
	reviews := &boundedReviews{TokenReviewCreator: cs.AuthenticationV1().TokenReviews()}
	h := newHarness(t, nil, nil, func(c *Config) { c.Auth = &authn.TokenReview{Reviews: reviews, MaxReviews: 2} })
	const requests = 24
	statuses := make(chan int, requests)
	var wg sync.WaitGroup
	for i := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, _, hdr := post(t, h.url+"/mcp", fmt.Sprintf("made-up-token-%d", i), "", initBody, nil)
			if status == http.StatusServiceUnavailable && hdr.Get("Retry-After") == "" {
				status = -status // a 503 without Retry-After
			}
			statuses <- status
		}()
	}
	wg.Wait()
	close(statuses)
	unauthorized := int32(0)
	for status := range statuses {
		switch status {
		case http.StatusUnauthorized:
			unauthorized++
		case http.StatusServiceUnavailable:
		default:
			t.Fatalf("a made-up token was answered %d, want 401, or 503 with Retry-After", status)
		}
	}
	t.Logf("%d of %d requests reviewed (401), the others refused for the bound (503); at most %d reviews at once", unauthorized, requests, reviews.most.Load())
	if most := reviews.most.Load(); most > 2 {
		t.Fatalf("%d TokenReviews in flight at once, over the bound of 2", most)
	}
	if n := reviews.n.Load(); n != unauthorized {
		t.Fatalf("%d reviews for %d requests answered 401: a request refused for the bound was reviewed, or a reviewed one not answered 401", n, unauthorized)
	}
}

// TestOAuthBesideTokenReviewOnARealAPIServer: with OAuth configured,
// ServiceAccount tokens still go to envtest's kube-apiserver, unchanged (a
// token for another audience refused, now with the OAuth challenge), and
// a person's access token is accepted on the same endpoint without a
// TokenReview.
func TestOAuthBesideTokenReviewOnARealAPIServer(t *testing.T) {
	_, cs := startAPIServer(t)
	reviews := &countingReviews{TokenReviewCreator: cs.AuthenticationV1().TokenReviews()}
	idp := oauthtest.New()
	defer idp.Close()
	h := newHarness(t, nil, nil, withOAuth(t, idp, &authn.TokenReview{Reviews: reviews}))
	mcp := h.url + "/mcp"

	alice := saToken(t, cs, "agents", "alice", authn.Audience)
	wrongAudience := saToken(t, cs, "agents", "alice", "some-other-service")
	if status, _, _ := post(t, mcp, alice, "", initBody, nil); status != http.StatusOK {
		t.Fatalf("a ServiceAccount token: %d", status)
	}
	status, _, hdr := post(t, mcp, wrongAudience, "", initBody, nil)
	if status != http.StatusUnauthorized || !strings.Contains(hdr.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Fatalf("a ServiceAccount token for another audience: %d %q", status, hdr.Get("WWW-Authenticate"))
	}
	if n := reviews.n.Load(); n != 2 {
		t.Fatalf("%d TokenReviews for two ServiceAccount tokens, want 2", n)
	}
	if status, _, _ := post(t, mcp, idp.Sign(idp.Claims("alice", publicURL)), "", initBody, nil); status != http.StatusOK {
		t.Fatalf("a person's access token: %d", status)
	}
	if n := reviews.n.Load(); n != 2 {
		t.Fatalf("a person's access token cost a TokenReview (%d)", n)
	}
}
