package mcpbridge

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// A stopping replica answers during the delay, on connections it closes
// after each response, and refuses new connections only after it.
func TestShutdownServesThroughTheDelay(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer("", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	go func() { _ = srv.Serve(ln) }()
	url := "http://" + ln.Addr().String() + "/"
	client := &http.Client{Transport: &http.Transport{}}
	get := func() (*http.Response, error) {
		resp, err := client.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	if resp, err := get(); err != nil || resp.Close {
		t.Fatalf("before shutdown: %v, close=%v; want a kept-alive answer", err, resp != nil && resp.Close)
	}

	// During the delay the server still answers, each answer closing its
	// connection: polled until Shutdown has begun, while the delay lasts.
	const delay = 2 * time.Second
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- Shutdown(context.Background(), srv, delay) }()
	for {
		resp, err := get()
		if err != nil {
			t.Fatalf("during the delay: %v; want an answer", err)
		}
		if resp.Close {
			break
		}
		if time.Since(start) >= delay {
			t.Fatal("during the delay the answer must close its connection (Connection: close)")
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if took := time.Since(start); took < delay {
		t.Fatalf("Shutdown returned after %s, before the %s delay", took, delay)
	}
	if _, err := get(); err == nil {
		t.Fatal("after Shutdown a request must be refused")
	}

	// A context that ends cuts the delay short.
	srv2 := NewServer("", http.NotFoundHandler())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start = time.Now()
	if err := Shutdown(ctx, srv2, time.Hour); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown with an ended context: %v", err)
	}
	if time.Since(start) > time.Second {
		t.Fatal("an ended context must cut the delay short")
	}
}
