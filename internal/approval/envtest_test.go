package approval

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/canonjson"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// apiserver is started once per test binary, on first use.
var apiserver testenv.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	apiserver.Stop()
	os.Exit(code)
}

var nsSeq atomic.Int64

// setup starts (once) a real API server and returns a client and a fresh
// namespace for one test.
func setup(t *testing.T) (client.Client, string) {
	t.Helper()
	cfg, err := apiserver.Start()
	if err != nil {
		t.Fatalf("while starting envtest: %v", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("approvals-%d", nsSeq.Add(1))
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return c, ns
}

// replica is one bridge replica's broker: its own watch of ToolApprovals
// (an informer of its own cache), Events recorded to the API server.
func replica(t *testing.T, c client.Client, reg prometheus.Registerer) *Broker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ca, err := cache.New(cfgOf(t), cache.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	inf, err := ca.GetInformer(ctx, &v1alpha1.ToolApproval{})
	if err != nil {
		t.Fatal(err)
	}
	b := NewBroker(c, reg)
	if err := b.Watch(inf); err != nil {
		t.Fatal(err)
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		t.Fatal("the ToolApproval cache did not sync")
	}
	cs := kubernetes.NewForConfigOrDie(cfgOf(t))
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	t.Cleanup(broadcaster.Shutdown)
	b.Recorder = broadcaster.NewRecorder(testenv.Scheme(), "mcp-operator-bridge")
	return b
}

func cfgOf(t *testing.T) *rest.Config {
	cfg, err := apiserver.Start()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func request(ns string, timeout time.Duration) Request {
	return Request{
		Namespace: ns, Server: "fs", Method: "tools/call", Target: "mcp.fs.write_file",
		Args: json.RawMessage(`{"path":"/data/report.txt","content":"hello"}`), ArgsPreview: `{"content":"hello","path":"/data/report.txt"}`,
		Requester: v1alpha1.ApprovalRequester{Username: "system:serviceaccount:agents:planner", Groups: []string{"system:serviceaccounts"}, Session: "s-1"},
		Risk:      v1alpha1.RiskDestructive, Rules: []string{"policy:" + ns + "/p#rules[0]"}, Reason: "writes need a person",
		Modes: []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowOnce}, ToolCallID: "tc-1", Timeout: timeout,
	}
}

type asked struct {
	outcome Outcome
	err     error
}

// ask runs b.Ask in the background, as a request waiting in the bridge.
func ask(ctx context.Context, b *Broker, r Request) <-chan asked {
	ch := make(chan asked, 1)
	go func() {
		o, err := b.Ask(ctx, r)
		ch <- asked{o, err}
	}()
	return ch
}

// created waits for the one ToolApproval of ns to appear with its Pending
// status.
func created(t *testing.T, c client.Client, ns string) *v1alpha1.ToolApproval {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var list v1alpha1.ToolApprovalList
		if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) > 1 {
			t.Fatalf("%d ToolApprovals for one request", len(list.Items))
		}
		if len(list.Items) == 1 && list.Items[0].Status.Phase == v1alpha1.ApprovalPending {
			return &list.Items[0]
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no Pending ToolApproval appeared")
	return nil
}

func wait(t *testing.T, ch <-chan asked) Outcome {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("Ask: %v", r.err)
		}
		return r.outcome
	case <-time.After(30 * time.Second):
		t.Fatal("the request still waits 30s after it should have ended")
	}
	return Outcome{}
}

func get(t *testing.T, c client.Client, ns, name string) *v1alpha1.ToolApproval {
	t.Helper()
	var a v1alpha1.ToolApproval
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &a); err != nil {
		t.Fatal(err)
	}
	return &a
}

// eventReasons are the reasons of the Events regarding the approval, waited
// for until want are all there (the recorder sends them asynchronously).
func eventReasons(t *testing.T, c client.Client, a *v1alpha1.ToolApproval, want ...string) []string {
	t.Helper()
	var got []string
	for start := time.Now(); time.Since(start) < 20*time.Second; time.Sleep(100 * time.Millisecond) {
		var list eventsv1.EventList
		if err := c.List(context.Background(), &list, client.InNamespace(a.Namespace)); err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, e := range list.Items {
			if e.Regarding.Name == a.Name && e.Regarding.Kind == "ToolApproval" {
				got = append(got, e.Reason)
			}
		}
		all := true
		for _, w := range want {
			all = all && slices.Contains(got, w)
		}
		if all {
			return got
		}
	}
	t.Fatalf("events of %s: %v, want %v", a.Name, got, want)
	return nil
}

func TestApprovedRequest(t *testing.T) {
	c, ns := setup(t)
	reg := prometheus.NewRegistry()
	b := replica(t, c, reg)
	r := request(ns, time.Minute)
	before := time.Now()
	done := ask(context.Background(), b, r)

	a := created(t, c, ns)
	req := a.Spec.Request
	digest, err := canonjson.ArgumentsDigest(r.Args)
	if err != nil {
		t.Fatal(err)
	}
	if req.Requester.Username != r.Requester.Username || req.Requester.Session != "s-1" || req.Target != r.Target ||
		req.Method != "tools/call" || req.Server != "fs" || req.Risk != v1alpha1.RiskDestructive || req.ToolCallID != "tc-1" ||
		req.ArgumentsSHA256 != digest || req.ArgumentsPreview != r.ArgsPreview || len(req.Rules) != 1 || req.Reason != r.Reason {
		t.Errorf("request = %+v, want it bound to the exact request %+v (digest %s)", req, r, digest)
	}
	if a.Labels[LabelServer] != "fs" || !strings.HasPrefix(a.Name, "fs-") {
		t.Errorf("name %s, labels %v: want fs-<suffix> and the server label", a.Name, a.Labels)
	}
	if exp := req.ExpiresAt.Time; exp.Before(before.Add(time.Minute).Truncate(time.Second)) || exp.After(time.Now().Add(time.Minute+time.Second)) {
		t.Errorf("expiresAt %s, want a minute from the request", exp)
	}
	if n := testutil.ToFloat64(b.pending); n != 1 {
		t.Errorf("pending approvals = %v, want 1", n)
	}
	select {
	case <-done:
		t.Fatal("the request went on before anyone decided")
	case <-time.After(200 * time.Millisecond):
	}

	testenv.DecideApproval(t, c, a, v1alpha1.VerdictAllowOnce, "alice", "checked the path")
	o := wait(t, done)
	if o.Phase != v1alpha1.ApprovalApproved || o.Decider != "alice" || o.Comment != "checked the path" || o.Verdict != v1alpha1.VerdictAllowOnce {
		t.Errorf("outcome = %+v, want approved once by alice with her comment", o)
	}
	if o.Ref() != "approval:"+ns+"/"+a.Name {
		t.Errorf("ref = %s", o.Ref())
	}
	st := get(t, c, ns, a.Name).Status
	if st.Phase != v1alpha1.ApprovalApproved || st.FinishedAt == nil || !strings.Contains(st.Message, "alice") {
		t.Errorf("status = %+v, want Approved with finishedAt and the decider", st)
	}
	if n := testutil.ToFloat64(b.pending); n != 0 {
		t.Errorf("pending approvals = %v after the decision, want 0", n)
	}
	eventReasons(t, c, a, "Requested", "Approved")
}

func TestDeniedRequest(t *testing.T) {
	c, ns := setup(t)
	b := replica(t, c, nil)
	done := ask(context.Background(), b, request(ns, time.Minute))
	a := created(t, c, ns)
	testenv.DecideApproval(t, c, a, v1alpha1.VerdictDeny, "bob", "not on a Friday")
	o := wait(t, done)
	if o.Phase != v1alpha1.ApprovalDenied || o.Decider != "bob" || o.Comment != "not on a Friday" {
		t.Errorf("outcome = %+v, want denied by bob", o)
	}
	if st := get(t, c, ns, a.Name).Status; st.Phase != v1alpha1.ApprovalDenied {
		t.Errorf("status = %+v, want Denied", st)
	}
	eventReasons(t, c, a, "Requested", "Denied")
}

func TestExpiredRequest(t *testing.T) {
	c, ns := setup(t)
	b := replica(t, c, nil)
	start := time.Now()
	done := ask(context.Background(), b, request(ns, 2*time.Second))
	a := created(t, c, ns)
	o := wait(t, done)
	if o.Phase != v1alpha1.ApprovalExpired {
		t.Fatalf("outcome = %+v, want Expired", o)
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("expired after %s, before its 2s timeout", d)
	}
	if st := get(t, c, ns, a.Name).Status; st.Phase != v1alpha1.ApprovalExpired || st.FinishedAt == nil {
		t.Errorf("status = %+v, want Expired with finishedAt", st)
	}
	eventReasons(t, c, a, "Requested", "Expired")
}

func TestCancelledWhenTheAgentGoesAway(t *testing.T) {
	c, ns := setup(t)
	b := replica(t, c, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := ask(ctx, b, request(ns, time.Minute))
	a := created(t, c, ns)
	cancel()
	o := wait(t, done)
	if o.Phase != v1alpha1.ApprovalCancelled {
		t.Fatalf("outcome = %+v, want Cancelled", o)
	}
	if st := get(t, c, ns, a.Name).Status; st.Phase != v1alpha1.ApprovalCancelled {
		t.Errorf("status = %+v, want Cancelled", st)
	}
}

func TestAChangedRequestNeverApproves(t *testing.T) {
	// The admission policy keeps the request immutable (test/api); this is
	// the broker's own check for an API server without it: a decision
	// approves the exact request that waits, never one whose caller,
	// session, target, arguments or call were changed under it.
	other, err := canonjson.ArgumentsDigest(json.RawMessage(`{"path":"/etc/passwd"}`))
	if err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(r *v1alpha1.ApprovalRequest){
		"arguments": func(r *v1alpha1.ApprovalRequest) { r.ArgumentsSHA256 = other },
		"requester": func(r *v1alpha1.ApprovalRequest) { r.Requester.Username = "system:serviceaccount:agents:other" },
		"session":   func(r *v1alpha1.ApprovalRequest) { r.Requester.Session = "s-2" },
		"target":    func(r *v1alpha1.ApprovalRequest) { r.Target = "mcp.fs.move_file" },
		"call":      func(r *v1alpha1.ApprovalRequest) { r.ToolCallID = "tc-2" },
	} {
		t.Run(name, func(t *testing.T) {
			c, ns := setup(t)
			b := replica(t, c, nil)
			done := ask(context.Background(), b, request(ns, time.Minute))
			a := created(t, c, ns)
			change(&a.Spec.Request)
			a.Spec.Decision = &v1alpha1.ApprovalDecision{Verdict: v1alpha1.VerdictAllowOnce, Decider: "alice"}
			if err := c.Update(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			if o := wait(t, done); o.Phase != v1alpha1.ApprovalDenied || !strings.Contains(o.Message, "changed") {
				t.Errorf("outcome = %+v, want denied because the request changed", o)
			}
		})
	}
}

func TestADecisionReachesAnotherReplica(t *testing.T) {
	c, ns := setup(t)
	asking := replica(t, c, nil)
	other := replica(t, c, nil)
	done := ask(context.Background(), asking, request(ns, time.Minute))
	a := created(t, c, ns)

	// The other replica, with its own watch, waits on the same approval.
	// It is decided once that replica has read it undecided (Wait reads
	// the clock right after), so the decision can only reach it through
	// its watch.
	waiting := make(chan struct{})
	var once sync.Once
	other.Now = func() time.Time {
		once.Do(func() { close(waiting) })
		return time.Now()
	}
	seen := make(chan Outcome, 1)
	go func() {
		o, _ := other.Wait(context.Background(), a)
		seen <- o
	}()
	select {
	case <-waiting:
	case <-time.After(30 * time.Second):
		t.Fatal("the other replica never started waiting")
	}
	testenv.DecideApproval(t, c, a, v1alpha1.VerdictAllowOnce, "carol", "")
	if o := wait(t, done); o.Phase != v1alpha1.ApprovalApproved || o.Decider != "carol" {
		t.Errorf("asking replica: %+v", o)
	}
	select {
	case o := <-seen:
		if o.Phase != v1alpha1.ApprovalApproved || o.Decider != "carol" {
			t.Errorf("other replica: %+v, want approved by carol", o)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the other replica never saw the decision")
	}
}

func TestWaitOnAnAlreadyDecidedApproval(t *testing.T) {
	// A replica that starts waiting after the decision (it subscribed late)
	// reads it at once instead of waiting for the expiry.
	c, ns := setup(t)
	asking := replica(t, c, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := ask(ctx, asking, request(ns, time.Minute))
	a := created(t, c, ns)
	testenv.DecideApproval(t, c, a, v1alpha1.VerdictDeny, "dave", "")
	wait(t, done)
	late := replica(t, c, nil)
	o, err := late.Wait(context.Background(), a)
	if err != nil || o.Phase != v1alpha1.ApprovalDenied || o.Decider != "dave" {
		t.Errorf("late wait: %+v, %v", o, err)
	}
}

func TestWebhookGetsSignedNotifications(t *testing.T) {
	c, ns := setup(t)
	secret := []byte("0123456789abcdef-shared")
	var mu sync.Mutex
	var got []Notification
	var badSignatures atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get(SignatureHeader) != Sign(secret, body) || r.Header.Get("Content-Type") != "application/json" {
			badSignatures.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var n Notification
		if err := json.Unmarshal(body, &n); err != nil {
			t.Errorf("webhook body: %v", err)
		}
		mu.Lock()
		got = append(got, n)
		mu.Unlock()
	}))
	defer receiver.Close()
	wh, err := NewWebhook(receiver.URL, secret)
	if err != nil {
		t.Fatal(err)
	}
	b := replica(t, c, nil)
	b.Notifier = wh
	done := ask(context.Background(), b, request(ns, time.Minute))
	a := created(t, c, ns)
	testenv.DecideApproval(t, c, a, v1alpha1.VerdictAllowOnce, "erin", "ok")
	wait(t, done)

	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if badSignatures.Load() != 0 || len(got) != 2 {
		t.Fatalf("got %d notifications (%d with a bad signature), want 2 signed ones", len(got), badSignatures.Load())
	}
	byType := map[string]Notification{got[0].Type: got[0], got[1].Type: got[1]}
	req, ok := byType[EventRequested]
	if !ok || req.Name != a.Name || req.Namespace != ns || req.Request.Target != "mcp.fs.write_file" || !strings.Contains(req.Decide, "kubectl mcp approve "+a.Name) {
		t.Errorf("requested notification: %+v", req)
	}
	if !strings.Contains(req.Request.ArgumentsPreview, "report") || req.Request.ArgumentsSHA256 == "" {
		t.Errorf("requested notification carries preview %q and digest %q", req.Request.ArgumentsPreview, req.Request.ArgumentsSHA256)
	}
	appr, ok := byType[EventApproved]
	if !ok || appr.Decision == nil || appr.Decision.Decider != "erin" || appr.Phase != v1alpha1.ApprovalApproved {
		t.Errorf("approved notification: %+v", appr)
	}
}

func TestWebhookSettingsAreChecked(t *testing.T) {
	for _, c := range []struct{ url, secret, want string }{
		{"ftp://x/hook", "0123456789abcdef", "http:// or https://"},
		{"/relative", "0123456789abcdef", "http:// or https://"},
		{"https://hooks.example/x", "short", "at least 16 bytes"},
	} {
		if _, err := NewWebhook(c.url, []byte(c.secret)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewWebhook(%q, %q) = %v, want an error saying %q", c.url, c.secret, err, c.want)
		}
	}
}

func TestWebhookReportsAFailingReceiver(t *testing.T) {
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) }))
	defer receiver.Close()
	wh, err := NewWebhook(receiver.URL, []byte("0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Notify(context.Background(), Notification{Type: EventRequested}); err == nil || !strings.Contains(err.Error(), "502") {
		t.Errorf("Notify = %v, want the receiver's 502", err)
	}
}

func TestWebhookFollowsNoRedirect(t *testing.T) {
	var followed atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { followed.Add(1) }))
	defer elsewhere.Close()
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL, http.StatusTemporaryRedirect)
	}))
	defer receiver.Close()
	wh, err := NewWebhook(receiver.URL, []byte("0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Notify(context.Background(), Notification{Type: EventRequested}); err == nil || !strings.Contains(err.Error(), "307") {
		t.Errorf("Notify = %v, want the receiver's 307 as an error", err)
	}
	if n := followed.Load(); n != 0 {
		t.Errorf("the redirect was followed %d times; want never", n)
	}
}

// TestNobodyApprovesTheirOwnRequest: the broker refuses a decision by the
// requester itself, even where no admission policy checks the decider
// (envtest runs without it).
func TestNobodyApprovesTheirOwnRequest(t *testing.T) {
	c, ns := setup(t)
	b := replica(t, c, nil)
	r := request(ns, time.Minute)
	done := ask(context.Background(), b, r)
	a := created(t, c, ns)
	testenv.DecideApproval(t, c, a, v1alpha1.VerdictAllowOnce, r.Requester.Username, "")
	if o := wait(t, done); o.Phase != v1alpha1.ApprovalDenied || !strings.Contains(o.Message, "cannot decide") {
		t.Fatalf("outcome = %+v, want Denied because the requester decided", o)
	}
}

// TestApprovedAfterTheAgentLeftIsCancelled: a decision that arrives when the
// agent's request has ended is recorded Cancelled, so the bridge never
// makes the call. Wait is given the object as created (no decision yet) and
// a context that has ended: the decision is found only while recording the
// cancellation, which is the order the race produces.
func TestApprovedAfterTheAgentLeftIsCancelled(t *testing.T) {
	c, ns := setup(t)
	b := replica(t, c, nil)
	done := ask(context.Background(), b, request(ns, time.Minute))
	a := created(t, c, ns)
	testenv.DecideApproval(t, c, a, v1alpha1.VerdictAllowOnce, "alice", "")
	wait(t, done)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o, err := b.Wait(ctx, a)
	if err != nil || o.Phase != v1alpha1.ApprovalCancelled || o.Decider != "alice" {
		t.Fatalf("Wait after the agent left = %+v, %v; want Cancelled", o, err)
	}
	if st := get(t, c, ns, a.Name).Status; st.Phase != v1alpha1.ApprovalCancelled {
		t.Errorf("status = %+v, want Cancelled", st)
	}
}

func TestLongRequestsAreCutToTheSchemasBounds(t *testing.T) {
	c, ns := setup(t)
	b := replica(t, c, nil)
	r := request(ns, time.Minute)
	for i := range 100 {
		r.Requester.Groups = append(r.Requester.Groups, fmt.Sprintf("group-%d", i))
	}
	for i := range 40 {
		r.Rules = append(r.Rules, fmt.Sprintf("policy:%s/p#rules[%d]", ns, i))
	}
	r.Reason = strings.Repeat("é", 2000)
	r.ArgsPreview = strings.Repeat("x", 10000)
	ctx, cancel := context.WithCancel(context.Background())
	done := ask(ctx, b, r)
	a := created(t, c, ns)
	if n := len(a.Spec.Request.Requester.Groups); n != 64 {
		t.Errorf("%d groups stored, want the first 64", n)
	}
	if n := len(a.Spec.Request.Rules); n != 32 {
		t.Errorf("%d rules stored, want the first 32", n)
	}
	if len(a.Spec.Request.ArgumentsPreview) > 2048+len("…") {
		t.Errorf("a preview of %d bytes", len(a.Spec.Request.ArgumentsPreview))
	}
	cancel()
	if o := wait(t, done); o.Phase != v1alpha1.ApprovalCancelled {
		t.Errorf("outcome %+v", o)
	}
}

// proxyTo is a reverse proxy to the API server at cfg, with cfg's
// credentials: the tests' faults are made in front of it.
func proxyTo(t *testing.T, cfg *rest.Config) *httputil.ReverseProxy {
	t.Helper()
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	upstream, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = upstream
	return proxy
}

// stallingAPIServer passes requests to the API server at cfg until stall
// is called; from then on it takes each request and never answers, as an
// overloaded or restarting API server does. A real API server cannot be
// made to do that on demand: this proxy is the fault.
func stallingAPIServer(t *testing.T, cfg *rest.Config) (*rest.Config, func()) {
	t.Helper()
	proxy := proxyTo(t, cfg)
	var stalled atomic.Bool
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stalled.Load() {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return &rest.Config{Host: srv.URL}, func() { stalled.Store(true) }
}

// An API server that stops answering holds a request no longer than the
// broker's APITimeout past the approval's own bounds: its creation fails
// within it, and a request whose approval expires while the API server is
// stalled ends Expired, its status write given up after APITimeout.
func TestAStalledAPIServerHoldsNoRequest(t *testing.T) {
	c, ns := setup(t)
	proxied, stall := stallingAPIServer(t, cfgOf(t))
	pc, err := client.New(proxied, client.Options{Scheme: testenv.Scheme(), Mapper: c.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	b := replica(t, pc, nil)
	b.APITimeout = time.Second

	start := time.Now()
	done := ask(context.Background(), b, request(ns, 2*time.Second))
	created(t, c, ns)
	stall()
	select {
	case r := <-done:
		if r.err != nil || r.outcome.Phase != v1alpha1.ApprovalExpired {
			t.Fatalf("outcome %+v, error %v: want Expired", r.outcome, r.err)
		}
		if d := time.Since(start); d > 2*time.Second+3*time.Second {
			t.Errorf("the request ended %s after it was asked: its 2s timeout and the 1s bound on its status write allow about 3s", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a request whose approval expired is still held by a stalled API server after 20s")
	}

	start = time.Now()
	if _, err := b.Ask(context.Background(), request(ns, time.Minute)); err == nil {
		t.Fatal("a ToolApproval was created through a stalled API server")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("creating a ToolApproval through a stalled API server took %s, want its 1s bound", d)
	}
}

// answerLosingAPIServer is a proxy to the real API server of cfg that, while
// lose is above 0, passes a create (POST) on and drops its answer with the
// connection, one create less each time (while below 0, every create's):
// the object is stored but the client never hears so, as when a connection
// breaks just before the answer. A real API server cannot
// be made to lose an answer on demand.
func answerLosingAPIServer(t *testing.T, cfg *rest.Config) (*rest.Config, *atomic.Int32) {
	t.Helper()
	proxy := proxyTo(t, cfg)
	var lose atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && lose.Load() != 0 {
			if lose.Load() > 0 {
				lose.Add(-1)
			}
			proxy.ServeHTTP(httptest.NewRecorder(), r.WithContext(context.WithoutCancel(r.Context())))
			// Stored; the answer is lost with the connection.
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}, &lose
}

// replicaLosingAnswers is a replica whose API server is reached through
// answerLosingAPIServer, with c a client of the API server itself and ns a
// fresh namespace.
func replicaLosingAnswers(t *testing.T) (client.Client, string, *Broker, *atomic.Int32) {
	t.Helper()
	c, ns := setup(t)
	proxied, lose := answerLosingAPIServer(t, cfgOf(t))
	pc, err := client.New(proxied, client.Options{Scheme: testenv.Scheme(), Mapper: c.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	b := replica(t, pc, nil)
	b.APITimeout = 10 * time.Second
	return c, ns, b, lose
}

// A create whose answer is lost is sent again, and the object it stored is
// the request's: one ToolApproval, decided as any other.
func TestALostCreateAnswerAsksOnce(t *testing.T) {
	c, ns, b, lose := replicaLosingAnswers(t)
	lose.Store(1)
	done := ask(context.Background(), b, request(ns, time.Minute))
	a := created(t, c, ns) // fails on a second ToolApproval
	testenv.DecideApproval(t, c, a, v1alpha1.VerdictAllowOnce, "alice", "")
	if o := wait(t, done); o.Phase != v1alpha1.ApprovalApproved {
		t.Fatalf("outcome %+v, want Approved", o)
	}
	var list v1alpha1.ToolApprovalList
	if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil || len(list.Items) != 1 {
		t.Fatalf("%d ToolApprovals (%v), want the one", len(list.Items), err)
	}
}

// A request whose ToolApproval could not be created, though a create whose
// answer was lost stored it, leaves nothing for a person to decide: the
// object is removed.
func TestACreateNeverAnsweredLeavesNoApproval(t *testing.T) {
	c, ns, b, lose := replicaLosingAnswers(t)
	b.APITimeout = time.Second
	lose.Store(-1)
	if _, err := b.Ask(context.Background(), request(ns, time.Minute)); err == nil {
		t.Fatal("Ask succeeded though no create was answered")
	}
	lose.Store(0)
	testkit.Eventually(t, "the unanswered create's ToolApproval is removed", func() bool {
		var list v1alpha1.ToolApprovalList
		return c.List(context.Background(), &list, client.InNamespace(ns)) == nil && len(list.Items) == 0
	})
}

// An object already holding a request's name, made by someone else, is
// never taken for the request's own: the request is refused, the object
// left as it is.
func TestAnApprovalMadeByAnotherIsNotAdopted(t *testing.T) {
	c, ns, b, lose := replicaLosingAnswers(t)
	r := request(ns, time.Minute)
	planted := &v1alpha1.ToolApproval{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: approvalName(r.Server, r.ToolCallID)},
		Spec: v1alpha1.ToolApprovalSpec{Request: v1alpha1.ApprovalRequest{
			Requester: r.Requester, Method: r.Method, Server: r.Server, Target: r.Target, Risk: v1alpha1.RiskRead,
			Modes: []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowOnce, v1alpha1.ApprovalAllowSession}, ToolCallID: r.ToolCallID,
			ExpiresAt: metav1.Time{Time: time.Now().Add(time.Hour)},
		}},
	}
	if err := c.Create(context.Background(), planted); err != nil {
		t.Fatal(err)
	}
	lose.Store(1) // the request's own create looks lost, then finds the name taken
	if _, err := b.Ask(context.Background(), r); err == nil {
		t.Fatal("Ask went on with an approval someone else made")
	}
	if got := get(t, c, ns, planted.Name); got.UID != planted.UID || got.Spec.Request.Risk != v1alpha1.RiskRead || got.Status.Phase != "" {
		t.Errorf("the planted approval after the request: %+v, want it untouched", got)
	}
}

// A request already over creates nothing and says why.
func TestARequestAlreadyOverCreatesNothing(t *testing.T) {
	c, ns := setup(t)
	b := replica(t, c, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Ask(ctx, request(ns, time.Minute)); err == nil {
		t.Fatal("Ask of a request already over went on")
	}
	var list v1alpha1.ToolApprovalList
	if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil || len(list.Items) != 0 {
		t.Fatalf("%d ToolApprovals (%v), want none", len(list.Items), err)
	}
}
