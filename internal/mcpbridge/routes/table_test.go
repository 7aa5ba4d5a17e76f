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
