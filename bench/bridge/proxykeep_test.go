package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestKeepConnsAfterTheAgentLeft has an agent read an SSE answer's first
// event through the bare proxy and drop its connection before the
// stream's end, as mcp-go's client does; the upstream ends the stream
// only once the proxy saw the agent go. The next call through the proxy
// must reach the upstream on the same connection.
func TestKeepConnsAfterTheAgentLeft(t *testing.T) {
	release := make(chan struct{})
	var conns atomic.Int32
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: answer\n\n")
		w.(http.Flusher).Flush()
		if r.URL.Query().Get("hold") != "" {
			select {
			case <-release:
			case <-time.After(20 * time.Second):
			}
		}
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	up.Start()
	defer up.Close()
	u, _ := url.Parse(up.URL)
	p := httputil.NewSingleHostReverseProxy(u)
	p.FlushInterval = -1
	p.Transport = keepConns{http.DefaultTransport.(*http.Transport).Clone()}
	agentGone := make(chan struct{})
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("hold") != "" {
			go func() { <-r.Context().Done(); close(agentGone) }()
		}
		p.ServeHTTP(w, r)
	}))
	defer proxy.Close()

	c, err := net.Dial("tcp", strings.TrimPrefix(proxy.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(c, "POST /mcp?hold=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); line != "data: answer\n" {
		t.Fatalf("first event %q (%v)", line, err)
	}
	c.Close() // before the stream's end
	select {
	case <-agentGone:
	case <-time.After(20 * time.Second):
		t.Fatal("the proxy did not see the agent go in 20 s")
	}
	close(release)

	cl := &http.Client{Transport: &http.Transport{}}
	resp2, err := cl.Post(proxy.URL+"/mcp", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	if string(body) != "data: answer\n\n" {
		t.Errorf("the next call answered %q", body)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("the upstream accepted %d connections, want 1: the proxy gave up the first after its agent left", n)
	}
}
