package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

func serverWithTools(ns, name string, tools ...mcpv1alpha1.ToolStatus) mcpv1alpha1.MCPServer {
	return mcpv1alpha1.MCPServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Status:     mcpv1alpha1.MCPServerStatus{Tools: tools},
	}
}

func TestToolPolicyStatusMatches(t *testing.T) {
	tp := newToolPolicy("team", "p",
		mcpv1alpha1.ToolRule{Tools: []string{"mcp.fs.*", "mcp.*.search"}, Decision: mcpv1alpha1.DecisionAllow},
		mcpv1alpha1.ToolRule{Risks: []mcpv1alpha1.Risk{mcpv1alpha1.RiskDestructive}, Decision: mcpv1alpha1.DecisionDeny},
		// A condition does not narrow what the status counts: it depends on
		// each call's arguments.
		mcpv1alpha1.ToolRule{Tools: []string{"mcp.web.fetch"}, Decision: mcpv1alpha1.DecisionAsk, When: "args.url.startsWith('https://')"},
	)
	tp.Generation = 3
	servers := []mcpv1alpha1.MCPServer{
		serverWithTools("team", "zeta", tool("zeta", "search", mcpv1alpha1.RiskRead), tool("zeta", "other", mcpv1alpha1.RiskRead)),
		serverWithTools("team", "fs", tool("fs", "read", mcpv1alpha1.RiskRead), tool("fs", "write", mcpv1alpha1.RiskWrite)),
		serverWithTools("team", "fs-v2", tool("fs-v2", "read", mcpv1alpha1.RiskRead), tool("fs-v2", "wipe", mcpv1alpha1.RiskDestructive)),
		serverWithTools("team", "web", tool("web", "fetch", mcpv1alpha1.RiskNetwork)),
		serverWithTools("team", "idle"),
		serverWithTools("elsewhere", "fs", tool("fs", "read", mcpv1alpha1.RiskRead)),
	}
	st := toolPolicyStatus(tp, servers)
	if got, want := strings.Join(st.MatchedServers, ","), "fs,fs-v2,web,zeta"; got != want {
		t.Errorf("matchedServers = %s, want %s (sorted, this namespace only)", got, want)
	}
	if st.ToolCount != 5 {
		t.Errorf("toolCount = %d, want 5 (fs: 2, fs-v2: wipe, web: fetch, zeta: search)", st.ToolCount)
	}
	ready := meta.FindStatusCondition(st.Conditions, mcpv1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.Reason != mcpv1alpha1.ReasonCompiled || ready.ObservedGeneration != 3 || st.ObservedGeneration != 3 {
		t.Fatalf("status = %+v, want Ready True Compiled at generation 3", st)
	}
	if want := "3 tool rules, 0 resource rules, 0 prompt rules, 0 skill rules; its tool rules match 5 published tools of 4 servers"; !strings.Contains(ready.Message, want) {
		t.Errorf("message %q lacks %q", ready.Message, want)
	}
}

func TestToolPolicyStatusIsStable(t *testing.T) {
	tp := newToolPolicy("team", "p", mcpv1alpha1.ToolRule{Tools: []string{"mcp.fs.*"}, Decision: mcpv1alpha1.DecisionAllow})
	servers := []mcpv1alpha1.MCPServer{serverWithTools("team", "fs", tool("fs", "read", mcpv1alpha1.RiskRead))}
	first := toolPolicyStatus(tp, servers)
	// A transition long ago must be kept as it is, not stamped anew.
	for i := range first.Conditions {
		first.Conditions[i].LastTransitionTime = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	}
	tp.Status = first
	second := toolPolicyStatus(tp, servers)
	if len(second.Conditions) != 2 || !slices.Equal(second.Conditions, first.Conditions) {
		t.Errorf("recomputing changed the condition:\n%+v\n%+v", first.Conditions, second.Conditions)
	}
}

func TestToolPolicyStatusInvalid(t *testing.T) {
	tp := newToolPolicy("team", "p",
		mcpv1alpha1.ToolRule{Tools: []string{"mcp.fs.*"}, Decision: mcpv1alpha1.DecisionAllow, When: "args.x +"},
		mcpv1alpha1.ToolRule{Tools: []string{"mcp.fs.***"}, Decision: mcpv1alpha1.DecisionAllow},
	)
	// A policy that was Ready and then broke: matches are cleared, as the
	// policy is not in force.
	tp.Status = mcpv1alpha1.ToolPolicyStatus{MatchedServers: []string{"fs"}, ToolCount: 1}
	st := toolPolicyStatus(tp, []mcpv1alpha1.MCPServer{serverWithTools("team", "fs", tool("fs", "read", mcpv1alpha1.RiskRead))})
	ready := meta.FindStatusCondition(st.Conditions, mcpv1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != mcpv1alpha1.ReasonInvalid {
		t.Fatalf("Ready = %+v, want False Invalid", ready)
	}
	for _, want := range []string{"2 errors", "spec.rules[0].when: CEL: when:1:", "spec.rules[1].tools[0]: glob \"mcp.fs.***\" has a run of 3 '*'"} {
		if !strings.Contains(ready.Message, want) {
			t.Errorf("message %q lacks %q", ready.Message, want)
		}
	}
	if len(st.MatchedServers) != 0 || st.ToolCount != 0 {
		t.Errorf("an invalid policy reports matches: %v, %d", st.MatchedServers, st.ToolCount)
	}
	if w := meta.FindStatusCondition(st.Conditions, mcpv1alpha1.ConditionWarnings); w == nil || w.Status != metav1.ConditionUnknown || w.Reason != mcpv1alpha1.ReasonInvalid {
		t.Errorf("Warnings = %+v, want Unknown Invalid: a policy that does not compile is not linted", w)
	}
}

func TestToolPolicyStatusWarnings(t *testing.T) {
	read := tool("fs", "read_file", mcpv1alpha1.RiskRead)
	read.Arguments = []mcpv1alpha1.ToolArgument{{Name: "path", Holds: mcpv1alpha1.HoldsPath}}
	wipe := tool("fs", "wipe", mcpv1alpha1.RiskDestructive)
	servers := []mcpv1alpha1.MCPServer{serverWithTools("team", "fs", read, wipe)}
	tp := newToolPolicy("team", "p",
		mcpv1alpha1.ToolRule{Tools: []string{"mcp.fs.*"}, Decision: mcpv1alpha1.DecisionAllow},
		mcpv1alpha1.ToolRule{Tools: []string{"mcp.fs.read_file"}, Decision: mcpv1alpha1.DecisionDeny, When: "args.pth == '/'"},
	)
	st := toolPolicyStatus(tp, servers)
	w := meta.FindStatusCondition(st.Conditions, mcpv1alpha1.ConditionWarnings)
	if w == nil || w.Status != metav1.ConditionTrue || w.Reason != mcpv1alpha1.ReasonHasWarnings {
		t.Fatalf("Warnings = %+v, want True HasWarnings", w)
	}
	for _, want := range []string{"2 warnings", "spec.rules[0]: this allow reaches 1 destructive tool (mcp.fs.wipe)", `spec.rules[1].when: the condition reads args.pth, but none of the 1 tool the rule matches takes an argument "pth" (they take path)`} {
		if !strings.Contains(w.Message, want) {
			t.Errorf("message %q lacks %q", w.Message, want)
		}
	}
	if ready := meta.FindStatusCondition(st.Conditions, mcpv1alpha1.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v: a policy with warnings is in force", ready)
	}
	// A server of another namespace is not the policy's.
	servers[0].Namespace = "elsewhere"
	w = meta.FindStatusCondition(toolPolicyStatus(tp, servers).Conditions, mcpv1alpha1.ConditionWarnings)
	if want := `spec.rules[0].tools: MCPServer "fs" does not exist in this namespace`; !strings.Contains(w.Message, want) || strings.Contains(w.Message, "mcp.fs.wipe") {
		t.Errorf("message %q: want %q and nothing from another namespace's catalog", w.Message, want)
	}
}

func TestInvalidMessageIsBounded(t *testing.T) {
	var rules []mcpv1alpha1.ToolRule
	for range 300 {
		rules = append(rules, mcpv1alpha1.ToolRule{Tools: []string{"fs.read_file_with_a_rather_long_name"}, Decision: mcpv1alpha1.DecisionAllow})
	}
	st := toolPolicyStatus(newToolPolicy("team", "p", rules...), nil)
	msg := st.Conditions[0].Message
	if len(msg) > maxConditionMessage || !strings.HasSuffix(msg, " …") || !strings.Contains(msg, "300 errors") {
		t.Errorf("message of %d bytes, want at most %d, cut with an ellipsis and counting 300 errors", len(msg), maxConditionMessage)
	}
}
