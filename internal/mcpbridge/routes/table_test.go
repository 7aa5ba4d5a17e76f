package routes

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

func server(ns, name string, age time.Duration, mod func(*v1alpha1.MCPServer)) v1alpha1.MCPServer {
	var s v1alpha1.MCPServer
	s.Namespace, s.Name = ns, name
	s.CreationTimestamp = metav1.NewTime(time.Unix(1_800_000_000, 0).Add(-age))
	s.Status.Endpoint = &v1alpha1.Endpoint{URL: "http://10.0.0.1:8080/mcp", PodName: name + "-pod"}
	s.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue}}
	s.Status.Tools = []v1alpha1.ToolStatus{{Name: "mcp." + name + ".t", UpstreamName: "t", Risk: "read", SchemaDigest: "sha256:1"}}
	if mod != nil {
		mod(&s)
	}
	return s
}

func TestBuild(t *testing.T) {
	notReady := func(s *v1alpha1.MCPServer) {
		s.Status.Conditions[0].Status = metav1.ConditionFalse
		s.Status.Restarts = v1alpha1.RestartStatus{Total: 3, Consecutive: 1} // a crash takes it out
	}
	noEndpoint := func(s *v1alpha1.MCPServer) { s.Status.Endpoint = nil }
	suspended := func(s *v1alpha1.MCPServer) { s.Spec.Suspend = true }
	conflict := func(s *v1alpha1.MCPServer) {
		s.Status.Conditions = append(s.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionNameConflict, Status: metav1.ConditionTrue})
	}
	tbl := Build([]v1alpha1.MCPServer{
		server("a", "fs", time.Hour, nil),
		server("b", "fs", time.Minute, nil), // same name, newer: the older keeps it
		server("a", "down", time.Hour, notReady),
		server("a", "nowhere", time.Hour, noEndpoint),
		server("a", "paused", time.Hour, suspended),
		server("b", "dup", time.Hour, conflict),
		server("b", "git", time.Hour, nil),
	})
	if !slices.Equal(tbl.Names, []string{"fs", "git"}) {
		t.Fatalf("served %v, want [fs git]", tbl.Names)
	}
	if tbl.Servers["fs"].Namespace != "a" {
		t.Fatalf("the older fs must keep the name, got namespace %s", tbl.Servers["fs"].Namespace)
	}
	if tool := tbl.Servers["git"].Tools["t"]; tool.SchemaDigest != "sha256:1" || tool.Risk != "read" {
		t.Fatalf("published tool not carried: %+v", tool)
	}
	// The Registry tells a crash from a server stopped by the restart
	// count of a server no longer served.
	if rs, ok := tbl.Restarts["a/down"]; !ok || rs.Total != 3 {
		t.Fatalf("restarts of the not-Ready server a/down: %+v, %v; want Total 3", rs, ok)
	}
}

func TestRetireReason(t *testing.T) {
	if r := retireReason(v1alpha1.RestartStatus{Consecutive: 1}); r != "mcp_server_restarted" {
		t.Fatal(r)
	}
	if r := retireReason(v1alpha1.RestartStatus{Consecutive: 2}); r != "mcp_server_unstable" {
		t.Fatal(r)
	}
}

// TestBuildAway: servers with a published catalog that are not served are
// away with their Ready reason; suspended, deleted, conflicting and
// never-probed servers are not; a served name is never away. A server with
// no catalog published (never probed, or withdrawn when it went down) is
// down with its reason, unless suspended.
func TestBuildAway(t *testing.T) {
	next := metav1.NewMicroTime(time.Unix(1_800_000_003, 0))
	reason := func(r string) func(*v1alpha1.MCPServer) {
		return func(s *v1alpha1.MCPServer) {
			s.Status.Endpoint = nil
			s.Status.Conditions[0].Status, s.Status.Conditions[0].Reason, s.Status.Conditions[0].Message = metav1.ConditionFalse, r, "why "+r
			if r == v1alpha1.ReasonRestarting {
				s.Status.Restarts.NextRestartTime = &next
			}
		}
	}
	tbl := Build([]v1alpha1.MCPServer{
		server("a", "fs", time.Hour, nil),
		server("b", "fs", time.Minute, reason(ReasonSleeping)), // the name is served by a/fs
		server("a", "sleepy", time.Hour, reason(ReasonSleeping)),
		server("a", "crashy", time.Hour, reason(v1alpha1.ReasonRestarting)),
		server("a", "gone", time.Hour, reason(v1alpha1.ReasonPermanentlyFailed)),
		server("a", "nopull", time.Hour, reason(v1alpha1.ReasonImagePullFailed)),
		server("a", "paused", time.Hour, func(s *v1alpha1.MCPServer) { reason(v1alpha1.ReasonSuspended)(s); s.Spec.Suspend = true }),
		server("a", "new", time.Hour, func(s *v1alpha1.MCPServer) { reason(v1alpha1.ReasonStarting)(s); s.Status.Tools = nil }),
		server("a", "withdrawn", time.Hour, func(s *v1alpha1.MCPServer) { reason(v1alpha1.ReasonImagePullFailed)(s); s.Status.Tools = nil }),
		server("a", "stopped", time.Hour, func(s *v1alpha1.MCPServer) {
			reason(v1alpha1.ReasonSuspended)(s)
			s.Spec.Suspend, s.Status.Tools = true, nil
		}),
	})
	for name, want := range map[string]struct {
		reason              string
		expected, retryable bool
	}{
		"sleepy": {ReasonSleeping, true, true},
		"crashy": {v1alpha1.ReasonRestarting, true, true},
		"gone":   {v1alpha1.ReasonPermanentlyFailed, false, false},
		"nopull": {v1alpha1.ReasonImagePullFailed, false, true},
	} {
		a := tbl.Away[name]
		if a == nil || a.Reason != want.reason || a.Message != "why "+want.reason || a.Expected() != want.expected || a.Retryable() != want.retryable {
			t.Fatalf("%s: %+v, want %+v", name, a, want)
		}
	}
	if !tbl.Away["crashy"].RetryAt.Equal(next.Time) {
		t.Fatalf("crashy retries at %v, want nextRestartTime %v", tbl.Away["crashy"].RetryAt, next.Time)
	}
	if len(tbl.Away) != 4 {
		t.Fatalf("away: %d servers, want 4 (not fs, paused, new)", len(tbl.Away))
	}
	if d := tbl.Down["withdrawn"]; d == nil || d.Reason != v1alpha1.ReasonImagePullFailed || d.Message != "why ImagePullFailed" || !d.Retryable() {
		t.Fatalf("withdrawn: %+v, want down with ImagePullFailed", d)
	}
	if d := tbl.Down["new"]; d == nil || d.Reason != v1alpha1.ReasonStarting {
		t.Fatalf("new: %+v, want down, Starting", d)
	}
	if len(tbl.Down) != 2 {
		t.Fatalf("down: %v, want withdrawn and new (not the suspended stopped, nor any away or served)", tbl.Down)
	}
}

// TestAwayCatalog: a server away lists the live catalog it had while the
// published digest is the same, else what status publishes.
func TestAwayCatalog(t *testing.T) {
	s := serverOf(&[]v1alpha1.MCPServer{server("a", "fs", time.Hour, nil)}[0])
	c := statusCatalog(s)
	if len(c.Tools) != 1 || c.ByName["t"].Name != "mcp.fs.t" || c.ByName["t"].Risk != "read" ||
		string(c.ByName["t"].Definition) != `{"inputSchema":{"type":"object"},"name":"t"}` {
		t.Fatalf("status catalog: %+v", c.Tools[0])
	}
	live := &Catalog{ByName: map[string]*Tool{}}
	live.add(s, "mcp.fs.t", "t", s.Tools["t"], []byte(`{"name":"t","inputSchema":{"type":"object","properties":{"p":{"type":"string"}}}}`))
	live.add(s, "mcp.fs.old", "old", v1alpha1.ToolStatus{}, []byte(`{"name":"old"}`)) // no longer published
	moved := rebound(live, s)
	if len(moved.Tools) != 1 || moved.Tools[0].Server != s || !slices.Equal(moved.Tools[0].Definition, live.ByName["t"].Definition) {
		t.Fatalf("rebound: %+v", moved.Tools)
	}
}
