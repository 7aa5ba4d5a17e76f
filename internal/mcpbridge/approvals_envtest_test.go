package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/canonjson"
	mcpclient "github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// waitingApproval waits for the one Pending ToolApproval of ns whose target
// is target and returns it.
func waitingApproval(t *testing.T, k client.Client, ns, target string) *v1alpha1.ToolApproval {
	t.Helper()
	var found *v1alpha1.ToolApproval
	testkit.Eventually(t, "a ToolApproval for "+target+" appears", func() bool {
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

type callResult struct {
	res json.RawMessage
	err error
}

// async runs a request in the background and hands over its answer.
func async(do func(ctx context.Context) (json.RawMessage, error)) <-chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		res, err := do(ctx)
		ch <- callResult{res, err}
	}()
	return ch
}

func callAsync(c *mcpclient.Client, tool, args string) <-chan callResult {
	return async(func(ctx context.Context) (json.RawMessage, error) {
		return c.CallTool(ctx, tool, json.RawMessage(args))
	})
}

// callWithProgressAsync is callAsync with a progress token.
func callWithProgressAsync(c *mcpclient.Client, tool, args, token string) <-chan callResult {
	params := `{"name":"` + tool + `","arguments":` + args + `,"_meta":{"progressToken":"` + token + `"}}`
	return async(func(ctx context.Context) (json.RawMessage, error) {
		return c.CallToolParams(ctx, json.RawMessage(params))
	})
}

// requestAsync sends any request with raw params in the background.
func requestAsync(c *mcpclient.Client, method, params string) <-chan callResult {
	return async(func(ctx context.Context) (json.RawMessage, error) {
		return c.Call(ctx, method, json.RawMessage(params))
	})
}

// progressHeard are the progress notifications a client has received.
type progressHeard struct {
	mu     sync.Mutex
	params []string
}

func hearProgress(c *mcpclient.Client) *progressHeard {
	h := &progressHeard{}
	c.SetNotificationHandler(func(m *jsonrpc.Message) {
		if m.Method == "notifications/progress" {
			h.mu.Lock()
			h.params = append(h.params, string(m.Params))
			h.mu.Unlock()
		}
	})
	return h
}

// first is the first notification's params ("" before any came).
func (h *progressHeard) first() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.params) == 0 {
		return ""
	}
	return h.params[0]
}

// stillWaiting fails t if the request whose answer done brings has been
// answered (a short look: nobody has decided it yet, so no answer may come).
func stillWaiting(t *testing.T, done <-chan callResult, what string) {
	t.Helper()
	select {
	case res := <-done:
		t.Fatalf("%s went on before anyone decided: %+v", what, res)
	case <-time.After(300 * time.Millisecond):
	}
}

// approveOnce asks through channels, offering AllowOnce, waiting timeout.
func approveOnce(timeout time.Duration, channels ...v1alpha1.ApprovalChannel) v1alpha1.ApprovalSpec {
	return v1alpha1.ApprovalSpec{Channels: channels, Modes: []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowOnce}, Timeout: metav1.Duration{Duration: timeout}}
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
	ns := freshNamespace("approvals")
	rt, url, k, _ := startRuntimeWith(t, func(o *Options) { o.ToolApprovals = true }, ns)
	up := testpeers.NodeEverything(t)
	apply(t, k, bridgetest.Published(t, ns, "everything", up.URL, v1alpha1.ToolsSpec{}))
	asking := toolPolicy(ns, "people-decide", []v1alpha1.Subject{sa("agents", "alice")}, rule("ask", "mcp.everything.echo"))
	asking.Spec.Approval = approveOnce(5*time.Minute, v1alpha1.ChannelElicitation, v1alpha1.ChannelToolApproval)
	createPolicy(t, k, asking)
	quick := toolPolicy(ns, "quick", []v1alpha1.Subject{sa("agents", "alice")}, rule("ask", "mcp.everything.get-sum"))
	quick.Spec.Approval = approveOnce(2*time.Second, v1alpha1.ChannelToolApproval)
	createPolicy(t, k, quick)

	// Our test client declares no elicitation: the first channel cannot be
	// used, so the bridge goes on to the ToolApproval.
	c := connectTo(t, url, "alice-token", mcpclient.EraSession)
	testkit.Eventually(t, "the bridge lists the asked tools", func() bool {
		names := listNames(t, c)
		return strings.Contains(strings.Join(names, ","), "mcp.everything.echo")
	})

	// Approved; the agent sent a progress token, so it hears what it waits
	// for.
	progress := hearProgress(c)
	done := callWithProgressAsync(c, "mcp.everything.echo", `{"message":"approved call"}`, "tok-7")
	a := waitingApproval(t, k, ns, "mcp.everything.echo")
	testkit.Eventually(t, "the waiting agent hears how its request is decided", func() bool {
		first := progress.first()
		return strings.Contains(first, `"progressToken":"tok-7"`) && strings.Contains(first, "kubectl mcp approve "+a.Name+" -n "+ns)
	})
	r := a.Spec.Request
	digest, _ := canonjson.ArgumentsDigest(json.RawMessage(`{"message":"approved call"}`))
	if r.Requester.Username != "system:serviceaccount:agents:alice" || r.Method != "tools/call" || r.Server != "everything" ||
		r.ArgumentsSHA256 != digest || !strings.Contains(r.ArgumentsPreview, "approved call") || len(r.Rules) != 1 ||
		r.Rules[0] != "policy:"+ns+"/people-decide#rules[0]" || r.ToolCallID == "" || r.Requester.Session == "" {
		t.Errorf("the ToolApproval's request = %+v", r)
	}
	stillWaiting(t, done, "the call")
	testenv.DecideApproval(t, k, a, v1alpha1.VerdictAllowOnce, "carol", "looks fine")
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
	// A person matching the audit record to the ToolApproval sees one
	// digest of the arguments in both.
	for _, typ := range []string{"permission.requested", "mcp.call.started"} {
		if ev := eventOf(events, typ, r.ToolCallID); ev == nil || ev["argumentsSha256"] != r.ArgumentsSHA256 {
			t.Errorf("%s = %v; want argumentsSha256 %s, the ToolApproval's", typ, ev, r.ArgumentsSHA256)
		}
	}
	var after v1alpha1.ToolApproval
	if err := k.Get(context.Background(), client.ObjectKeyFromObject(a), &after); err != nil || after.Status.Phase != v1alpha1.ApprovalApproved {
		t.Errorf("the ToolApproval after the call: %+v, %v", after.Status, err)
	}

	// Denied: -32010 denied_by_approver, nothing upstream.
	done = callAsync(c, "mcp.everything.echo", `{"message":"denied call"}`)
	a = waitingApproval(t, k, ns, "mcp.everything.echo")
	testenv.DecideApproval(t, k, a, v1alpha1.VerdictDeny, "dave", "not today")
	res = <-done
	if rpcCode(res.err) != CodeDenied || !strings.Contains(res.err.Error(), "denied_by_approver") || !strings.Contains(res.err.Error(), "not today") {
		t.Errorf("the denied call ended with %v, want -32010 denied_by_approver with the comment", res.err)
	} else if d, ok := retryDataOf(res.err); !ok || !d.says(false, -1, -1) {
		t.Errorf("the denied call ended with %v, want retryable false (a person's no stands)", res.err)
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
	} else if d, ok := retryDataOf(res.err); !ok || !d.says(true, -1, -1) {
		t.Errorf("the unanswered call ended with %v, want retryable true without retryAfterMs (sent again, it is asked again)", res.err)
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
	testkit.Eventually(t, "the bridge lists the asked tool", func() bool {
		return strings.Contains(strings.Join(listNames(t, c), ","), "mcp.everything.echo")
	})
	_, err := c.CallTool(testkit.Context(t), "mcp.everything.echo", json.RawMessage(`{"message":"x"}`))
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
	testkit.Eventually(t, "the bridge lists the asked tool", func() bool {
		return strings.Contains(strings.Join(listNames(t, c), ","), "mcp.everything.echo")
	})
	_, err := c.CallTool(testkit.Context(t), "mcp.everything.echo", json.RawMessage(`{"message":"x"}`))
	if rpcCode(err) != CodeDenied || !strings.Contains(err.Error(), "no approval mode") {
		t.Errorf("got %v, want -32010 approval_unavailable saying no approval mode is left", err)
	}
	var list v1alpha1.ToolApprovalList
	if err := k.List(context.Background(), &list, client.InNamespace(ns)); err != nil || len(list.Items) != 0 {
		t.Errorf("ToolApprovals made with no mode to approve with: %d (%v)", len(list.Items), err)
	}
}

var namespaceRuns atomic.Int32

// freshNamespace is a namespace name no earlier run of a test in this
// process used (the API server is shared, and -count=N runs a test again).
func freshNamespace(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, namespaceRuns.Add(1))
}

// TestAPersonDecidesReadsAndPrompts: a read and a prompt a policy asks
// about, from a client that cannot be asked, wait on a ToolApproval as a
// tool call does (the pipeline's ask stage is one for all three): the
// approval names the resource URI or the prompt and its arguments' digest,
// an approved read runs, a denied prompt never reaches the server.
func TestAPersonDecidesReadsAndPrompts(t *testing.T) {
	ns := freshNamespace("approvals-reads")
	rt, url, k, _ := startRuntimeWith(t, func(o *Options) { o.ToolApprovals = true }, ns)
	up := testpeers.GoEverything(t, false)
	apply(t, k, bridgetest.Published(t, ns, "everything", up.URL, v1alpha1.ToolsSpec{}))
	p := toolPolicy(ns, "people-decide", []v1alpha1.Subject{sa("agents", "alice")})
	p.Spec.Resources = []v1alpha1.ResourceRule{{Servers: []string{"everything"}, Decision: v1alpha1.DecisionAsk}}
	p.Spec.Prompts = []v1alpha1.PromptRule{{Prompts: []string{"mcp.everything.*"}, Decision: v1alpha1.DecisionAsk}}
	p.Spec.Approval = approveOnce(5*time.Minute, v1alpha1.ChannelToolApproval)
	createPolicy(t, k, p)
	c := connectTo(t, url, "alice-token", mcpclient.EraSession)
	testkit.Eventually(t, "the bridge lists the server's prompts", func() bool {
		prompts, err := c.ListPrompts(testkit.Context(t), mcpclient.Limits{})
		return err == nil && len(prompts) > 0
	})
	progress := hearProgress(c)
	h := &harness{}

	// A read: approved once, it runs.
	done := requestAsync(c, "resources/read", `{"uri":"`+textURI+`","_meta":{"progressToken":"read-1"}}`)
	a := waitingApproval(t, k, ns, textURI)
	// A read has no arguments: its URI is the whole request.
	if r := a.Spec.Request; r.Method != "resources/read" || r.Server != "everything" || r.Requester.Username != "system:serviceaccount:agents:alice" ||
		r.ArgumentsSHA256 != "" || r.Rules[0] != "policy:"+ns+"/people-decide#resources[0]" {
		t.Errorf("the read's ToolApproval request = %+v", r)
	}
	testkit.Eventually(t, "the waiting reader hears how its read is decided", func() bool {
		first := progress.first()
		return strings.Contains(first, `"progressToken":"read-1"`) && strings.Contains(first, "kubectl mcp approve "+a.Name+" -n "+ns)
	})
	stillWaiting(t, done, "the read")
	testenv.DecideApproval(t, k, a, v1alpha1.VerdictAllowOnce, "carol", "")
	res := <-done
	if res.err != nil || !strings.Contains(string(res.res), `"uri":"`+textURI+`"`) {
		t.Fatalf("the approved read: %s, %v", res.res, res.err)
	}
	events := h.eventsFrom(t, rt)
	id := a.Spec.Request.ToolCallID
	resolved := eventOf(events, "permission.resolved", id)
	if resolved == nil || resolved["resource"] != textURI || resolved["actor"] != "user" || resolved["approver"] != "carol" ||
		resolved["sourcedFrom"] != "approval:"+ns+"/"+a.Name {
		t.Errorf("the read's permission.resolved = %v", resolved)
	}
	if got := strings.Join(typesOf(events, id), " "); got != "permission.requested permission.resolved mcp.resource.requested mcp.resource.fetched" {
		t.Errorf("the approved read's events: %s", got)
	}

	// A prompt: the approval is bound to its arguments; denied, nothing
	// goes upstream.
	done = requestAsync(c, "prompts/get", `{"name":"`+argsPrompt+`","arguments":{"arg1":"alpha","arg2":"beta"}}`)
	a = waitingApproval(t, k, ns, argsPrompt)
	digest, _ := canonjson.ArgumentsDigest(json.RawMessage(`{"arg2":"beta","arg1":"alpha"}`))
	if r := a.Spec.Request; r.Method != "prompts/get" || r.ArgumentsSHA256 != digest || !strings.Contains(r.ArgumentsPreview, "alpha") {
		t.Errorf("the prompt's ToolApproval request = %+v", r)
	}
	testenv.DecideApproval(t, k, a, v1alpha1.VerdictDeny, "dave", "no prompts today")
	res = <-done
	if rpcCode(res.err) != CodeDenied || !strings.Contains(res.err.Error(), "denied_by_approver") || !strings.Contains(res.err.Error(), "no prompts today") {
		t.Errorf("the denied prompt ended with %v, want -32010 denied_by_approver with the comment", res.err)
	}
	events = h.eventsFrom(t, rt)
	id = a.Spec.Request.ToolCallID
	if got := strings.Join(typesOf(events, id), " "); got != "permission.requested permission.resolved tool.failed" {
		t.Errorf("the denied prompt's events: %s (nothing may go upstream)", got)
	}
	if resolved := eventOf(events, "permission.resolved", id); resolved == nil || resolved["prompt"] != argsPrompt || resolved["approver"] != "dave" {
		t.Errorf("the prompt's permission.resolved = %v", resolved)
	}
}

// TestAnApprovalCoversWhatItSays: a ToolApproval approved once lets that
// one call through: the next call, with other arguments, is asked again.
// Approved for the session, it lets that session call the tool with any
// arguments without asking, and no other session of the same caller.
func TestAnApprovalCoversWhatItSays(t *testing.T) {
	ns := freshNamespace("approvals-scope")
	rt, url, k, _ := startRuntimeWith(t, func(o *Options) { o.ToolApprovals = true }, ns)
	up := testpeers.NodeEverything(t)
	apply(t, k, bridgetest.Published(t, ns, "everything", up.URL, v1alpha1.ToolsSpec{}))
	p := toolPolicy(ns, "people-decide", []v1alpha1.Subject{sa("agents", "alice")}, rule("ask", "mcp.everything.echo"))
	p.Spec.Approval = approveOnce(5*time.Minute, v1alpha1.ChannelToolApproval)
	p.Spec.Approval.Modes = append(p.Spec.Approval.Modes, v1alpha1.ApprovalAllowSession)
	createPolicy(t, k, p)
	first := connectTo(t, url, "alice-token", mcpclient.EraSession)
	testkit.Eventually(t, "the bridge lists the asked tool", func() bool {
		return strings.Contains(strings.Join(listNames(t, first), ","), "mcp.everything.echo")
	})
	// approved calls echo with args, and a person decides its ToolApproval
	// (a new one: decided ones are not waiting) with v.
	approved := func(c *mcpclient.Client, args string, v v1alpha1.ApprovalVerdict) *v1alpha1.ToolApproval {
		t.Helper()
		done := callAsync(c, "mcp.everything.echo", args)
		a := waitingApproval(t, k, ns, "mcp.everything.echo")
		testenv.DecideApproval(t, k, a, v, "carol", "")
		if res := <-done; res.err != nil {
			t.Fatalf("the call approved %s failed: %v", v, res.err)
		}
		return a
	}

	once := approved(first, `{"message":"one"}`, v1alpha1.VerdictAllowOnce)
	if !slices.Contains(once.Spec.Request.Modes, v1alpha1.ApprovalAllowSession) {
		t.Fatalf("the approval offers %v: this test needs AllowSession offered", once.Spec.Request.Modes)
	}
	session := approved(first, `{"message":"two"}`, v1alpha1.VerdictAllowSession)
	if once.Spec.Request.ArgumentsSHA256 == session.Spec.Request.ArgumentsSHA256 || once.Spec.Request.Requester.Session != session.Spec.Request.Requester.Session {
		t.Errorf("two calls of one session with other arguments: digests %s and %s, sessions %s and %s", once.Spec.Request.ArgumentsSHA256,
			session.Spec.Request.ArgumentsSHA256, once.Spec.Request.Requester.Session, session.Spec.Request.Requester.Session)
	}

	// The session's grant: any arguments, no ToolApproval.
	res, err := first.CallTool(testkit.Context(t), "mcp.everything.echo", json.RawMessage(`{"message":"three"}`))
	if err != nil || !strings.Contains(firstText(t, res), "three") {
		t.Fatalf("a call the session's grant covers: %s, %v", res, err)
	}
	events := (&harness{}).eventsFrom(t, rt)
	var granted []string
	for _, ev := range events {
		if ev["type"] == "permission.resolved" && ev["sourcedFrom"] == "session-grant" {
			granted = append(granted, ev["actor"].(string)+"/"+ev["decision"].(string))
		}
	}
	if !slices.Equal(granted, []string{"policy/allow"}) {
		t.Errorf("permission.resolved by the session grant: %v, want one allow", granted)
	}

	// Another session of the same caller is asked again.
	second := connectTo(t, url, "alice-token", mcpclient.EraSession)
	done := callAsync(second, "mcp.everything.echo", `{"message":"three"}`)
	other := waitingApproval(t, k, ns, "mcp.everything.echo")
	if other.Spec.Request.Requester.Session == session.Spec.Request.Requester.Session {
		t.Errorf("the second session's approval names the first session %s", other.Spec.Request.Requester.Session)
	}
	testenv.DecideApproval(t, k, other, v1alpha1.VerdictDeny, "carol", "")
	if res := <-done; rpcCode(res.err) != CodeDenied {
		t.Errorf("the other session's call ended with %v, want -32010", res.err)
	}
	var list v1alpha1.ToolApprovalList
	if err := k.List(context.Background(), &list, client.InNamespace(ns)); err != nil || len(list.Items) != 3 {
		t.Errorf("%d ToolApprovals (%v), want 3: once, for the session, the other session's", len(list.Items), err)
	}
}
