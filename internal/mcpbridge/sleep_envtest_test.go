package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	mcpclient "github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/activity"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// The controller's side of sleep is played here by hand, as the controller
// writes it: the activity Lease it creates, the status of a server it puts
// to sleep (Ready False Sleeping, no endpoint, the catalog kept), the
// Waking it reports after a wake and the new pod's endpoint once Ready.

// peer is a real MCP server (the go-sdk everything-server) behind a
// forwarder that counts the calls it was sent.
func peer(t *testing.T) *bridgetest.Forwarder {
	t.Helper()
	up := testpeers.GoEverything(t, false)
	u, err := url.Parse(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	fwd := bridgetest.Forward(t, u.Host, u.Path)
	// The server stops before its forwarder waits for its connections: a
	// connection a retired upstream pool still keeps idle then ends at once
	// rather than at the pool's idle timeout.
	t.Cleanup(up.Kill)
	return fwd
}

// closeUpstreams ends the bridge's upstream connections when the test ends,
// before the peers' forwarders wait for their connections to close.
func closeUpstreams(t *testing.T, rt *Runtime) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = rt.Registry.Close(ctx)
	})
}

// servedTo starts a bridge serving ns (its options changed by mod) with the
// server "everything" behind fwd and a policy letting alice call it, and
// connects alice once she sees its tools (listed of them).
func servedTo(t *testing.T, ns string, fwd *bridgetest.Forwarder, mod func(*Options)) (rt *Runtime, k client.Client, obj *v1alpha1.MCPServer, c *mcpclient.Client, listed int) {
	t.Helper()
	rt, addr, k, _ := startRuntimeWith(t, mod, ns)
	closeUpstreams(t, rt)
	obj = apply(t, k, bridgetest.Published(t, ns, "everything", fwd.URL, v1alpha1.ToolsSpec{}))
	createPolicy(t, k, toolPolicy(ns, "agents", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.*")))
	c = connectTo(t, addr, "alice-token", mcpclient.EraSession)
	testkit.Eventually(t, "the bridge lists the server's tools", func() bool {
		listed = len(listNames(t, c))
		return listed > 0
	})
	return rt, k, obj, c, listed
}

// createLease creates the activity Lease of a server as the controller
// does, last renewed renewed ago.
func createLease(t *testing.T, k client.Client, ns, server string, renewed time.Duration) *coordinationv1.Lease {
	t.Helper()
	idle := int32(60)
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: activity.LeaseName(server), Labels: map[string]string{
			activity.ManagedByLabel: "mcp-operator", activity.ServerLabel: server,
		}},
		Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: time.Now().Add(-renewed)}, LeaseDurationSeconds: &idle},
	}
	if err := k.Create(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	return l
}

func getLease(t *testing.T, k client.Client, ns, server string) *coordinationv1.Lease {
	t.Helper()
	var l coordinationv1.Lease
	if err := k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: activity.LeaseName(server)}, &l); err != nil {
		t.Fatal(err)
	}
	return &l
}

// setReady sets the Ready condition (and a transition time) as the
// controller does.
func setReady(s *v1alpha1.MCPServerStatus, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: message})
}

// putToSleep reports the server asleep: no endpoint, catalog kept.
func putToSleep(t *testing.T, k client.Client, rt *Runtime, obj *v1alpha1.MCPServer) time.Time {
	t.Helper()
	updateStatus(t, k, obj, func(s *v1alpha1.MCPServerStatus) {
		s.Endpoint = nil
		meta.RemoveStatusCondition(&s.Conditions, v1alpha1.ConditionReady)
		setReady(s, metav1.ConditionFalse, v1alpha1.ReasonSleeping, "no activity for 1m0s; the next call wakes it")
	})
	testkit.Eventually(t, "the bridge sees the server asleep", func() bool {
		a, ok := rt.Registry.Away(obj.Name)
		return ok && a.Reason == v1alpha1.ReasonSleeping
	})
	a, _ := rt.Registry.Away(obj.Name)
	return a.Since
}

// metric is the value of one metric line the ops handler shows, 0 when it
// has none.
func metric(t *testing.T, rt *Runtime, line string) int {
	t.Helper()
	srv := httptest.NewServer(rt.OpsHandler)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(line) + ` (\d+)$`).FindSubmatch(body)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// awayData is the data of a CodeServerAway answer.
type awayData struct {
	Reason       string `json:"reason"`
	Server       string `json:"server"`
	Message      string `json:"message"`
	Retryable    bool   `json:"retryable"`
	RetryAfterMs *int64 `json:"retryAfterMs"`
}

func awayOf(t *testing.T, err error) awayData {
	t.Helper()
	var e *jsonrpc.Error
	if !errors.As(err, &e) || e.Code != CodeServerAway {
		t.Fatalf("want a CodeServerAway answer, got %v", err)
	}
	var d awayData
	if err := json.Unmarshal(e.Data, &d); err != nil {
		t.Fatalf("CodeServerAway data %s: %v", e.Data, err)
	}
	return d
}

// TestActivityRenewsTheLeaseItFinds: a call to a busy server renews its
// activity Lease (patched: the same object, holder and renewTime set) at
// most once a minute; a server with no Lease gets none created.
func TestActivityRenewsTheLeaseItFinds(t *testing.T) {
	const ns = "activity"
	fwd := peer(t) // before the bridge: stopped after it, its connections closed
	rt, addr, k, _ := startRuntimeWith(t, func(o *Options) { o.Identity = "bridge-test-0" }, ns)
	closeUpstreams(t, rt)
	apply(t, k, bridgetest.Published(t, ns, "everything", fwd.URL, v1alpha1.ToolsSpec{}))
	apply(t, k, bridgetest.Published(t, ns, "other", fwd.URL, v1alpha1.ToolsSpec{}))
	createPolicy(t, k, toolPolicy(ns, "agents", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.**")))
	created := createLease(t, k, ns, "everything", 5*time.Minute)
	c := connectTo(t, addr, "alice-token", mcpclient.EraSession)
	testkit.Eventually(t, "the bridge lists both servers' tools and sees the Lease", func() bool {
		var l coordinationv1.Lease
		names := strings.Join(listNames(t, c), ",")
		return strings.Contains(names, "mcp.other.") && strings.Contains(names, "mcp.everything.") &&
			rt.Watcher.Cache.Get(testkit.Context(t), client.ObjectKeyFromObject(created), &l) == nil
	})
	for i := 0; i < 5; i++ {
		for _, tool := range []string{"mcp.everything.test_simple_text", "mcp.other.test_simple_text"} {
			if _, err := c.CallTool(testkit.Context(t), tool, json.RawMessage(`{}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	testkit.Eventually(t, "the Lease is renewed", func() bool {
		l := getLease(t, k, ns, "everything")
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "bridge-test-0" && time.Since(l.Spec.RenewTime.Time) < 30*time.Second
	})
	l := getLease(t, k, ns, "everything")
	if l.UID != created.UID || l.CreationTimestamp != created.CreationTimestamp {
		t.Fatal("the Lease was replaced, not patched")
	}
	if n := metric(t, rt, `mcp_bridge_activity_lease_writes_total{kind="activity"}`); n != 1 {
		t.Fatalf("10 calls within a second: %d activity writes, want 1", n)
	}
	var none coordinationv1.Lease
	err := k.Get(testkit.Context(t), client.ObjectKey{Namespace: ns, Name: activity.LeaseName("other")}, &none)
	if !apierrors.IsNotFound(err) {
		t.Fatalf("the bridge created a Lease for a server that has none (%v)", err)
	}
}

// TestWakeOnFirstCall: 20 calls to a sleeping server, made at once, write
// one wake, hear progress while they wait, and are all answered by the new
// pod once it is Ready, each sent to it once.
func TestWakeOnFirstCall(t *testing.T) {
	const ns = "sleepy"
	old, fresh := peer(t), peer(t)
	rt, k, obj, c, before := servedTo(t, ns, old, nil)
	createLease(t, k, ns, "everything", 5*time.Minute)
	// A session-era agent's call opens its upstream session on the pod.
	if _, err := c.CallTool(testkit.Context(t), "mcp.everything.test_simple_text", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}

	since := putToSleep(t, k, rt, obj)
	if names := listNames(t, c); len(names) != before || before == 0 {
		t.Fatalf("asleep, %d tools listed; awake %d", len(names), before)
	}
	// Falling asleep ended it (the pod is gone); the agent's session with
	// the bridge stays, and its next calls get a new one on the new pod.
	testkit.Eventually(t, "the agent's upstream session ends with the pod", func() bool {
		return metric(t, rt, `mcp_bridge_upstream_sessions_closed_total{reason="retired",server="everything"}`) == 1
	})
	progress := hearProgress(c)
	var results []<-chan callResult
	results = append(results, callWithProgressAsync(c, "mcp.everything.test_simple_text", `{}`, "wake-1"))
	for i := 1; i < 20; i++ {
		results = append(results, callAsync(c, "mcp.everything.test_simple_text", `{}`))
	}
	testkit.Eventually(t, "the wake is written", func() bool {
		return metric(t, rt, `mcp_bridge_activity_lease_writes_total{kind="wake"}`) == 1 &&
			getLease(t, k, ns, "everything").Spec.RenewTime.After(since)
	})
	testkit.Eventually(t, "the waiting agent hears that the server is asleep", func() bool {
		return strings.Contains(progress.first(), `"progressToken":"wake-1"`) && strings.Contains(progress.first(), "Sleeping")
	})
	updateStatus(t, k, obj, func(s *v1alpha1.MCPServerStatus) {
		setReady(s, metav1.ConditionFalse, v1alpha1.ReasonWaking, "a call woke it")
	})
	testkit.Eventually(t, "the waiting agent hears that the server wakes", func() bool {
		progress.mu.Lock()
		defer progress.mu.Unlock()
		return strings.Contains(strings.Join(progress.params, "\n"), "is Waking")
	})
	updateStatus(t, k, obj, func(s *v1alpha1.MCPServerStatus) {
		s.Endpoint = &v1alpha1.Endpoint{URL: fresh.URL, PodName: "pod-2"}
		setReady(s, metav1.ConditionTrue, v1alpha1.ReasonServing, "the catalog is published")
	})
	for i, r := range results {
		select {
		case got := <-r:
			if got.err != nil {
				t.Fatalf("call %d: %v", i, got.err)
			}
			if firstText(t, got.res) == "" {
				t.Fatalf("call %d answered %s", i, got.res)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("call %d was not answered after the wake", i)
		}
	}
	if n := metric(t, rt, `mcp_bridge_activity_lease_writes_total{kind="wake"}`); n != 1 {
		t.Fatalf("20 calls during one sleep: %d wake writes, want 1", n)
	}
	if old.Calls() != 1 || fresh.Calls() != 20 {
		t.Fatalf("calls sent: %d to the old pod, %d to the new one; want 1 (before the sleep) and 20", old.Calls(), fresh.Calls())
	}
	// Two sessions on the new pod: the connection's own (the live catalog)
	// and one for the agent's session, shared by its 20 calls.
	if n := fresh.Requests("initialize"); n != 2 {
		t.Fatalf("the new pod saw %d initialize requests; want 2: the bridge's and the agent's new upstream session", n)
	}
	if n := metric(t, rt, `mcp_bridge_wake_wait_seconds_count{outcome="woken"}`); n != 20 {
		t.Fatalf("wake waits counted woken: %d, want 20", n)
	}
}

// TestFailedWakeAnswersEveryWaitingCall: a wake that ends in ImagePullFailed
// answers each call that waited with that reason; none reaches a server.
func TestFailedWakeAnswersEveryWaitingCall(t *testing.T) {
	const ns = "nowake"
	fwd := peer(t)
	rt, k, obj, c, _ := servedTo(t, ns, fwd, nil)
	createLease(t, k, ns, "everything", 5*time.Minute)
	since := putToSleep(t, k, rt, obj)
	var results []<-chan callResult
	for i := 0; i < 5; i++ {
		results = append(results, callAsync(c, "mcp.everything.test_simple_text", `{}`))
	}
	testkit.Eventually(t, "the wake is written", func() bool {
		return metric(t, rt, `mcp_bridge_activity_lease_writes_total{kind="wake"}`) == 1 &&
			getLease(t, k, ns, "everything").Spec.RenewTime.After(since)
	})
	// As the controller writes it: the catalog stays published for a pod
	// that cannot start (TestFailedWakeThatWithdrewTheCatalog has the
	// reasons that withdraw it).
	updateStatus(t, k, obj, func(s *v1alpha1.MCPServerStatus) {
		setReady(s, metav1.ConditionFalse, v1alpha1.ReasonImagePullFailed, `image "everything:nope" cannot be pulled`)
	})
	for i, r := range results {
		select {
		case got := <-r:
			d := awayOf(t, got.err)
			if d.Reason != v1alpha1.ReasonImagePullFailed || !strings.Contains(d.Message, "everything:nope") || !d.Retryable {
				t.Fatalf("call %d: %+v", i, d)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("call %d was not answered when the wake failed", i)
		}
	}
	if fwd.Calls() != 0 {
		t.Fatalf("%d calls reached a server that never woke", fwd.Calls())
	}
}

// TestWakeWithinTheCallsDeadline: a server that does not wake before the
// call's deadline answers the call with its reason, retryable.
func TestWakeWithinTheCallsDeadline(t *testing.T) {
	const ns = "slowwake"
	fwd := peer(t)
	rt, k, obj, c, _ := servedTo(t, ns, fwd, func(o *Options) { o.Bridge.CallTimeout = time.Second })
	createLease(t, k, ns, "everything", 5*time.Minute)
	since := putToSleep(t, k, rt, obj)
	start := time.Now()
	_, err := c.CallTool(testkit.Context(t), "mcp.everything.test_simple_text", json.RawMessage(`{}`))
	d := awayOf(t, err)
	if d.Reason != v1alpha1.ReasonSleeping || !d.Retryable || d.RetryAfterMs == nil || !strings.Contains(err.Error(), "did not wake within the call's deadline") {
		t.Fatalf("a call past its deadline: %v (%+v)", err, d)
	}
	if took := time.Since(start); took < time.Second || took > 5*time.Second {
		t.Fatalf("the call waited %s; its deadline is 1s", took)
	}
	if !getLease(t, k, ns, "everything").Spec.RenewTime.After(since) {
		t.Fatal("the wake was not written")
	}
	if n := metric(t, rt, `mcp_bridge_wake_wait_seconds_count{outcome="timeout"}`); n != 1 {
		t.Fatalf("timeouts counted: %d, want 1", n)
	}
}

// TestAwayServersAnswerTruthfully: a call to a known tool of a server that
// is restarting, starting again, or failed for good is answered
// CodeServerAway with the Ready reason and when to retry, never "unknown
// tool"; the catalog stays listed while the server is expected back, goes
// when it gave up, and a suspended server's goes at once.
func TestAwayServersAnswerTruthfully(t *testing.T) {
	const ns = "away"
	fwd := peer(t)
	rt, k, obj, c, listed := servedTo(t, ns, fwd, nil)

	next := time.Now().Add(4 * time.Second)
	for _, tc := range []struct {
		reason    string
		change    func(*v1alpha1.MCPServerStatus)
		listed    bool
		retryable bool
		retryMax  int64
	}{
		{v1alpha1.ReasonRestarting, func(s *v1alpha1.MCPServerStatus) {
			s.Endpoint = nil
			s.Restarts = v1alpha1.RestartStatus{Consecutive: 1, Total: 1, LastExitReason: "Error (exit code 2)", NextRestartTime: &metav1.MicroTime{Time: next}}
			setReady(s, metav1.ConditionFalse, v1alpha1.ReasonRestarting, "restarting in 4s after crash 1")
		}, true, true, 4000},
		{v1alpha1.ReasonStarting, func(s *v1alpha1.MCPServerStatus) {
			s.Restarts.NextRestartTime = nil
			setReady(s, metav1.ConditionFalse, v1alpha1.ReasonStarting, "the pod was deleted; a new one starts")
		}, true, true, 1000},
		{v1alpha1.ReasonProbeFailed, func(s *v1alpha1.MCPServerStatus) {
			setReady(s, metav1.ConditionFalse, v1alpha1.ReasonProbeFailed, "the probe timed out")
		}, true, true, 1000},
		{v1alpha1.ReasonPermanentlyFailed, func(s *v1alpha1.MCPServerStatus) {
			setReady(s, metav1.ConditionFalse, v1alpha1.ReasonPermanentlyFailed, "gave up after 4 crashes")
		}, false, false, 0},
	} {
		updateStatus(t, k, obj, tc.change)
		want := tc.reason
		testkit.Eventually(t, "the bridge sees the server "+want, func() bool {
			a, ok := rt.Registry.Away("everything")
			return ok && a.Reason == want
		})
		_, err := c.CallTool(testkit.Context(t), "mcp.everything.test_simple_text", json.RawMessage(`{}`))
		d := awayOf(t, err)
		if d.Reason != want || d.Server != "everything" || d.Retryable != tc.retryable {
			t.Fatalf("%s: %+v", want, d)
		}
		switch {
		case tc.retryable && (d.RetryAfterMs == nil || *d.RetryAfterMs > tc.retryMax || *d.RetryAfterMs < tc.retryMax/2):
			t.Fatalf("%s: retryAfterMs %v, want about %d", want, d.RetryAfterMs, tc.retryMax)
		case !tc.retryable && d.RetryAfterMs != nil:
			t.Fatalf("%s: retryAfterMs %d for a server that will not come back", want, *d.RetryAfterMs)
		}
		if n := len(listNames(t, c)); tc.listed != (n == listed) || !tc.listed && n != 0 {
			t.Fatalf("%s: %d tools listed, %d when served", want, n, listed)
		}
		if n := metric(t, rt, `mcp_bridge_server_away_refusals_total{reason="`+want+`",server="everything"}`); n != 1 {
			t.Fatalf("%s: %d refusals counted, want 1", want, n)
		}
	}
	if fwd.Calls() != 0 {
		t.Fatalf("%d calls reached a server that was away", fwd.Calls())
	}

	// Suspended: unregistered at once, its tools unknown.
	var cur v1alpha1.MCPServer
	if err := k.Get(testkit.Context(t), client.ObjectKeyFromObject(obj), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Suspend = true
	if err := k.Update(testkit.Context(t), &cur); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "a suspended server is gone", func() bool {
		_, ok := rt.Registry.Away("everything")
		return !ok
	})
	_, err := c.CallTool(testkit.Context(t), "mcp.everything.test_simple_text", json.RawMessage(`{}`))
	if rpcCode(err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), "unknown tool") {
		t.Fatalf("a suspended server's tool: %v, want unknown tool", err)
	}
}

// TestFailedWakeThatWithdrewTheCatalog: a wake that ends with the catalog
// withdrawn, as the controller does when the server gives up
// (PermanentlyFailed) or its new catalog is refused, still answers the
// waiting calls with that reason, not as if the server had left the scope.
func TestFailedWakeThatWithdrewTheCatalog(t *testing.T) {
	const ns = "wakegaveup"
	fwd := peer(t)
	rt, k, obj, c, _ := servedTo(t, ns, fwd, nil)
	createLease(t, k, ns, "everything", 5*time.Minute)
	since := putToSleep(t, k, rt, obj)
	results := []<-chan callResult{
		callAsync(c, "mcp.everything.test_simple_text", `{}`),
		callAsync(c, "mcp.everything.test_simple_text", `{}`),
	}
	testkit.Eventually(t, "the wake is written", func() bool {
		return getLease(t, k, ns, "everything").Spec.RenewTime.After(since)
	})
	updateStatus(t, k, obj, func(s *v1alpha1.MCPServerStatus) {
		s.Tools, s.Prompts, s.CatalogDigest, s.ToolCount, s.Capabilities, s.ServerInfo = nil, nil, "", 0, nil, nil
		setReady(s, metav1.ConditionFalse, v1alpha1.ReasonPermanentlyFailed, "gave up after 4 crashes in a row")
	})
	for i, r := range results {
		select {
		case got := <-r:
			d := awayOf(t, got.err)
			if d.Reason != v1alpha1.ReasonPermanentlyFailed || !strings.Contains(d.Message, "gave up") || d.Retryable {
				t.Fatalf("call %d: %+v (%v)", i, d, got.err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("call %d was not answered when the wake failed", i)
		}
	}
	if n := metric(t, rt, `mcp_bridge_wake_wait_seconds_count{outcome="failed"}`); n != 2 {
		t.Fatalf("failed wakes counted: %d, want 2", n)
	}
	if fwd.Calls() != 0 {
		t.Fatalf("%d calls reached a server that never woke", fwd.Calls())
	}
}
