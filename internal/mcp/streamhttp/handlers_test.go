package streamhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
)

// askingServer answers a tools/call on an SSE stream that first carries a
// request of its own (elicitation/create), then, unless holdAnswer, the
// call's response without waiting for the reply; with holdAnswer the
// stream stays open until the request ends. Replies are accepted (202).
func askingServer(t *testing.T, holdAnswer bool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if m.Method != "tools/call" {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"ask-1\",\"method\":\"elicitation/create\",\"params\":{\"message\":\"who?\"}}\n\n")
		w.(http.Flusher).Flush()
		if holdAnswer {
			<-r.Context().Done()
			return
		}
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}\n\n", m.ID)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// callWaitingHandler makes a call to srv whose handler of the server's
// request calls asked, waits for its context to end, and returns why it
// ended.
func callWaitingHandler(ctx context.Context, t *testing.T, srv *httptest.Server, asked func()) (cause error, callErr error) {
	t.Helper()
	c, err := New(Options{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx = WithCallRequests(ctx, func(ctx context.Context, _ *jsonrpc.Message) *jsonrpc.Message {
		asked()
		<-ctx.Done()
		cause = context.Cause(ctx)
		return nil
	})
	// Call returns once its handlers have.
	_, callErr = c.Call(ctx, &jsonrpc.Message{JSONRPC: jsonrpc.Version, Method: "tools/call", Params: json.RawMessage(`{"name":"ask"}`)})
	return cause, callErr
}

// A handler still waiting when the server answers the call is told that the
// server answered it, not only "context canceled".
func TestHandlerToldTheServerAnsweredTheCall(t *testing.T) {
	cause, err := callWaitingHandler(context.Background(), t, askingServer(t, false), func() {})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(cause, ErrCallAnswered) {
		t.Fatalf("the handler was told %v, want %v", cause, ErrCallAnswered)
	}
}

// A call its caller ends tells its handlers the caller's cause.
func TestHandlerToldWhyTheCallerEndedTheCall(t *testing.T) {
	gone := errors.New("the agent went away")
	ctx, cancel := context.WithCancelCause(context.Background())
	// The caller gives up once the server's request reached the handler.
	cause, err := callWaitingHandler(ctx, t, askingServer(t, true), func() { cancel(gone) })
	if err == nil {
		t.Fatal("a call its caller ended succeeded")
	}
	if !errors.Is(cause, gone) {
		t.Fatalf("the handler was told %v, want %v", cause, gone)
	}
}

// TestCallEndGivesTheCallersCause: a call its caller ended without the answer
// tells its handlers the caller's cause, even when it returns as a broken
// stream would. That happens when the caller's cancel closes the body
// (readBody's AfterFunc) before it reaches hctx: the caller's context ends its
// children in no set order, which a test cannot time, so callEnd is given here
// the state it sees then; it must not say ErrCallBroke. A call that has its
// answer says so, even if its caller's end landed just after it.
func TestCallEndGivesTheCallersCause(t *testing.T) {
	answer := &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: json.RawMessage(`1`), Result: json.RawMessage(`{}`)}
	ended, end := context.WithCancelCause(context.Background())
	why := errors.New("the agent went away")
	end(why)
	if got := callEnd(ended, nil); got != why {
		t.Fatalf("a call its caller ended without the answer tells its handlers %v, want %v", got, why)
	}
	if got := callEnd(ended, answer); got != ErrCallAnswered {
		t.Fatalf("a call answered as its caller ended tells its handlers %v, want %v", got, ErrCallAnswered)
	}
	live := context.Background()
	if got := callEnd(live, nil); got != ErrCallBroke {
		t.Fatalf("a call whose stream ended without the answer tells its handlers %v, want %v", got, ErrCallBroke)
	}
	if got := callEnd(live, answer); got != ErrCallAnswered {
		t.Fatalf("an answered call tells its handlers %v, want %v", got, ErrCallAnswered)
	}
}
