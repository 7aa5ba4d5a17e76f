package routes

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/go-logr/logr"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
)

// Callers' own connections: one per caller, carrying the caller's
// credential and not the operator's bearer token, each refreshed token on
// the next request, and retired with the server's own connection.
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
	call := func(cc *CallerConn) error {
		_, err := cc.CallTool(ctxT(t), json.RawMessage(`{"name":"recall","arguments":{}}`), upstream.CallHooks{})
		return err
	}
	if err := call(alice); !errors.Is(err, errNoCredential) {
		t.Fatalf("a call before the caller's credential was set: %v, want it refused unsent", err)
	}
	alice.SetCredential(http.Header{"Authorization": {"Bearer alice-1"}})
	bob.SetCredential(http.Header{"Authorization": {"Bearer bob-1"}})
	for _, cc := range []*CallerConn{alice, bob, alice} {
		if err := call(cc); err != nil {
			t.Fatal(err)
		}
	}
	alice.SetCredential(http.Header{"Authorization": {"Bearer alice-2"}}) // refreshed
	if err := call(alice); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rq := range st.Requests() {
		if rq.Method == "tools/call" {
			got = append(got, rq.Header.Get("Authorization"))
		}
	}
	want := []string{"Bearer alice-1", "Bearer bob-1", "Bearer alice-1", "Bearer alice-2"}
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
