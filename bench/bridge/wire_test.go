package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWire sends requests of each kind through the wire to a real HTTP
// server, on one kept-alive connection, and checks that both sides see
// the other's bytes unchanged and that the wire counts what came.
func TestWire(t *testing.T) {
	var mu sync.Mutex
	var got [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, body)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, "data: answer to "+r.Method+"\n\n")
	}))
	defer srv.Close()
	w, err := newWire(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	cl := &http.Client{Transport: &http.Transport{}}
	send := func(method, body string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+w.addr()+"/mcp", strings.NewReader(body))
		req.Header.Set("Mcp-Session-Id", "s1")
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := "data: answer to " + method + "\n\n"; string(answer) != want {
			t.Fatalf("%s: the client got %q through the wire, want %q", method, answer, want)
		}
	}
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`
	send(http.MethodPost, call)
	send(http.MethodPost, call)
	send(http.MethodPost, `{"jsonrpc":"2.0","id":7,"result":{}}`)
	send(http.MethodPost, `not json`)
	send(http.MethodGet, "")
	send(http.MethodDelete, "")
	cl.CloseIdleConnections()

	c := afterClientClosed(t, w)
	if c.dials != 1 || c.closes != 1 {
		t.Errorf("connections accepted %d, closed by the client %d; want 1 and 1 (one kept-alive connection)", c.dials, c.closes)
	}
	want := map[string]int{"POST tools/call": 2, "POST (response)": 1, "POST (not JSON-RPC)": 1, "GET": 1, "DELETE": 1}
	for k, n := range want {
		if c.kinds[k] != n {
			t.Errorf("requests %v, want %v", c.kinds, want)
			break
		}
	}
	mu.Lock()
	if len(got) != 6 || !bytes.Equal(got[0], []byte(call)) {
		t.Errorf("the server received bodies %q, want the client's six, the first %q", got, call)
	}
	mu.Unlock()
	var sum int
	for _, r := range c.reqs {
		sum += r.bytes
		if r.header.Get("Mcp-Session-Id") != "s1" {
			t.Errorf("%s: headers %v, want the client's", r.kind, r.header)
		}
	}
	if int64(sum) != c.sent || sum <= len(call)*2 {
		t.Errorf("bytes of the requests %d, sent %d: want the same, more than their bodies", sum, c.sent)
	}
	if c.back == 0 || c.reads[0] == 0 || c.reads[1] == 0 {
		t.Errorf("bytes back %d, reads %v: want some", c.back, c.reads)
	}
	if again := w.snapshot(); again.dials != 0 || len(again.reqs) != 0 {
		t.Errorf("a snapshot after a snapshot has %d dials and %d requests, want none", again.dials, len(again.reqs))
	}
}

// afterClientClosed waits until the wire saw the client close its one
// connection, and takes a snapshot then.
func afterClientClosed(t *testing.T, w *wire) wireCounts {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		w.mu.Lock()
		closed := w.closes
		w.mu.Unlock()
		if closed == 1 {
			return w.snapshot()
		}
		if time.Now().After(deadline) {
			t.Fatal("the wire did not see the client close its connection")
		}
	}
}

func TestQuartiles(t *testing.T) {
	a := []float64{1, 2, 3, 4, 5, 6, 7, 8}
	b := []float64{1, 1, 1, 1, 1, 1, 1, 1}
	if got, want := quartiles(a, b), "2.00 4.00 6.00"; got != want {
		t.Errorf("quartiles = %q, want %q (nearest rank)", got, want)
	}
	if got := quartiles(a, []float64{0}); got != "-" {
		t.Errorf("quartiles with no turn to divide by = %q, want -", got)
	}
}

// TestInScratchDir checks that what the run puts in the temporary
// directory is gone after it, and that TMPDIR is as it was.
func TestInScratchDir(t *testing.T) {
	base := t.TempDir()
	t.Setenv("TMPDIR", base)
	var made string
	err := inScratchDir(func() error {
		d, err := os.MkdirTemp("", "bench-bridge-")
		made = d
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(d, "audit.jsonl"), []byte("{}\n"), 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(filepath.Dir(made)) != base {
		t.Errorf("the run's directory %s is not in its own directory under %s", made, base)
	}
	if _, err := os.Stat(made); !os.IsNotExist(err) {
		t.Errorf("%s is left after the run (%v)", made, err)
	}
	if left, _ := os.ReadDir(base); len(left) != 0 {
		t.Errorf("%d entries left in the temporary directory", len(left))
	}
	if got := os.Getenv("TMPDIR"); got != base {
		t.Errorf("TMPDIR after the run is %q, want %q", got, base)
	}
}

// TestWirePipelined writes two requests at once on a raw socket, the
// second with a chunked body, and checks that the server answers both
// through the wire and that the wire parses both, the chunked body
// decoded, their bytes adding up to what was sent.
func TestWirePipelined(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(body))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()
	w, err := newWire(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	first := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`
	second := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	reqs := "POST /mcp HTTP/1.1\r\nHost: up\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(first)) + "\r\n\r\n" + first +
		"POST /mcp HTTP/1.1\r\nHost: up\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
		strconv.FormatInt(10, 16) + "\r\n" + second[:10] + "\r\n" + strconv.FormatInt(int64(len(second)-10), 16) + "\r\n" + second[10:] + "\r\n0\r\n\r\n"
	c, err := net.Dial("tcp", w.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, reqs); err != nil { // both in one write: pipelined
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for i := range 2 {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d through the wire: %v", i+1, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != `{"ok":true}` {
			t.Errorf("answer %d: %q", i+1, body)
		}
	}
	c.Close()
	counts := afterClientClosed(t, w)
	mu.Lock()
	if !slices.Equal(got, []string{first, second}) {
		t.Errorf("the server received %q, want both bodies in order", got)
	}
	mu.Unlock()
	if len(counts.reqs) != 2 || counts.reqs[0].kind != "POST tools/call" || counts.reqs[1].kind != "POST tools/list" || string(counts.reqs[1].body) != second {
		t.Fatalf("the wire parsed %+v, want tools/call then tools/list with its chunked body decoded", counts.reqs)
	}
	if counts.sent != int64(len(reqs)) || counts.dials != 1 {
		t.Errorf("the wire counted %d bytes on %d connections, want %d on 1", counts.sent, counts.dials, len(reqs))
	}
}

func TestFirstResult(t *testing.T) {
	result := `{"content":[{"type":"text","text":"a hello"}]}`
	for _, c := range []struct {
		name, ct, body string
		ok             bool
	}{
		{"JSON", "application/json", `{"jsonrpc":"2.0","id":1,"result":` + result + `}`, true},
		{"SSE", "text/event-stream", "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":" + result + "}\r\n\r\n", true},
		{"SSE, a log message first", "text/event-stream",
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":" + result + "}\n\n", false},
		{"an error", "application/json", `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no"}}`, false},
	} {
		got, err := firstResult(c.ct, []byte(c.body))
		if (err == nil) != c.ok {
			t.Errorf("%s: error %v, want ok %v", c.name, err, c.ok)
			continue
		}
		if c.ok {
			if string(got) != result {
				t.Errorf("%s: result %s, want %s", c.name, got, result)
			}
			if err := checkAnswer("x", got, "hello"); err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
		}
	}
}
