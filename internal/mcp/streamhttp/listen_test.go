package streamhttp

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
)

// A server that asks for "retry: 0" and sends a new event id on each
// standalone stream, then ends it, is reconnected to after minRetryDelay at
// least, not at once and forever (each new id counts as progress). Only a
// lower bound on the gaps between the server's GETs is asserted: load makes
// them longer, never shorter.
func TestListenFloorsTheServersRetry(t *testing.T) {
	gets := make(chan time.Time, 16)
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost: // initialize: opens the session
			w.Header().Set("Mcp-Session-Id", "s1")
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
		case http.MethodGet:
			select {
			case gets <- time.Now():
			default:
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "retry: 0\nid: %d\n\n", n.Add(1))
		}
	}))
	defer srv.Close()
	c, err := New(Options{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Call(context.Background(), &jsonrpc.Message{JSONRPC: jsonrpc.Version, Method: "initialize", Params: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	c.SetProtocolVersion("2025-06-18")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Listen(ctx, nil) }()
	// Bounded: a Listen that stops reconnecting fails the test, not hangs it.
	reconnected := func() time.Time {
		select {
		case at := <-gets:
			return at
		case <-time.After(20 * time.Second):
			t.Fatal("Listen did not open its stream again within 20s")
			return time.Time{}
		}
	}
	prev := reconnected()
	for i := range 3 {
		at := reconnected()
		if gap := at.Sub(prev); gap < minRetryDelay {
			t.Errorf("reconnection %d came %v after the last, want %v at least", i+1, gap, minRetryDelay)
		}
		prev = at
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Listen ended with %v, want nil when its context ends", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Listen did not end within 20s of its context")
	}
}
