package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestKeepConnsAfterTheAgentLeft calls an SSE upstream through the bare
// proxy's transport as httputil.ReverseProxy does when its agent leaves
// before the stream's end: the agent's context ends after the answer's
// headers came, and the proxy closes the answer after its first event.
// The upstream's connection must go back to the pool all the same.
func TestKeepConnsAfterTheAgentLeft(t *testing.T) {
	release := make(chan struct{})
	var conns atomic.Int32
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: answer\n\n")
		w.(http.Flusher).Flush()
		select { // the stream's end, once the agent has left
		case <-release:
		case <-time.After(20 * time.Second):
		}
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	up.Start()
	defer up.Close()
	rt := keepConns{http.DefaultTransport.(*http.Transport).Clone()}

	agent, agentLeft := context.WithCancel(context.Background())
	kept := make(chan error, 1)
	trace := &httptrace.ClientTrace{PutIdleConn: func(err error) { kept <- err }}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(agent, trace), http.MethodPost, up.URL+"/mcp", strings.NewReader("{}"))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	event := make([]byte, len("data: answer\n\n"))
	if _, err := io.ReadFull(resp.Body, event); err != nil {
		t.Fatal(err)
	}
	agentLeft() // as the proxy's inbound request's context ends
	close(release)
	resp.Body.Close() // as the proxy gives up the answer
	select {
	case err := <-kept:
		if err != nil {
			t.Fatalf("the upstream connection was not kept: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the upstream connection did not go back to the pool in 20 s")
	}

	req2, _ := http.NewRequest(http.MethodPost, up.URL+"/mcp", strings.NewReader("{}"))
	resp2, err := rt.RoundTrip(req2)
	if err != nil {
		t.Fatal(err)
	}
	close2 := make(chan struct{})
	go func() { defer close(close2); _, _ = io.ReadAll(resp2.Body) }()
	select {
	case <-close2:
	case <-time.After(20 * time.Second):
		t.Fatal("the second answer did not end in 20 s")
	}
	resp2.Body.Close()
	if n := conns.Load(); n != 1 {
		t.Errorf("the upstream accepted %d connections, want 1", n)
	}
}
