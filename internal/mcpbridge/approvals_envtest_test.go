package mcpbridge

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/approval"
	mcpclient "github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// waitingApproval waits for the one Pending ToolApproval of ns whose target
// is target and returns it.
func waitingApproval(t *testing.T, k client.Client, ns, target string) *v1alpha1.ToolApproval {
	t.Helper()
	var found *v1alpha1.ToolApproval
	eventually(t, "a ToolApproval for "+target+" appears", func() bool {
		var list v1alpha1.ToolApprovalList
		if err := k.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			a := &list.Items[i]
			if a.Spec.Request.Target == target && a.Spec.Decision == nil && a.Status.Phase == v1alpha1.ApprovalPending {
				found = a
				return true
			}
		}
		return false
	})
	return found
}

func decideApproval(t *testing.T, k client.Client, a *v1alpha1.ToolApproval, v v1alpha1.ApprovalVerdict, who, comment string) {
	t.Helper()
	a = a.DeepCopy()
	a.Spec.Decision = &v1alpha1.ApprovalDecision{Verdict: v, Decider: who, Comment: comment}
	if err := k.Update(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

type callResult struct {
	res json.RawMessage
	err error
}

func callAsync(c *mcpclient.Client, tool, args string) <-chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		res, err := c.CallTool(ctx, tool, json.RawMessage(args))
		ch <- callResult{res, err}
	}()
	return ch
}

// callWithProgressAsync is callAsync with a progress token.
func callWithProgressAsync(c *mcpclient.Client, tool, args, token string) <-chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		params := `{"name":"` + tool + `","arguments":` + args + `,"_meta":{"progressToken":"` + token + `"}}`
		res, err := c.CallToolParams(ctx, json.RawMessage(params))
		ch <- callResult{res, err}
	}()
	return ch
}

func eventOf(events []map[string]any, typ, toolCallID string) map[string]any {
	for _, ev := range events {
		if ev["type"] == typ && ev["toolCallId"] == toolCallID {
			return ev
		}
	}
	return nil
}

// TestAPersonDecidesThroughAToolApproval: an agent whose client cannot be
// asked calls tools a policy asks about through ToolApprovals; the call
// waits, a person approves (the call runs) or denies (-32010
// denied_by_approver), and nobody deciding expires it (approval_timeout).
// The audit chain names the approval and the approver.
func TestAPersonDecidesThroughAToolApproval(t *testing.T) {
	const ns = "approvals"
	rt, url, k, _ := startRuntimeWith(t, func(o *Options) { o.ToolApprovals = true }, ns)
	up := testpeers.NodeEverything(t)
	apply(t, k, bridgetest.Published(t, ns, "everything", up.URL, v1alpha1.ToolsSpec{}))
	asking := toolPolicy(ns, "people-decide", []v1alpha1.Subject{sa("agents", "alice")}, rule("ask", "mcp.everything.echo"))
	asking.Spec.Approval = v1alpha1.ApprovalSpec{
		Channels: []v1alpha1.ApprovalChannel{v1alpha1.ChannelElicitation, v1alpha1.ChannelToolApproval},
		Modes:    []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowOnce}, Timeout: metav1.Duration{Duration: 5 * time.Minute},
	}
	createPolicy(t, k, asking)
	quick := toolPolicy(ns, "quick", []v1alpha1.Subject{sa("agents", "alice")}, rule("ask", "mcp.everything.get-sum"))
	quick.Spec.Approval = v1alpha1.ApprovalSpec{
		Channels: []v1alpha1.ApprovalChannel{v1alpha1.ChannelToolApproval},
		Modes:    []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowOnce}, Timeout: metav1.Duration{Duration: 2 * time.Second},
	}
	createPolicy(t, k, quick)

	// Our test client declares no elicitation: the first channel cannot be
	// used, so the bridge goes on to the ToolApproval.
	c := connectTo(t, url, "alice-token", mcpclient.EraSession)
	eventually(t, "the bridge lists the asked tools", func() bool {
		names := listNames(t, c)
		return strings.Contains(strings.Join(names, ","), "mcp.everything.echo")
	})

	// Approved; the agent sent a progress token, so it hears what it waits
	// for.
	var mu sync.Mutex
	var progress []string
	c.SetNotificationHandler(func(m *jsonrpc.Message) {
		if m.Method == "notifications/progress" {
			mu.Lock()
			progress = append(progress, string(m.Params))
			mu.Unlock()
		}
	})
	done := callWithProgressAsync(c, "mcp.everything.echo", `{"message":"approved call"}`, "tok-7")
	a := waitingApproval(t, k, ns, "mcp.everything.echo")
	eventually(t, "the waiting agent hears how its request is decided", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(progress) > 0 && strings.Contains(progress[0], `"progressToken":"tok-7"`) &&
			strings.Contains(progress[0], "kubectl mcp approve "+a.Name+" -n "+ns)
	})
	r := a.Spec.Request
	digest, _ := approval.ArgsDigest(json.RawMessage(`{"message":"approved call"}`))
	if r.Requester.Username != "system:serviceaccount:agents:alice" || r.Method != "tools/call" || r.Server != "everything" ||
		r.ArgumentsSHA256 != digest || !strings.Contains(r.ArgumentsPreview, "approved call") || len(r.Rules) != 1 ||
		r.Rules[0] != "policy:approvals/people-decide#rules[0]" || r.ToolCallID == "" || r.Requester.Session == "" {
		t.Errorf("the ToolApproval's request = %+v", r)
	}
	select {
	case res := <-done:
		t.Fatalf("the call went on before anyone decided: %+v", res)
	case <-time.After(300 * time.Millisecond):
	}
	decideApproval(t, k, a, v1alpha1.VerdictAllowOnce, "carol", "looks fine")
	res := <-done
	if res.err != nil {
		t.Fatalf("the approved call failed: %v", res.err)
	}
	if text := firstText(t, res.res); !strings.Contains(text, "approved call") {
		t.Errorf("result = %q", text)
	}
	h := &harness{}
	events := h.eventsFrom(t, rt)
	resolved := eventOf(events, "permission.resolved", r.ToolCallID)
	if resolved == nil || resolved["decision"] != "allow" || resolved["actor"] != "user" || resolved["approver"] != "carol" ||
		resolved["sourcedFrom"] != "approval:"+ns+"/"+a.Name {
		t.Errorf("permission.resolved = %v, want allow by user carol sourced from approval:%s/%s", resolved, ns, a.Name)
	}
	if got := strings.Join(typesOf(events, r.ToolCallID), ","); !strings.HasPrefix(got, "permission.requested,permission.resolved,") || !strings.Contains(got, "tool.completed") {
		t.Errorf("the approved call's events: %s", got)
	}
	var after v1alpha1.ToolApproval
	if err := k.Get(context.Background(), client.ObjectKeyFromObject(a), &after); err != nil || after.Status.Phase != v1alpha1.ApprovalApproved {
		t.Errorf("the ToolApproval after the call: %+v, %v", after.Status, err)
	}

	// Denied: -32010 denied_by_approver, nothing upstream.
	done = callAsync(c, "mcp.everything.echo", `{"message":"denied call"}`)
	a = waitingApproval(t, k, ns, "mcp.everything.echo")
	decideApproval(t, k, a, v1alpha1.VerdictDeny, "dave", "not today")
	res = <-done
	if rpcCode(res.err) != CodeDenied || !strings.Contains(res.err.Error(), "denied_by_approver") || !strings.Contains(res.err.Error(), "not today") {
		t.Errorf("the denied call ended with %v, want -32010 denied_by_approver with the comment", res.err)
	}
	events = h.eventsFrom(t, rt)
	id := a.Spec.Request.ToolCallID
	if failed := eventOf(events, "tool.failed", id); failed == nil || failed["reason"] != "denied_by_approver" {
		t.Errorf("tool.failed = %v", failed)
	}
	if started := eventOf(events, "mcp.call.started", id); started != nil {
		t.Errorf("a denied call went upstream: %v", started)
	}

	// Nobody decides: approval_timeout after the policy's 2s.
	start := time.Now()
	res = <-callAsync(c, "mcp.everything.get-sum", `{"a":1,"b":2}`)
	if rpcCode(res.err) != CodeDenied || !strings.Contains(res.err.Error(), "approval_timeout") {
		t.Errorf("the unanswered call ended with %v, want -32010 approval_timeout", res.err)
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("the unanswered call ended after %s, before the 2s timeout", d)
	}
	var list v1alpha1.ToolApprovalList
	if err := k.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	expired := 0
	for _, x := range list.Items {
		if x.Spec.Request.Target == "mcp.everything.get-sum" && x.Status.Phase == v1alpha1.ApprovalExpired {
			expired++
		}
	}
	if expired != 1 {
		t.Errorf("%d expired ToolApprovals for get-sum, want 1", expired)
	}
}

// TestNoToolApprovalsWithoutTheChannel: a bridge that makes no
// ToolApprovals, or a policy that does not list the channel, denies with
// approval_unavailable as before.
func TestNoToolApprovalsWithoutTheChannel(t *testing.T) {
	const ns = "no-approvals"
	_, url, k, _ := startRuntime(t, ns)
	up := testpeers.NodeEverything(t)
	apply(t, k, bridgetest.Published(t, ns, "everything", up.URL, v1alpha1.ToolsSpec{}))
	p := toolPolicy(ns, "people-decide", []v1alpha1.Subject{sa("agents", "alice")}, rule("ask", "mcp.everything.echo"))
	p.Spec.Approval.Channels = []v1alpha1.ApprovalChannel{v1alpha1.ChannelToolApproval}
	createPolicy(t, k, p)
	c := connectTo(t, url, "alice-token", mcpclient.EraSession)
	eventually(t, "the bridge lists the asked tool", func() bool {
		return strings.Contains(strings.Join(listNames(t, c), ","), "mcp.everything.echo")
	})
	_, err := c.CallTool(ctxT(t), "mcp.everything.echo", json.RawMessage(`{"message":"x"}`))
	if rpcCode(err) != CodeDenied || !strings.Contains(err.Error(), "approval_unavailable") || !strings.Contains(err.Error(), "ToolApproval") {
		t.Errorf("got %v, want -32010 approval_unavailable naming the channel", err)
	}
	var list v1alpha1.ToolApprovalList
	if err := k.List(context.Background(), &list, client.InNamespace(ns)); err != nil || len(list.Items) != 0 {
		t.Errorf("ToolApprovals made by a bridge that makes none: %d (%v)", len(list.Items), err)
	}
}

// TestNoApprovalModeLeftDeniesEarly: a policy whose only mode is
// AllowSession, asked by a 2026-07-28 agent (no session), leaves a person
// nothing to approve with: the bridge says so and makes no ToolApproval
// (which the API server would refuse for its empty modes).
func TestNoApprovalModeLeftDeniesEarly(t *testing.T) {
	const ns = "no-modes"
	_, url, k, _ := startRuntimeWith(t, func(o *Options) { o.ToolApprovals = true }, ns)
	up := testpeers.NodeEverything(t)
	apply(t, k, bridgetest.Published(t, ns, "everything", up.URL, v1alpha1.ToolsSpec{}))
	p := toolPolicy(ns, "session-only", []v1alpha1.Subject{sa("agents", "alice")}, rule("ask", "mcp.everything.echo"))
	p.Spec.Approval = v1alpha1.ApprovalSpec{
		Channels: []v1alpha1.ApprovalChannel{v1alpha1.ChannelToolApproval},
		Modes:    []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowSession}, Timeout: metav1.Duration{Duration: time.Minute},
	}
	createPolicy(t, k, p)
	c := connectTo(t, url, "alice-token", mcpclient.EraStateless)
	eventually(t, "the bridge lists the asked tool", func() bool {
		return strings.Contains(strings.Join(listNames(t, c), ","), "mcp.everything.echo")
	})
	_, err := c.CallTool(ctxT(t), "mcp.everything.echo", json.RawMessage(`{"message":"x"}`))
	if rpcCode(err) != CodeDenied || !strings.Contains(err.Error(), "no approval mode") {
		t.Errorf("got %v, want -32010 approval_unavailable saying no approval mode is left", err)
	}
	var list v1alpha1.ToolApprovalList
	if err := k.List(context.Background(), &list, client.InNamespace(ns)); err != nil || len(list.Items) != 0 {
		t.Errorf("ToolApprovals made with no mode to approve with: %d (%v)", len(list.Items), err)
	}
}
