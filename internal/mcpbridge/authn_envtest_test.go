package mcpbridge

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
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
