package mcpbridge

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	mcpclient "github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// startRuntime runs the whole bridge (Start) against envtest, serving ns.
func startRuntime(t *testing.T, namespaces ...string) (*Runtime, string, client.Client, *bridgetest.Sink) {
	t.Helper()
	rt, url, k, sink := startRuntimeWith(t, nil, namespaces...)
	return rt, url, k, sink
}

// runtimeSinks remembers each runtime's audit sink, for eventsFrom.
var runtimeSinks sync.Map

// eventsFrom are the audit events a runtime wrote so far.
func (h *harness) eventsFrom(t *testing.T, rt *Runtime) []map[string]any {
	t.Helper()
	sink, _ := runtimeSinks.Load(rt)
	return (&harness{audit: rt.Audit, sink: sink.(*bridgetest.Sink)}).events(t)
}

// startRuntimeWith is startRuntime with the bridge's config changed by mod.
func startRuntimeWith(t *testing.T, mod func(*Options), namespaces ...string) (*Runtime, string, client.Client, *bridgetest.Sink) {
	t.Helper()
	cfg, cs := startAPIServer(t)
	for _, ns := range namespaces {
		ensureNamespace(t, cs, ns)
	}
	k, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sink := &bridgetest.Sink{}
	opts := Options{
		Rest: cfg, Namespaces: namespaces, Auth: testCallers,
		SessionKey: testKey, AuditSink: sink, ArtifactDir: t.TempDir(), Log: testr.New(t),
		Bridge: Config{CallTimeout: 30 * time.Second},
	}
	if mod != nil {
		mod(&opts)
	}
	rt, err := Start(ctx, opts)
	if err != nil {
		cancel()
		t.Fatalf("while starting the bridge: %v", err)
	}
	runtimeSinks.Store(rt, sink)
	srv := httptest.NewServer(rt.Handler)
	t.Cleanup(func() {
		srv.Close()
		cancel()
		if err := rt.Wait(); err != nil {
			t.Errorf("the watcher ended with %v", err)
		}
		c, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		_ = rt.Audit.Close(c)
	})
	return rt, srv.URL, k, sink
}

// apply creates the MCPServer and writes its status, as the controller would.
func apply(t *testing.T, k client.Client, s v1alpha1.MCPServer) *v1alpha1.MCPServer {
	t.Helper()
	ctx := context.Background()
	obj := s.DeepCopy()
	obj.ResourceVersion, obj.CreationTimestamp = "", metav1.Time{}
	st := obj.Status
	if err := k.Create(ctx, obj); err != nil {
		t.Fatalf("while creating MCPServer %s: %v", s.Name, err)
	}
	obj.Status = st
	if err := k.Status().Update(ctx, obj); err != nil {
		t.Fatalf("while writing the status of %s: %v", s.Name, err)
	}
	return obj
}

// updateStatus changes an MCPServer's status as the controller would.
func updateStatus(t *testing.T, k client.Client, obj *v1alpha1.MCPServer, change func(*v1alpha1.MCPServerStatus)) {
	t.Helper()
	ctx := context.Background()
	for {
		var cur v1alpha1.MCPServer
		if err := k.Get(ctx, client.ObjectKeyFromObject(obj), &cur); err != nil {
			t.Fatal(err)
		}
		change(&cur.Status)
		err := k.Status().Update(ctx, &cur)
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "modified") {
			t.Fatal(err)
		}
	}
}

func createPolicy(t *testing.T, k client.Client, p v1alpha1.ToolPolicy) {
	t.Helper()
	if err := k.Create(context.Background(), p.DeepCopy()); err != nil {
		t.Fatalf("while creating ToolPolicy %s: %v", p.Name, err)
	}
}

// callDuringRestart starts a long call and, once it has gone through fwd
// to the server, reports a new pod after the given number of consecutive
// crashes, and returns how the call ended.
func callDuringRestart(t *testing.T, c *mcpclient.Client, fwd *bridgetest.Forwarder, k client.Client, obj *v1alpha1.MCPServer, pod string, crashes int32) error {
	t.Helper()
	before := fwd.Calls()
	errc := make(chan error, 1)
	go func() {
		_, err := c.CallTool(testkit.Context(t), "mcp.everything.trigger-long-running-operation", json.RawMessage(`{"duration":20,"steps":20}`))
		errc <- err
	}()
	testkit.Eventually(t, "the call reaches the server", func() bool { return fwd.Calls() > before })
	updateStatus(t, k, obj, func(s *v1alpha1.MCPServerStatus) {
		s.Endpoint.PodName = pod
		s.Restarts.Total, s.Restarts.Consecutive = crashes, crashes
	})
	select {
	case err := <-errc:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight did not end when the server restarted")
		return nil
	}
}

func connectTo(t *testing.T, url, token string, era mcpclient.Era) *mcpclient.Client {
	h := &harness{url: url}
	return h.connect(t, token, "/mcp", era)
}

// TestRoutingFromMCPServerStatus: the bridge serves what MCPServer status
// says, follows it through a restart (calls in flight fail with the reason,
// never replayed) and drops a server that is no longer Ready.
func TestRoutingFromMCPServerStatus(t *testing.T) {
	rt, url, k, sink := startRuntime(t, "routing")
	up := testpeers.NodeEverything(t)
	fwd := bridgetest.Forward(t, strings.TrimSuffix(strings.TrimPrefix(up.URL, "http://"), "/mcp"), "/mcp")
	obj := apply(t, k, bridgetest.Published(t, "routing", "everything", fwd.URL, v1alpha1.ToolsSpec{}))
	createPolicy(t, k, toolPolicy("routing", "agents", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.*")))

	c := connectTo(t, url, "alice-token", mcpclient.EraSession)
	testkit.Eventually(t, "the bridge lists the server's tools", func() bool {
		items, err := c.ListTools(testkit.Context(t), mcpclient.Limits{})
		return err == nil && len(items) > 5
	})
	if _, err := c.CallTool(testkit.Context(t), "mcp.everything.echo", json.RawMessage(`{"message":"hi"}`)); err != nil {
		t.Fatal(err)
	}
	// The cache keeps what the bridge reads (the status' tools), not the
	// managedFields the API server keeps.
	var stored, cached v1alpha1.MCPServer
	if err := k.Get(testkit.Context(t), client.ObjectKeyFromObject(obj), &stored); err != nil {
		t.Fatal(err)
	}
	if err := rt.Watcher.Cache.Get(testkit.Context(t), client.ObjectKeyFromObject(obj), &cached); err != nil {
		t.Fatal(err)
	}
	if len(stored.ManagedFields) == 0 || len(cached.ManagedFields) != 0 || len(cached.Status.Tools) != len(stored.Status.Tools) {
		t.Fatalf("managedFields: %d stored, %d cached; tools: %d stored, %d cached",
			len(stored.ManagedFields), len(cached.ManagedFields), len(stored.Status.Tools), len(cached.Status.Tools))
	}

	// A call in flight when the controller reports a new pod fails with
	// mcp_server_restarted.
	if err := callDuringRestart(t, c, fwd, k, obj, "pod-2", 1); rpcCode(err) != CodeUpstream || !strings.Contains(err.Error(), "mcp_server_restarted") {
		t.Fatalf("the call in flight ended with %v, want mcp_server_restarted", err)
	}
	fctx, fcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer fcancel()
	if err := rt.Audit.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sink.String(), `"reason":"mcp_server_restarted"`) {
		t.Fatal("no tool.failed with mcp_server_restarted in the audit stream")
	}
	if !strings.Contains(sink.String(), `"type":"mcp.server.crashed","session":"","subject":"","server":"everything","namespace":"routing"`) {
		t.Fatalf("no mcp.server.crashed in the audit stream:\n%s", sink.String())
	}
	// The next call goes to the new connection.
	if _, err := c.CallTool(testkit.Context(t), "mcp.everything.echo", json.RawMessage(`{"message":"again"}`)); err != nil {
		t.Fatalf("a call after the restart: %v", err)
	}

	// Metrics and readiness, on their own listener; not on the agents' port.
	ops := httptest.NewServer(rt.OpsHandler)
	defer ops.Close()
	for _, path := range []string{"/metrics", "/readyz", "/healthz"} {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s on the agents' port: %d, want 404", path, resp.StatusCode)
		}
	}
	for path, want := range map[string]string{
		"/metrics": `mcp_bridge_tool_calls_total{decision="allow",outcome="ok",server="everything",tool="mcp.everything.echo"} 2`,
		"/readyz":  "ok",
		"/healthz": "ok",
	} {
		resp, err := http.Get(ops.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Fatalf("%s: %d, want it to hold %q:\n%s", path, resp.StatusCode, want, body)
		}
		// alice's upstream session went with the crashed server's process.
		if closed := `mcp_bridge_upstream_sessions_closed_total{reason="retired",server="everything"} 1`; path == "/metrics" && !strings.Contains(string(body), closed) {
			t.Fatalf("/metrics does not hold %q:\n%s", closed, body)
		}
	}

	// Crashing again: calls in flight now fail mcp_server_unstable.
	if err := callDuringRestart(t, c, fwd, k, obj, "pod-3", 2); !strings.Contains(err.Error(), "mcp_server_unstable") {
		t.Fatalf("the second crash ended the call with %v, want mcp_server_unstable", err)
	}

	// Not Ready, restarting: the server is not served, but its tools stay
	// listed; a call is told the server restarts.
	updateStatus(t, k, obj, func(s *v1alpha1.MCPServerStatus) {
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonRestarting, Message: "backoff"})
	})
	testkit.Eventually(t, "a server that is not Ready is no longer served", func() bool {
		return len(rt.Registry.Names()) == 0
	})
	if names := listNames(t, c); len(names) == 0 {
		t.Fatal("the tools of a restarting server are withdrawn")
	}
	if _, err := c.CallTool(testkit.Context(t), "mcp.everything.echo", json.RawMessage(`{"message":"hi"}`)); rpcCode(err) != CodeServerAway || !strings.Contains(err.Error(), "Restarting") {
		t.Fatalf("a call while the server restarts: %v, want CodeServerAway (Restarting)", err)
	}
	// Given up: the catalog is withdrawn.
	updateStatus(t, k, obj, func(s *v1alpha1.MCPServerStatus) {
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonPermanentlyFailed, Message: "gave up"})
	})
	testkit.Eventually(t, "the tools of a server that gave up are withdrawn", func() bool {
		return len(listNames(t, c)) == 0
	})
}
