package mcpbridge

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/once"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// ledgerOn is a once.Ledger in a fresh namespace of envtest's API server.
func ledgerOn(t *testing.T) (*once.Ledger, client.Client) {
	t.Helper()
	cfg, cs := startAPIServer(t)
	ns := freshNamespace("once")
	ensureNamespace(t, cs, ns)
	k, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return &once.Ledger{Client: k, Namespace: ns}, k
}

// TestAllowOnceRunsOnceAcrossReplicas: two bridge replicas sharing one API
// server (and the session key) are each sent the same allow_once answer, one
// after the other and then at once: the call runs once in all, the others are
// refused as used already (a replica that remembered only its own uses would
// run a state replayed to it once more).
func TestAllowOnceRunsOnceAcrossReplicas(t *testing.T) {
	ledger, _ := ledgerOn(t)
	up := testpeers.GoEverything(t, false)
	server := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice")}, rule("ask", "mcp.everything.*"))
	pol.Spec.Approval.Timeout = metav1.Duration{Duration: time.Minute}
	pol.Spec.Approval.Modes = []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowOnce}
	replica := func() *harness {
		return newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, func(c *Config) { c.Once = ledger })
	}
	a, b := replica(), replica()
	params := `"name":"mcp.everything.test_simple_text"`
	retryOf := func() string {
		state := resultString(statelessPost(t, a.url, "alice-token", "tools/call", params), "requestState")
		if state == "" {
			t.Fatal("the first call must be answered input_required")
		}
		return params + `,"requestState":` + string(mustJSON(state)) + `,"inputResponses":{"approval":{"action":"accept","content":{"decision":"allow_once"}}}`
	}
	ran := func(got []byte) bool { return strings.Contains(string(got), "simple text response") }

	retry := retryOf()
	if got := statelessPost(t, a.url, "alice-token", "tools/call", retry); !ran(got) {
		t.Fatalf("the allow_once retry on replica a must run: %s", got)
	}
	if got := statelessPost(t, b.url, "alice-token", "tools/call", retry); ran(got) || !strings.Contains(string(got), "used already") {
		t.Fatalf("the same retry replayed to replica b ran again or was not refused as used: %s", got)
	}

	// At once, to both replicas, several times each: one runs.
	retry = retryOf()
	var wg sync.WaitGroup
	var mu sync.Mutex
	runs := 0
	for i := range 8 {
		h := []*harness{a, b}[i%2]
		wg.Go(func() {
			if ran(statelessPost(t, h.url, "alice-token", "tools/call", retry)) {
				mu.Lock()
				runs++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if runs != 1 {
		t.Fatalf("one allow_once sent 8 times at once to two replicas ran %d times, want 1", runs)
	}
}

// TestLedgerSweepsExpiredRecords: a record past its time is deleted by the
// sweep (any replica's), one still in force stays, and a Lease not written
// by a Ledger is left alone.
func TestLedgerSweepsExpiredRecords(t *testing.T) {
	ledger, k := ledgerOn(t)
	now := time.Now()
	ledger.Now = func() time.Time { return now }
	ctx := context.Background()
	for key, until := range map[string]time.Time{"old": now.Add(time.Second), "live": now.Add(time.Hour)} {
		if fresh, err := ledger.Claim(ctx, "state", []byte(key), until); err != nil || !fresh {
			t.Fatalf("claim %s: %v %v", key, fresh, err)
		}
	}
	if fresh, err := ledger.Claim(ctx, "state", []byte("old"), now.Add(time.Second)); err != nil || fresh {
		t.Fatalf("a second claim of the same key: %v %v, want false", fresh, err)
	}
	foreign := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ledger.Namespace, Name: "someone-elses", Labels: map[string]string{once.LabelKind: "x"}}}
	if err := k.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	// Within the margin for the replicas' clocks an expired record stays.
	now = now.Add(once.SweepMargin - time.Second)
	if n, err := ledger.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("the sweep deleted %d (%v) within the margin, want 0", n, err)
	}
	now = now.Add(2 * time.Second)
	if n, err := ledger.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("the sweep deleted %d (%v), want 1", n, err)
	}
	var left coordinationv1.LeaseList
	if err := k.List(ctx, &left, client.InNamespace(ledger.Namespace)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range left.Items {
		names = append(names, l.Name)
	}
	if len(names) != 2 || !strings.Contains(strings.Join(names, ","), once.Name("state", []byte("live"))) {
		t.Fatalf("after the sweep: %v, want the live record and the foreign Lease", names)
	}
	// The expired key can be claimed again (it was deleted).
	if fresh, err := ledger.Claim(ctx, "state", []byte("old"), now.Add(time.Second)); err != nil || !fresh {
		t.Fatalf("a claim after the sweep: %v %v", fresh, err)
	}
	// A use over already (its time passed on this clock) is still recorded:
	// the API server takes no Lease duration under a second.
	if fresh, err := ledger.Claim(ctx, "state", []byte("late"), now.Add(-time.Second)); err != nil || !fresh {
		t.Fatalf("a claim whose time is past: %v %v, want recorded", fresh, err)
	}
}

// TestSessionEndedOnOneReplicaIsRefusedOnTheOther: two bridge replicas
// sharing one API server and the session key; a session opened on a and
// carried on by b is ended (DELETE) on a, and b refuses it from then on
// (404), as soon as its watch has the record, and ends it there (its
// upstream sessions with it) without waiting for a request naming it.
func TestSessionEndedOnOneReplicaIsRefusedOnTheOther(t *testing.T) {
	served := freshNamespace("ends")
	_, cs := startAPIServer(t)
	own := freshNamespace("bridge")
	ensureNamespace(t, cs, own)
	replica := func() (string, *Runtime) {
		rt, url, _, _ := startRuntimeWith(t, func(o *Options) { o.OnceNamespace = own }, served)
		return url + "/mcp", rt
	}
	a, _ := replica()
	b, rtB := replica()
	sid := openSession(t, a, "alice-token")
	list := func(url string) int {
		status, _, _ := post(t, url, "alice-token", sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, map[string]string{"MCP-Protocol-Version": "2025-11-25"})
		return status
	}
	if status := list(b); status != http.StatusOK {
		t.Fatalf("replica b carrying the session on: %d, want 200", status)
	}
	if n := rtB.Sessions.Len(); n != 1 {
		t.Fatalf("replica b holds %d sessions, want the one it carries on", n)
	}
	endSession(t, a, "alice-token", sid)
	ended := time.Now()
	// b ends the session it holds as its watch hears of the end, before
	// any request names it there.
	testkit.Eventually(t, "replica b ends the session it holds", func() bool { return rtB.Sessions.Len() == 0 })
	testkit.Eventually(t, "replica b refuses the session ended on a", func() bool { return list(b) == http.StatusNotFound })
	t.Logf("replica b refused the session %s after its DELETE on a", time.Since(ended).Round(time.Millisecond))
	if status := list(a); status != http.StatusNotFound {
		t.Fatalf("replica a after the DELETE: %d, want 404", status)
	}
}
