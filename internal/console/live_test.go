package console

import (
	"context"
	"net/http"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// stream opens the approvals page's event stream in b until ctx ends.
func (b *browser) stream(ctx context.Context) *http.Response {
	b.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.e.url+"/events?topic=approvals", nil)
	resp, err := b.nav.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp
}

// openStream opens a stream as stream does and returns its status.
func (b *browser) openStream(ctx context.Context) int {
	b.t.Helper()
	resp := b.stream(ctx)
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
	}
	return resp.StatusCode
}

// Each open stream holds a connection: a session opens at most
// maxStreamsPerSession, and all sessions together at most the total; past
// either a stream is refused with 429 until one closes.
func TestEventStreamsAreBounded(t *testing.T) {
	e := newEnv(t)
	e.console.streams.total = maxStreamsPerSession + 1
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := e.browser()
	a.signIn(alice)
	first, closeFirst := context.WithCancel(ctx)
	if status := a.openStream(first); status != http.StatusOK {
		t.Fatalf("the first stream: %d", status)
	}
	for i := 1; i < maxStreamsPerSession; i++ {
		if status := a.openStream(ctx); status != http.StatusOK {
			t.Fatalf("stream %d of one session: %d", i+1, status)
		}
	}
	if status := a.openStream(ctx); status != http.StatusTooManyRequests {
		t.Fatalf("a stream beyond the session's bound: %d, want 429", status)
	}
	b := e.browser()
	b.signIn(carol)
	if status := b.openStream(ctx); status != http.StatusOK {
		t.Fatalf("another session's stream within the total: %d", status)
	}
	if status := b.openStream(ctx); status != http.StatusTooManyRequests {
		t.Fatalf("a stream beyond the total: %d, want 429", status)
	}
	closeFirst()
	testkit.Eventually(t, "a closed stream frees its slot", func() bool { return b.openStream(ctx) == http.StatusOK })
}
