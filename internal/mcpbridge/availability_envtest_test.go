package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/identity"
	mcpclient "github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// backAfterResolve is an adapter that, once its request is resolved, waits
// until its server is served again: the window between resolve and the
// available stage is too short to hit with real timing, so the test widens
// it here. Everything else is the real adapter.
type backAfterResolve struct {
	adapter
	back func()
	done bool
}

func (a *backAfterResolve) resolve(b *Bridge, x *exchange) *jsonrpc.Message {
	answer := a.adapter.resolve(b, x)
	if !a.done {
		a.done = true
		a.back()
	}
	return answer
}

// aliceAsks is a stateless-era request from alice on endpoint, taken by
// the bridge in process (no HTTP before it).
func aliceAsks(endpoint, method, params string) *request {
	id := identity.FromUserInfo("system:serviceaccount:agents:alice", nil)
	return &request{ctx: context.Background(), id: id, endpoint: endpoint, stateless: true, out: &responder{w: httptest.NewRecorder()},
		msg: &jsonrpc.Message{ID: json.RawMessage(`1`), Method: method, Params: json.RawMessage(params)}}
}

// restarting reports the server restarting, as the controller does after a
// crash (no endpoint, catalog kept), and waits until the bridge sees it.
func restarting(t *testing.T, k client.Client, rt *Runtime, obj *v1alpha1.MCPServer) {
	t.Helper()
	updateStatus(t, k, obj, func(s *v1alpha1.MCPServerStatus) {
		s.Endpoint = nil
		setReady(s, metav1.ConditionFalse, v1alpha1.ReasonRestarting, "restarting after crash 1")
	})
	testkit.Eventually(t, "the bridge sees the server restarting", func() bool {
		_, ok := rt.Registry.Away(obj.Name)
		return ok
	})
}

// TestResolvedAwayServedByAvailable: a read, a prompt and a completion
// resolved while their server was restarting (no connection), whose server
// is served again when the available stage runs, are resolved again and
// forwarded on the new connection, never on none.
func TestResolvedAwayServedByAvailable(t *testing.T) {
	const ns = "backagain"
	fwd := peer(t)
	rt, k, obj, _, _ := servedTo(t, ns, fwd, nil)
	pol := toolPolicy(ns, "reads", []v1alpha1.Subject{sa("agents", "alice")})
	pol.Spec.Resources = []v1alpha1.ResourceRule{{Servers: []string{"everything"}, Decision: "allow"}}
	pol.Spec.Prompts = []v1alpha1.PromptRule{{Prompts: []string{"mcp.everything.*"}, Decision: "allow"}}
	createPolicy(t, k, pol)
	served := obj.Status.DeepCopy()

	for _, tc := range []struct {
		method, endpoint, params string
		adapter                  adapter
	}{
		{"resources/read", "", `{"uri":"mcp://everything/test://static-text"}`, &read{}},
		{"prompts/get", "", `{"name":"mcp.everything.test_simple_prompt"}`, &prompt{}},
		// Completions are asked on the server's own endpoint.
		{"completion/complete", "everything", `{"ref":{"type":"ref/prompt","name":"test_prompt_with_arguments"},"argument":{"name":"arg1","value":"a"}}`, &completion{}},
	} {
		t.Run(tc.method, func(t *testing.T) {
			restarting(t, k, rt, obj)
			a := &backAfterResolve{adapter: tc.adapter, back: func() {
				updateStatus(t, k, obj, func(s *v1alpha1.MCPServerStatus) {
					s.Endpoint = served.Endpoint
					setReady(s, metav1.ConditionTrue, v1alpha1.ReasonServing, "the catalog is published")
				})
				testkit.Eventually(t, "the bridge serves the server again", func() bool {
					_, _, ok := rt.Registry.Server("everything")
					return ok
				})
			}}
			rq := aliceAsks(tc.endpoint, tc.method, tc.params)
			before := fwd.Requests(tc.method)
			answer := rt.Bridge.serve(rq, a)
			if answer == nil || answer.Error != nil {
				t.Fatalf("answer %+v", answer)
			}
			if fwd.Requests(tc.method) != before+1 {
				t.Fatalf("%s did not reach the server once", tc.method)
			}
		})
	}
}

// TestCompletionOfAServerAway: a completion asked of a server that is
// restarting is answered as any request for it is (CodeServerAway with the
// Ready reason), and never forwarded without a connection.
func TestCompletionOfAServerAway(t *testing.T) {
	const ns = "completeaway"
	fwd := peer(t)
	rt, k, obj, _, _ := servedTo(t, ns, fwd, nil)
	pol := toolPolicy(ns, "prompts", []v1alpha1.Subject{sa("agents", "alice")})
	pol.Spec.Prompts = []v1alpha1.PromptRule{{Prompts: []string{"mcp.everything.*"}, Decision: "allow"}}
	createPolicy(t, k, pol)
	restarting(t, k, rt, obj)
	answer := rt.Bridge.complete(aliceAsks("everything", "completion/complete",
		`{"ref":{"type":"ref/prompt","name":"test_prompt_with_arguments"},"argument":{"name":"arg1","value":"a"}}`))
	if answer == nil || answer.Error == nil {
		t.Fatalf("answer %+v", answer)
	}
	if d := awayOf(t, answer.Error); d.Reason != v1alpha1.ReasonRestarting || !d.Retryable {
		t.Fatalf("%+v", d)
	}
	if n := fwd.Requests("completion/complete"); n != 0 {
		t.Fatalf("%d completions reached a server that was away", n)
	}
}

// TestSubscribeToAServerAwayDecidesFirst: a caller the policy does not let
// read a resource is refused as such, and learns nothing of the server's
// state; an allowed one is told the server is away (CodeServerAway).
func TestSubscribeToAServerAwayDecidesFirst(t *testing.T) {
	const ns = "subscribeaway"
	fwd := peer(t)
	rt, k, obj, c, _ := servedTo(t, ns, fwd, nil)
	restarting(t, k, rt, obj)
	sub := json.RawMessage(`{"uri":"mcp://everything/test://static-text"}`)
	_, err := c.Call(testkit.Context(t), "resources/subscribe", sub)
	var e *jsonrpc.Error
	if !errors.As(err, &e) || e.Code == CodeServerAway || strings.Contains(e.Error(), "Restarting") {
		t.Fatalf("a denied subscription: %v", err)
	}

	pol := toolPolicy(ns, "reads", []v1alpha1.Subject{sa("agents", "alice")})
	pol.Spec.Resources = []v1alpha1.ResourceRule{{Servers: []string{"everything"}, Decision: "allow"}}
	createPolicy(t, k, pol)
	testkit.Eventually(t, "the allowed subscription is told the server is away", func() bool {
		_, err := c.Call(testkit.Context(t), "resources/subscribe", sub)
		return errors.As(err, &e) && e.Code == CodeServerAway
	})
	if n := fwd.Requests("resources/subscribe"); n != 0 {
		t.Fatalf("%d subscriptions reached a server that was away", n)
	}
}

// TestWokenServerWithAChangedTool: a call decided on a sleeping server's
// catalog, whose tool the woken server publishes with another risk, is not
// forwarded on the old decision (allowed as it was): it is refused,
// retryable, and decided on the new catalog when sent again.
func TestWokenServerWithAChangedTool(t *testing.T) {
	const ns = "wakechanged"
	fwd := peer(t)
	rt, k, obj, c, _ := servedTo(t, ns, fwd, nil)
	createLease(t, k, ns, "everything", 5*time.Minute)
	since := putToSleep(t, k, rt, obj)
	served := obj.Status.DeepCopy()
	result := callAsync(c, "mcp.everything.test_simple_text", `{}`)
	testkit.Eventually(t, "the wake is written", func() bool {
		return getLease(t, k, ns, "everything").Spec.RenewTime.After(since)
	})
	updateStatus(t, k, obj, func(s *v1alpha1.MCPServerStatus) {
		for i := range s.Tools {
			if s.Tools[i].UpstreamName == "test_simple_text" {
				s.Tools[i].Risk = v1alpha1.RiskDestructive
			}
		}
		s.Endpoint = served.Endpoint
		setReady(s, metav1.ConditionTrue, v1alpha1.ReasonServing, "the catalog is published")
	})
	var got callResult
	select {
	case got = <-result:
	case <-time.After(20 * time.Second):
		t.Fatal("the call was not answered when the server woke")
	}
	var e *jsonrpc.Error
	if !errors.As(got.err, &e) || e.Code != CodeUpstream || !strings.Contains(string(e.Data), `"reason":"tool_changed"`) || !strings.Contains(string(e.Data), `"retryable":true`) {
		t.Fatalf("a call decided on the tool before it changed: %v", got.err)
	}
	if fwd.Calls() != 0 {
		t.Fatalf("%d calls went upstream on the old decision", fwd.Calls())
	}
	// Sent again, it is decided as the destructive tool it is now: the
	// policy's allow of a destructive tool asks, and this client cannot be
	// asked.
	_, err := c.CallTool(testkit.Context(t), "mcp.everything.test_simple_text", json.RawMessage(`{}`))
	if !errors.As(err, &e) || e.Code != CodeDenied || !strings.Contains(string(e.Data), reasonApprovalUnavailable) {
		t.Fatalf("sent again: %v", err)
	}
}

// TestStopAnswersAWakeWait: a call waiting for its server to wake when its
// replica stops is answered at the start of the drain, -32011
// bridge_stopping (to be sent again to another replica), not cut off as
// cancelled at the drain's end.
func TestStopAnswersAWakeWait(t *testing.T) {
	const ns = "stopwake"
	rt, _, k, _ := startRuntimeWith(t, nil, ns)
	closeUpstreams(t, rt)
	fwd := peer(t)
	obj := apply(t, k, bridgetest.Published(t, ns, "everything", fwd.URL, v1alpha1.ToolsSpec{}))
	createPolicy(t, k, toolPolicy(ns, "agents", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.*")))
	srv, url := serve(t, rt.Handler)
	c := connectTo(t, url, "alice-token", mcpclient.EraSession)
	testkit.Eventually(t, "the bridge lists the server's tools", func() bool { return len(listNames(t, c)) > 0 })
	createLease(t, k, ns, "everything", 5*time.Minute)
	since := putToSleep(t, k, rt, obj)
	done := callAsync(c, "mcp.everything.test_simple_text", `{}`)
	testkit.Eventually(t, "the wake is written", func() bool {
		return getLease(t, k, ns, "everything").Spec.RenewTime.After(since)
	})

	bounds := StopBounds{Delay: 100 * time.Millisecond, Drain: 5 * time.Second, Sessions: time.Second, Flush: time.Second}
	start := time.Now()
	if err := rt.Bridge.Stop(srv, rt.Registry, rt.Audit, nil, bounds); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if took := time.Since(start); took > bounds.Delay+bounds.Drain/2 {
		t.Errorf("Stop took %s: the wake's wait must end at the start of the drain, not at its end", took)
	}
	r := <-done
	var e *jsonrpc.Error
	if !errors.As(r.err, &e) || e.Code != CodeUpstream || !strings.Contains(string(e.Data), `"reason":"bridge_stopping"`) {
		t.Errorf("the waiting call: %v, want -32011 bridge_stopping", r.err)
	}
	if verdict, ok := retryable(r.err); !ok || !verdict {
		t.Errorf("the waiting call: %v, want retryable true (it never went upstream)", r.err)
	}
	if fwd.Calls() != 0 {
		t.Error("the call reached its server")
	}
}

// TestWakeThenServerProgressIncreases: an agent told of a wake (progress
// 1, 2, ...) and then of the server's own progress sees progress increase
// throughout: the server's is told after the wake's.
func TestWakeThenServerProgressIncreases(t *testing.T) {
	const ns = "wakeprogress"
	fwd := peer(t)
	rt, k, obj, c, _ := servedTo(t, ns, fwd, nil)
	createLease(t, k, ns, "everything", 5*time.Minute)
	served := obj.Status.DeepCopy()
	putToSleep(t, k, rt, obj)
	progress := hearProgress(c)
	done := callWithProgressAsync(c, "mcp.everything.test_tool_with_progress", `{}`, "wake-p")
	testkit.Eventually(t, "the waiting agent hears of the wake", func() bool { return progress.first() != "" })
	updateStatus(t, k, obj, func(s *v1alpha1.MCPServerStatus) {
		s.Endpoint = served.Endpoint
		setReady(s, metav1.ConditionTrue, v1alpha1.ReasonServing, "the catalog is published")
	})
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call was not answered when the server woke")
	}
	progress.mu.Lock()
	defer progress.mu.Unlock()
	last, fromServer := -1.0, 0
	for _, p := range progress.params {
		var n struct {
			Progress float64 `json:"progress"`
			Message  string  `json:"message"`
		}
		if err := json.Unmarshal([]byte(p), &n); err != nil {
			t.Fatal(err)
		}
		if n.Progress <= last {
			t.Fatalf("progress went from %v to %v: %v", last, n.Progress, progress.params)
		}
		if !strings.Contains(n.Message, "the call goes on when it is ready") {
			fromServer++
		}
		last = n.Progress
	}
	if fromServer == 0 {
		t.Fatalf("no progress of the server's own was told: %v", progress.params)
	}
}

// TestOnlyAllowedRequestsAreActivity: a call the policy denies, a list
// that shows nothing of a server, and a list whose only item of a server
// the output pipeline refuses (left out) do not renew its activity Lease
// (a caller who sees nothing of it does not keep it awake); a list that
// shows its tools does.
func TestOnlyAllowedRequestsAreActivity(t *testing.T) {
	const ns = "activityrights"
	fwd := peer(t)
	rt, url, k, _ := startRuntimeWith(t, nil, ns)
	closeUpstreams(t, rt)
	apply(t, k, bridgetest.Published(t, ns, "everything", fwd.URL, v1alpha1.ToolsSpec{}))
	apply(t, k, bridgetest.Published(t, ns, "refusing", refusingServer(t, false), v1alpha1.ToolsSpec{}))
	createPolicy(t, k, toolPolicy(ns, "agents", []v1alpha1.Subject{sa("agents", "alice")},
		rule("allow", "mcp.everything.*"), rule("deny", "mcp.everything.test_simple_text"), rule("allow", "mcp.refusing.*")))
	alice := connectTo(t, url, "alice-token", mcpclient.EraSession)
	bob := connectTo(t, url, "bob-token", mcpclient.EraSession)
	testkit.Eventually(t, "the bridge serves both servers, the refused tool in its catalog", func() bool {
		_, _, ok := rt.Registry.Server("everything")
		c, err := rt.Registry.Catalog(testkit.Context(t), "refusing")
		return ok && err == nil && c.ByName["odd"] != nil
	})
	createLease(t, k, ns, "everything", 5*time.Minute)
	createLease(t, k, ns, "refusing", 5*time.Minute)
	time.Sleep(time.Second) // the bridge's Lease informer takes them up
	renewed := getLease(t, k, ns, "everything").Spec.RenewTime.Time
	refusingRenewed := getLease(t, k, ns, "refusing").Spec.RenewTime.Time
	testkit.Eventually(t, "alice's call is denied", func() bool {
		_, err := alice.CallTool(testkit.Context(t), "mcp.everything.test_simple_text", json.RawMessage(`{}`))
		var e *jsonrpc.Error
		return errors.As(err, &e) && e.Code == CodeDenied
	})
	if names := listNames(t, bob); len(names) != 0 {
		t.Fatalf("bob sees %v", names)
	}
	time.Sleep(time.Second) // the Lease would be written by now
	if n := metric(t, rt, `mcp_bridge_activity_lease_writes_total{kind="activity"}`); n != 0 || !getLease(t, k, ns, "everything").Spec.RenewTime.Time.Equal(renewed) {
		t.Fatalf("a denied call or an empty list renewed the Lease (%d writes)", n)
	}
	names := listNames(t, alice)
	if len(names) == 0 || slices.Contains(names, "mcp.refusing.odd") {
		t.Fatalf("alice sees %v: want everything's tools, the refused one left out", names)
	}
	testkit.Eventually(t, "a list showing the server's tools renews its Lease", func() bool {
		return getLease(t, k, ns, "everything").Spec.RenewTime.After(renewed)
	})
	time.Sleep(time.Second) // the other Lease, touched by the same list, would be written by now
	if n := metric(t, rt, `mcp_bridge_activity_lease_writes_total{kind="activity"}`); n != 1 || !getLease(t, k, ns, "refusing").Spec.RenewTime.Time.Equal(refusingRenewed) {
		t.Fatalf("a list that left out the server's only tool renewed its Lease (%d writes, want everything's 1)", n)
	}
}

// TestFailedWakeWriteIsNotShownToTheAgent: a wake whose Lease write the API
// server refuses (here the Lease is missing: not found) answers the call
// -32012, saying the bridge could not ask for the wake, without the API's
// error (it names the cluster's objects).
func TestFailedWakeWriteIsNotShownToTheAgent(t *testing.T) {
	const ns = "wakewritefails"
	fwd := peer(t)
	rt, k, obj, c, _ := servedTo(t, ns, fwd, nil)
	putToSleep(t, k, rt, obj) // no activity Lease: the wake's patch fails
	_, err := c.CallTool(testkit.Context(t), "mcp.everything.test_simple_text", json.RawMessage(`{}`))
	d := awayOf(t, err)
	if d.Reason != v1alpha1.ReasonSleeping || !strings.Contains(err.Error(), "could not ask for the server to wake") ||
		strings.Contains(err.Error(), "not found") || strings.Contains(err.Error(), "leases") {
		t.Fatalf("a wake that could not be written: %v", err)
	}
	if n := metric(t, rt, `mcp_bridge_wake_wait_seconds_count{outcome="failed"}`); n != 1 {
		t.Fatalf("failed wakes counted: %d, want 1", n)
	}
}
