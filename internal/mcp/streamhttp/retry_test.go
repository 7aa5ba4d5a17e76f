package streamhttp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
)

// closingServer answers every POST with a JSON response, except the
// request of method drop, whose connection it closes the first time
// without answering, having read the request. That is what a client sees
// when its request crosses the server's idle timeout on a reused
// connection (the server closes, the request is in flight); that crossing
// cannot be timed in a test, the close can. It counts each method's
// requests.
func closingServer(t *testing.T, drop string) (*httptest.Server, func(method string) int) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		seen[req.Method]++
		first := seen[req.Method] == 1
		mu.Unlock()
		if req.Method == drop && first {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			conn.Close()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`, req.ID)
	}))
	t.Cleanup(srv.Close)
	return srv, func(method string) int {
		mu.Lock()
		defer mu.Unlock()
		return seen[method]
	}
}

// A list request whose reused connection dies before any byte of the answer is
// sent again (here once, on a new connection: the pool holds no other): the
// caller gets the list, not the dead connection's EOF.
func TestIdempotentRequestRetriedOnADeadReusedConnection(t *testing.T) {
	srv, seen := closingServer(t, "tools/list")
	c, err := New(Options{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	call := func(method string) error {
		_, err := c.Call(context.Background(), &jsonrpc.Message{JSONRPC: jsonrpc.Version, Method: method, Params: json.RawMessage(`{}`)})
		return err
	}
	if err := call("ping"); err != nil { // opens the connection tools/list reuses
		t.Fatal(err)
	}
	if err := call("tools/list"); err != nil {
		t.Fatalf("tools/list on a reused connection the server closed: %v", err)
	}
	if n := seen("tools/list"); n != 2 {
		t.Fatalf("the server saw tools/list %d times, want 2 (the dropped one and its retry)", n)
	}
}

// A tools/call is never sent twice: the server may have run it before the
// connection died. The caller gets the failure.
func TestCallNotRetriedOnADeadReusedConnection(t *testing.T) {
	callSentOnce(t, Options{})
}

// A tools/call is sent once even when the server's credential headers carry a
// key that has net/http send a request again (Idempotency-Key,
// X-Idempotency-Key): either would make every call replayable.
func TestCallNotRetriedWithIdempotencyKeyInTheHeaders(t *testing.T) {
	for _, key := range []string{"Idempotency-Key", "X-Idempotency-Key"} {
		t.Run(key, func(t *testing.T) {
			callSentOnce(t, Options{Header: http.Header{key: {"from-the-credentials"}}})
		})
	}
}

// callSentOnce has a Conn with opts (its URL set here) send a tools/call
// on a reused connection the server closes having read it, and fails the
// test unless the call fails and the server saw it once.
func callSentOnce(t *testing.T, opts Options) {
	t.Helper()
	srv, seen := closingServer(t, "tools/call")
	opts.URL = srv.URL
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Call(context.Background(), &jsonrpc.Message{JSONRPC: jsonrpc.Version, Method: "ping"}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Call(context.Background(), &jsonrpc.Message{JSONRPC: jsonrpc.Version, Method: "tools/call", Params: json.RawMessage(`{"name":"echo"}`)})
	if err == nil {
		t.Fatal("a tools/call whose connection died before the answer succeeded")
	}
	if n := seen("tools/call"); n != 1 {
		t.Fatalf("the server saw tools/call %d times, want 1", n)
	}
}
