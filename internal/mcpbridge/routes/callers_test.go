package routes

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// Callers' own connections: one per caller, carrying the caller's
// credential and not the operator's bearer token, each refreshed token on
// the next request, over the server's own TCP connections, and retired
// with the server's own connection.
func TestCallerConns(t *testing.T) {
	st := bridgetest.NewStateful(t, false)
	server := bridgetest.Published(t, "tools", "stateful", st.URL, v1alpha1.ToolsSpec{})
	r := NewRegistry(upstream.Options{}, logr.Discard())
	withOperatorToken := func(s *Server) (upstream.Target, error) {
		tg, err := targetOf(s)
		tg.BearerToken = "operator-token"
		return tg, err
	}
	r.Update(Build([]v1alpha1.MCPServer{server}), withOperatorToken)

	alice, ok := r.CallerConn("stateful", "alice")
	bob, _ := r.CallerConn("stateful", "bob")
	again, _ := r.CallerConn("stateful", "alice")
	_, own, _ := r.Server("stateful")
	if !ok || alice != again || alice.Conn == bob.Conn || alice.Conn == own {
		t.Fatal("want one connection per caller, apart from the server's own")
	}
	if _, ok := r.CallerConn("absent", "alice"); ok {
		t.Fatal("a caller's connection to a server that is not served")
	}
	callIn := func(ctx context.Context, cc *CallerConn) error {
		_, err := cc.CallTool(ctx, json.RawMessage(`{"name":"recall","arguments":{}}`), upstream.CallHooks{})
		return err
	}
	call := func(cc *CallerConn) error { return callIn(testkit.Context(t), cc) }
	if err := call(alice); !errors.Is(err, errNoCredential) {
		t.Fatalf("a call before the caller's credential was set: %v, want it refused unsent", err)
	}
	as := func(cc *CallerConn, token string) context.Context {
		return cc.WithCredential(testkit.Context(t), http.Header{"Authorization": {"Bearer " + token}})
	}
	conns := st.Conns()
	for _, ctx := range []struct {
		cc    *CallerConn
		token string
	}{{alice, "alice-1"}, {bob, "bob-1"}, {alice, "alice-1"}, {alice, "alice-2"}} {
		if err := callIn(as(ctx.cc, ctx.token), ctx.cc); err != nil {
			t.Fatal(err)
		}
	}
	// Two calls of alice's presenting two tokens, the first delayed until
	// the second's credential is set: each carries its own.
	first := as(alice, "alice-3")
	second := as(alice, "alice-4")
	if err := callIn(second, alice); err != nil {
		t.Fatal(err)
	}
	if err := callIn(first, alice); err != nil {
		t.Fatal(err)
	}
	if n := st.Conns() - conns; n > 1 {
		// Sequential requests reuse one idle connection of the pool.
		t.Fatalf("two callers' sequential calls opened %d TCP connections, want the pool's one", n)
	}
	var got []string
	for _, rq := range st.Requests() {
		if rq.Method == "tools/call" {
			got = append(got, rq.Header.Get("Authorization"))
		}
	}
	want := []string{"Bearer alice-1", "Bearer bob-1", "Bearer alice-1", "Bearer alice-2", "Bearer alice-4", "Bearer alice-3"}
	if len(got) != len(want) {
		t.Fatalf("the server got calls with %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("the server got calls with %q, want %q", got, want)
		}
	}

	// The server leaves the table: its callers' connections go with its own.
	r.Update(Build(nil), withOperatorToken)
	var ue *upstream.Error
	if err := call(bob); !errors.As(err, &ue) || ue.Reason != upstream.ReasonUnavailable {
		t.Fatalf("a caller's connection to a server that left: %v, want %s", err, upstream.ReasonUnavailable)
	}
}

// A caller's connection idle for CallerIdle is closed by the server's own
// timer, with no further call to the server; one in use is kept.
func TestCallerConnsClosedWhenIdle(t *testing.T) {
	st := bridgetest.NewStateful(t, false)
	server := bridgetest.Published(t, "tools", "stateful", st.URL, v1alpha1.ToolsSpec{})
	r := NewRegistry(upstream.Options{}, logr.Discard())
	r.CallerIdle = 100 * time.Millisecond
	r.Update(Build([]v1alpha1.MCPServer{server}), targetOf)
	t.Cleanup(func() { r.Update(Build(nil), targetOf) })
	callers := func() int {
		r.mu.RLock()
		e := r.entries["stateful"]
		r.mu.RUnlock()
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.callers)
	}
	alice, _ := r.CallerConn("stateful", "alice")
	ctx := alice.WithCredential(testkit.Context(t), http.Header{"Authorization": {"Bearer alice-1"}})
	if _, err := alice.CallTool(ctx, json.RawMessage(`{"name":"recall","arguments":{}}`), upstream.CallHooks{}); err != nil {
		t.Fatal(err)
	}
	bob, _ := r.CallerConn("stateful", "bob")
	// bob keeps calling; alice does not.
	deadline := time.Now().Add(5 * time.Second)
	for callers() > 1 && time.Now().Before(deadline) {
		bob.WithCredential(testkit.Context(t), http.Header{"Authorization": {"Bearer bob-1"}})
		time.Sleep(20 * time.Millisecond)
	}
	if n := callers(); n != 1 {
		t.Fatalf("%d callers' connections after alice's idled out, want bob's alone", n)
	}
	if again, _ := r.CallerConn("stateful", "alice"); again == alice {
		t.Fatal("alice's idle connection was kept")
	}
}
