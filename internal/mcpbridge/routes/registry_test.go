package routes

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"slices"
	"testing"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/signed"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// targetOf reaches a server where its status says, as the watcher does for
// a server without credentials.
func targetOf(s *Server) (upstream.Target, error) {
	return upstream.Target{Namespace: s.Namespace, Name: s.Name, URL: s.URL, Pod: s.Pod}, nil
}

// agentsCalling opens n session-era agent sessions (the bridge's real
// session manager) that each call the server's connection once, and so
// hold an upstream session each on it.
func agentsCalling(t *testing.T, conn *upstream.Conn, n int) {
	t.Helper()
	sealer, err := signed.New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	sessions := session.NewManager(sealer, session.Options{})
	for range n {
		s, err := sessions.Open(session.Claims{Subject: "system:serviceaccount:agents:a", Version: client.LatestLegacy})
		if err != nil {
			t.Fatal(err)
		}
		agent := &upstream.Agent{ID: s.ID, AtEnd: s.AtEnd}
		if _, err := conn.CallTool(testkit.Context(t), json.RawMessage(`{"name":"recall","arguments":{}}`), upstream.CallHooks{Agent: agent}); err != nil {
			t.Fatal(err)
		}
	}
}

// The Registry tells a server whose process ended from one that may still
// be serving, through to the real server that held its agents' sessions:
// after a crash (counted in the same status write that shows the new pod,
// or that takes the server out of the table) the old server is sent no
// DELETE, its sessions went with the process; after a rollout (a new pod,
// no crash counted) or a server stopped (out of the table, no crash) it
// is sent one per agent session, since it may still hold them.
func TestRegistryDeletesSessionsUnlessTheServerCrashed(t *testing.T) {
	newPod := func(url string) func(*v1alpha1.MCPServer) {
		return func(s *v1alpha1.MCPServer) { s.Status.Endpoint = &v1alpha1.Endpoint{URL: url, PodName: "pod-2"} }
	}
	crashed := func(s *v1alpha1.MCPServer) { s.Status.Restarts.Total, s.Status.Restarts.Consecutive = 1, 1 }
	notReady := func(s *v1alpha1.MCPServer) {
		s.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Crashed"}}
	}
	for _, tc := range []struct {
		name    string
		change  func(s *v1alpha1.MCPServer, newURL string)
		deletes bool
	}{
		{"crash, new pod", func(s *v1alpha1.MCPServer, url string) { newPod(url)(s); crashed(s) }, false},
		{"crash, out of the table", func(s *v1alpha1.MCPServer, _ string) { notReady(s); crashed(s) }, false},
		{"rollout, new pod", func(s *v1alpha1.MCPServer, url string) { newPod(url)(s) }, true},
		{"stopped, out of the table", func(s *v1alpha1.MCPServer, _ string) { notReady(s) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, next := bridgetest.NewStateful(t, false), bridgetest.NewStateful(t, false)
			published := bridgetest.Published(t, "ns", "s", old.URL, v1alpha1.ToolsSpec{})
			r := NewRegistry(upstream.Options{}, logr.Discard())
			r.Update(Build([]v1alpha1.MCPServer{published}), targetOf)
			_, conn, ok := r.Server("s")
			if !ok {
				t.Fatal("the published server is not served")
			}
			const agents = 3
			agentsCalling(t, conn, agents)

			changed := published.DeepCopy()
			tc.change(changed, next.URL)
			r.Update(Build([]v1alpha1.MCPServer{*changed}), targetOf)
			if err := conn.WaitClosed(testkit.Context(t)); err != nil {
				t.Fatal(err)
			}
			if d := old.Deleted(); tc.deletes && len(d) != agents || !tc.deletes && len(d) != 0 {
				t.Fatalf("the old server was sent DELETEs for sessions %q; want %d", d, map[bool]int{true: agents}[tc.deletes])
			}
		})
	}
}

// A stopping replica ends its agents' upstream sessions: Close DELETEs each at
// its server and returns once they are answered; the servers are no longer
// served, and a table given later is ignored: the servers are not left to
// expire them.
func TestCloseDeletesAgentSessions(t *testing.T) {
	a, b := bridgetest.NewStateful(t, false), bridgetest.NewStateful(t, true)
	servers := []v1alpha1.MCPServer{
		bridgetest.Published(t, "ns", "a", a.URL, v1alpha1.ToolsSpec{}),
		bridgetest.Published(t, "ns", "b", b.URL, v1alpha1.ToolsSpec{}),
	}
	probed := len(b.Deleted()) // the controller's probe's session
	r := NewRegistry(upstream.Options{}, logr.Discard())
	r.Update(Build(servers), targetOf)
	for _, name := range []string{"a", "b"} {
		_, conn, _ := r.Server(name)
		agentsCalling(t, conn, 2)
	}
	if err := r.Close(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}
	// b keeps sessions only: its shared connection is a session too.
	if da, db := a.Deleted(), b.Deleted()[probed:]; len(da) != 2 || len(db) != 3 {
		t.Fatalf("after Close: server a was sent DELETEs for %q, b for %q; want a's 2 agent sessions and b's 2 and its shared one", da, db)
	}
	r.Update(Build(servers), targetOf)
	if names := r.Names(); len(names) != 0 {
		t.Fatalf("after Close the registry serves %v; want nothing", names)
	}
	if _, _, ok := r.Server("a"); ok || slices.Contains(r.Names(), "a") {
		t.Fatal("server a is served after Close")
	}
}

// Close gives up when ctx ends: a server that never answers a DELETE does
// not hold a stopping replica past its grace. The DELETE that hangs is a
// fake in front of the real server (a real one answers at once).
func TestCloseIsBounded(t *testing.T) {
	st := bridgetest.NewStateful(t, false)
	published := bridgetest.Published(t, "ns", "s", st.URL, v1alpha1.ToolsSpec{})
	hang := hangingDeletes(t, st.URL)
	published.Status.Endpoint.URL = hang
	r := NewRegistry(upstream.Options{}, logr.Discard())
	r.Update(Build([]v1alpha1.MCPServer{published}), targetOf)
	_, conn, _ := r.Server("s")
	agentsCalling(t, conn, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Close(ctx); err == nil {
		t.Fatal("Close with its context ended returned no error while a DELETE hangs")
	}
}

// hangingDeletes is a fake in front of the real server at url that never
// answers a DELETE (until the client gives up), and passes on the rest.
func hangingDeletes(t *testing.T, url string) string {
	target, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	target.Path = ""
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			<-r.Context().Done()
			return
		}
		// Full duplex: else the proxy's transport may fail its last read
		// of a forwarded body the server closed as the answer started,
		// and cut the answer (golang/go#40747).
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return front.URL + "/mcp"
}
