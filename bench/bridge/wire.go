package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// wire is a loopback TCP forwarder put in front of an upstream to see what
// a hop sends it (does the bridge make the everything-server work
// harder?). It copies bytes both ways unchanged, as they come, so
// the upstream and the hop behave as they would without it (one upstream
// connection per connection the hop dials, closed when the hop's is; an
// answer's stream end that the upstream sends late reaches the hop late),
// and reads a copy of what the hop sends as HTTP/1 requests: the
// connections the hop dials, each request's kind (the HTTP method, and a
// POST's JSON-RPC method), its bytes and headers, and when it came.
type wire struct {
	ln       net.Listener
	upstream string // host:port

	mu      sync.Mutex
	dials   int
	closes  int    // connections the hop closed first
	back    int64  // bytes the upstream sent back
	reads   [2]int // reads from the hop and from the upstream: about the segments each sent
	reqs    []wireRequest
	samples map[string]wireRequest // the first request of each kind
}

// wireRequest is one request the upstream received.
type wireRequest struct {
	at     time.Time
	kind   string // "POST tools/call", "GET", "DELETE", "POST (response)" ...
	header http.Header
	body   []byte
	bytes  int // request line, headers and body as sent
}

// newWire listens on loopback in front of upstream (host:port).
func newWire(upstream string) (*wire, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	w := &wire{ln: ln, upstream: upstream, samples: map[string]wireRequest{}}
	go w.accept()
	return w, nil
}

func (w *wire) addr() string { return w.ln.Addr().String() }

func (w *wire) close() { w.ln.Close() }

func (w *wire) accept() {
	for {
		c, err := w.ln.Accept()
		if err != nil {
			return
		}
		w.mu.Lock()
		w.dials++
		w.mu.Unlock()
		go w.forward(c.(*net.TCPConn))
	}
}

// forward copies one connection both ways, half-closing each side as the
// other ends, and parses the hop's side.
func (w *wire) forward(hop *net.TCPConn) {
	defer hop.Close()
	up, err := net.Dial("tcp", w.upstream)
	if err != nil {
		return
	}
	defer up.Close()
	pr, pw := io.Pipe()
	parsed := make(chan struct{})
	go func() {
		defer close(parsed)
		w.parse(pr)
		_, _ = io.Copy(io.Discard, pr) // what did not parse still flows
	}()
	// Which side ended first is taken when its copy returns, not after
	// the half-closes and the parser: by then the other side may have
	// ended too.
	var first atomic.Int32 // 1: the hop, 2: the server
	upDone := make(chan struct{})
	go func() {
		defer close(upDone)
		_, _ = io.Copy(hop, &countingReader{r: up, add: func(n int) { w.count(1, n) }})
		first.CompareAndSwap(0, 2)
		_ = hop.CloseWrite()
	}()
	_, _ = io.Copy(io.MultiWriter(up, pw), &countingReader{r: hop, add: func(n int) { w.count(0, n) }})
	hopFirst := first.CompareAndSwap(0, 1)
	_ = up.(*net.TCPConn).CloseWrite()
	pw.Close()
	<-parsed
	<-upDone
	w.mu.Lock()
	if hopFirst {
		w.closes++
	}
	w.mu.Unlock()
}

// parse reads the hop's requests from r until it ends.
func (w *wire) parse(r io.Reader) {
	counted := &countingReader{r: r}
	br := bufio.NewReader(counted)
	for {
		before := counted.n - int64(br.Buffered())
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		wr := wireRequest{at: time.Now(), kind: requestKind(req.Method, body), header: req.Header, body: body,
			bytes: int(counted.n - int64(br.Buffered()) - before)}
		w.mu.Lock()
		w.reqs = append(w.reqs, wr)
		if _, ok := w.samples[wr.kind]; !ok {
			w.samples[wr.kind] = wr
		}
		w.mu.Unlock()
	}
}

// countingReader counts what is read through it, and tells add if set.
type countingReader struct {
	r   io.Reader
	n   int64
	add func(int)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.add != nil {
		c.add(n)
	}
	return n, err
}

// count notes a read of n bytes from the hop (side 0) or the upstream (1).
func (w *wire) count(side, n int) {
	if n == 0 {
		return
	}
	w.mu.Lock()
	w.reads[side]++
	if side == 1 {
		w.back += int64(n)
	}
	w.mu.Unlock()
}

// requestKind names a request by its HTTP method and, for a POST, the
// JSON-RPC method it carries (or "(response)" for an answer to the
// server's own request).
func requestKind(method string, body []byte) string {
	if method != http.MethodPost {
		return method
	}
	var m struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(body, &m) != nil {
		return "POST (not JSON-RPC)"
	}
	if m.Method == "" {
		return "POST (response)"
	}
	return "POST " + m.Method
}

// wireCounts is what the upstream received between two snapshots.
type wireCounts struct {
	dials, closes int
	sent          int64 // bytes, all requests
	back          int64 // bytes the upstream sent back
	reads         [2]int
	kinds         map[string]int
	kindBytes     map[string]int
	reqs          []wireRequest
}

// snapshot is what came since the last snapshot, and starts a new one
// (samples too).
func (w *wire) snapshot() wireCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := wireCounts{dials: w.dials, closes: w.closes, back: w.back, reads: w.reads, kinds: map[string]int{}, kindBytes: map[string]int{}, reqs: w.reqs}
	for _, r := range w.reqs {
		c.kinds[r.kind]++
		c.kindBytes[r.kind] += r.bytes
		c.sent += int64(r.bytes)
	}
	w.dials, w.closes, w.back, w.reads, w.reqs = 0, 0, 0, [2]int{}, nil
	clear(w.samples)
	return c
}

// quiet waits until no request came for d (at most limit).
func (w *wire) quiet(d, limit time.Duration) {
	end := time.Now().Add(limit)
	for time.Now().Before(end) {
		w.mu.Lock()
		last := time.Time{}
		if n := len(w.reqs); n > 0 {
			last = w.reqs[n-1].at
		}
		w.mu.Unlock()
		if time.Since(last) >= d {
			return
		}
		time.Sleep(d / 4)
	}
}

// sample is the first request of kind seen.
func (w *wire) sample(kind string) (wireRequest, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.samples[kind]
	return r, ok
}

// headerNames lists a request's header names, sorted.
func headerNames(h http.Header) []string {
	var names []string
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// compactJSON is body on one line, for printing.
func compactJSON(body []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, body) != nil {
		return string(body)
	}
	return b.String()
}
