package streamhttp

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
)

// sseServer answers every POST with its response on an SSE stream, as the
// go-sdk's server answers tools/call; keepOpen holds the stream open after
// the response until the request ends. It counts the TCP connections made
// to it.
func sseServer(t *testing.T, keepOpen bool) (*httptest.Server, *atomic.Int64) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}\n\n", req.ID)
		w.(http.Flusher).Flush()
		if keepOpen {
			<-r.Context().Done()
			return
		}
		// The stream ends a moment after the response, as the go-sdk's
		// server ends it (returning at once, the stream's last chunk can
		// reach the client in the response's own read, and the test could
		// not fail).
		time.Sleep(10 * time.Millisecond)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// An SSE answer's stream is read to its end once the response came, so the
// next call goes on the same connection: a body closed unread would have every
// call dial the server again (10 connections for 10 calls).
func TestSSEAnswersReuseTheConnection(t *testing.T) {
	srv, conns := sseServer(t, false)
	c, err := New(Options{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 10 {
		if _, err := c.Call(context.Background(), &jsonrpc.Message{JSONRPC: jsonrpc.Version, Method: "tools/call", Params: json.RawMessage(`{"name":"echo"}`)}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("10 calls answered on SSE made %d connections to the server; want 1", n)
	}
}

// A server that keeps the stream open after the response is waited for at
// most drainWait, maxKeptOpen times: the pool's later answers are closed at
// once.
func TestSSEStreamKeptOpenIsNotWaitedFor(t *testing.T) {
	srv, _ := sseServer(t, true)
	c, err := New(Options{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	call := func() {
		t.Helper()
		if _, err := c.Call(context.Background(), &jsonrpc.Message{JSONRPC: jsonrpc.Version, Method: "tools/call", Params: json.RawMessage(`{"name":"echo"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	for range maxKeptOpen {
		call()
	}
	if n := c.streams.keptOpen.Load(); n != maxKeptOpen {
		t.Fatalf("%d streams kept open past drainWait were counted as %d", maxKeptOpen, n)
	}
	call() // served without waiting for the stream again
	if n := c.streams.skipped.Load(); n != 1 {
		t.Fatalf("after %d streams kept open, %d answers were not waited for; want 1", maxKeptOpen, n)
	}
}

// A maxMessageBytes near math.MaxInt is no bound, in effect: answers are read,
// on JSON and on SSE. The bound plus its slack must not overflow to a negative
// limit, which would refuse every SSE line as too long and read a JSON body as
// empty.
func TestHugeMaxMessageBytesReadsAnswers(t *testing.T) {
	for _, contentType := range []string{"application/json", "text/event-stream"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				ID json.RawMessage `json:"id"`
			}
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", contentType)
			answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"ok":true}}`, req.ID)
			if contentType == "text/event-stream" {
				answer = "event: message\ndata: " + answer + "\n\n"
			}
			fmt.Fprint(w, answer)
		}))
		for _, bound := range []int{math.MaxInt, math.MaxInt - lineSlack/2} {
			c, err := New(Options{URL: srv.URL, MaxMessageBytes: bound})
			if err != nil {
				t.Fatal(err)
			}
			m, err := c.Call(context.Background(), &jsonrpc.Message{JSONRPC: jsonrpc.Version, Method: "tools/call", Params: json.RawMessage(`{"name":"echo"}`)})
			if err != nil || string(m.Result) != `{"ok":true}` {
				t.Errorf("%s, bound %d: answer %v, err %v; want the result read", contentType, bound, m, err)
			}
			c.Close()
		}
		srv.Close()
	}
}
