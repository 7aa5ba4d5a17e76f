package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The watch calls idle once per quiet spell, never while a request is in
// flight, and again after the server is used again; probes are not use.
func TestIdleWatchCallsIdleOncePerQuietSpell(t *testing.T) {
	const quiet = 200 * time.Millisecond
	w := newIdleWatch()
	hold := make(chan struct{})
	var holdOnce sync.Once
	release := func() { holdOnce.Do(func() { close(hold) }) }
	srv := httptest.NewServer(w.wrap(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-hold
		}
	}), "/healthz"))
	defer srv.Close()
	defer release() // before the server's Close waits for /hold, even on a failure
	var calls atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.run(ctx, quiet, func() { calls.Add(1) })

	get := func(path string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
	}
	wait := func(want int32, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for calls.Load() < want && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if got := calls.Load(); got != want {
			t.Fatalf("idle called %d times, want %d", got, want)
		}
	}

	wait(1, 5*quiet) // quiet since its start
	for range 6 {
		get("/healthz") // probes are not use
		time.Sleep(quiet / 2)
	}
	time.Sleep(2 * quiet)
	wait(1, 0) // still the same spell

	done := make(chan struct{})
	go func() { get("/hold"); close(done) }()
	time.Sleep(3 * quiet)
	wait(1, 0) // a request in flight (an open page's stream) is use
	release()
	<-done
	wait(2, 5*quiet)

	get("/")
	wait(3, 5*quiet)
}
