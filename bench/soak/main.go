// Command soak runs the operator on the dev cluster (`make dev`) for a long
// time under load and faults, and checks that nothing is lost, nothing runs
// twice, every call's audit chain is whole and nothing grows. Run it with
// `make soak` (SOAK_MINUTES, 60 by default), which brings the dev cluster up
// and tears it down, also on failure or Ctrl-C.
//
// Load: -sessions agent sessions (half of the 2025-11-25 era, half of the
// 2026-07-28 era) calling at -rate calls per second in all: allowed calls,
// denied calls, calls a person approves (ToolApprovals decided by a
// scripted approver), calls the agent's own client approves (input_required;
// the allow-once retry is then replayed to every bridge replica, where each
// must refuse it), resource reads, prompts, subscriptions, 1 MiB results and
// a tool that streams progress; the bridge runs -replicas replicas.
//
// The recording upstream is this program: a remote MCPServer the bridge
// reaches on this machine's address on the pod network, counting every
// execution per call id. Faults a real server cannot make on demand
// (hanging, answering garbage, closing the connection mid-answer) are its
// modes; the others are real: the sample server's pod deleted every
// -kill-every, a bridge replica deleted, the controller's pod deleted, the
// API server restarted (hack/cluster/restart.sh), the sample server's
// NetworkPolicy rewritten.
//
// The report ends with one figure a line (faults injected, calls, lost, run
// twice, incomplete audit chains, pending approvals left, rss slope
// %/10min); the exit status is 1 when lost, run twice or incomplete is not
// 0.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/bench/internal/benchutil"
	mcpclient "github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/textcut"
)

const (
	recorderName = "soak-rec"
	agentName    = "soak-agent"
	// podNetworkHost is this machine's address on the dev cluster's pod
	// network (the CNI bridge's, hack/cluster/lib.sh): pods reach it.
	podNetworkHost = "10.244.0.1"
)

type soak struct {
	dev *benchutil.Dev
	rec *recorder
}

// approvalRetention is how long the soak's controller keeps a finished
// ToolApproval.
const approvalRetention = 2 * time.Minute

// samplesFile is where the readings of the processes go, when set;
// profilesDir where their heap and goroutine profiles go.
var (
	samplesFile = flag.String("samples", "", "a file to write every reading of the bridge and controller processes to (TSV), for a plot")
	profilesDir = flag.String("profiles", "", "a directory for heap and goroutine profiles of each bridge and controller process at the end of warm-up and of the load (the processes then run with --pprof-bind-address)")
)

func main() {
	minutes := flag.Float64("minutes", 60, "how long the load runs")
	sessions := flag.Int("sessions", 200, "agent sessions at once (half per era)")
	agents := flag.Int("agents", 20, "agents (ServiceAccounts) the sessions belong to, in turn")
	rate := flag.Float64("rate", 50, "calls per second, all sessions together")
	replicas := flag.Int("replicas", 3, "bridge replicas")
	killEvery := flag.Duration("kill-every", 3*time.Minute, "how often the sample server's pod is deleted")
	warmup := flag.Duration("warmup", 2*time.Minute, "time before memory, fds and goroutines are taken as flat")
	flag.Parse()
	// client-go's own log lines (a log stream cut at the end) are not the
	// report's.
	klog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	failed, err := run(ctx, time.Duration(*minutes*float64(time.Minute)), *sessions, *agents, *rate, *replicas, *killEvery, *warmup)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/soak:", err)
		os.Exit(1)
	}
	if failed {
		os.Exit(1)
	}
}

func run(ctx context.Context, d time.Duration, sessions, agents int, rate float64, replicas int, killEvery, warmup time.Duration) (bool, error) {
	dev, err := benchutil.ConnectDev(ctx)
	if err != nil {
		return false, err
	}
	s := &soak{dev: dev, rec: newRecorder()}
	ln, err := net.Listen("tcp", podNetworkHost+":0")
	if err != nil {
		return false, fmt.Errorf("listening on the pod network's host address: %w", err)
	}
	go func() { _ = http.Serve(ln, s.rec) }()
	if *profilesDir != "" {
		if err := os.MkdirAll(*profilesDir, 0o755); err != nil {
			return false, err
		}
		if err := withArgs(ctx, dev.CS, []string{"bridge", "controller"}, "--pprof-bind-address="+pprofAddr); err != nil {
			return false, err
		}
	}
	// The soak decides thousands of ToolApprovals an hour, far more than
	// people do: kept the default day, every replica's and the
	// controller's cache would grow with them all run long, and memory
	// would measure the retention window filling, not a leak.
	if err := withArgs(ctx, dev.CS, []string{"controller"}, "--approval-retention="+approvalRetention.String()); err != nil {
		return false, err
	}
	tokens, err := s.setUp(ctx, "http://"+ln.Addr().String()+"/mcp", int32(replicas), max(agents, 1))
	if err != nil {
		return false, fmt.Errorf("set-up: %w", err)
	}
	self, err := dev.CS.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}

	reps := newReplicaSet(dev.CS)
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	go reps.watch(watchCtx)
	sm := &sampler{}
	go sm.run(watchCtx, dev.CS, 15*time.Second)
	decided := 0
	requester := "system:serviceaccount:" + benchutil.DevNamespace + ":" + agentName + "-"
	go approver(watchCtx, dev.C, self.Status.UserInfo.Username, requester, &decided)

	tgt, err := s.targets(ctx, dev.BridgeURL, tokens[0])
	if err != nil {
		return false, err
	}
	l := &load{bridgeURL: dev.BridgeURL, tokens: tokens, target: tgt, replicas: reps}
	fmt.Printf("targets on the sample server: tool %s, resource %s, prompt %s\n", tgt.progressTool, tgt.resourceURI, tgt.prompt)
	fmt.Printf("soak: %s, %d sessions, %.0f calls/s, %d bridge replicas, upstream %s\n", d, sessions, rate, replicas, ln.Addr())
	start := time.Now()
	loadCtx, stopLoad := context.WithTimeout(ctx, d)
	defer stopLoad()
	faultsDone := make(chan []window, 1)
	go func() { faultsDone <- s.inject(loadCtx, start, s.schedule(d, killEvery)) }()
	if *profilesDir != "" {
		go func() {
			select {
			case <-loadCtx.Done():
			case <-time.After(warmup):
				saveProfiles(*profilesDir, "warm")
			}
		}()
	}
	l.run(loadCtx, sessions, rate)
	if *profilesDir != "" {
		saveProfiles(*profilesDir, "end")
	}
	windows := <-faultsDone
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	// Calls in flight have ended (each agent waits for its own); give the
	// replicas' audit writers and the approvals' status a moment.
	time.Sleep(10 * time.Second)
	pending, err := pendingApprovals(ctx, dev.C, requester)
	if err != nil {
		return false, err
	}
	stopWatching()
	return s.report(l, reps, sm, windows, pending, decided, warmup), nil
}

// setUp makes the recording upstream's MCPServer, the agent and its
// policies, scales the bridge, and waits until the bridge lists the
// recorder's tools. It returns the agents' tokens.
func (s *soak) setUp(ctx context.Context, upstreamURL string, replicas int32, agents int) ([]string, error) {
	c := s.dev.C
	srv := &mcpv1alpha1.MCPServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchutil.DevNamespace, Name: recorderName},
		Spec: mcpv1alpha1.MCPServerSpec{
			Transport: mcpv1alpha1.TransportStreamableHTTP,
			Remote:    &mcpv1alpha1.Remote{URL: upstreamURL},
		},
	}
	_ = c.Delete(ctx, srv)
	if err := s.waitFor(ctx, "the previous "+recorderName+" to go", func() (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(srv), &mcpv1alpha1.MCPServer{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, srv); err != nil {
		return nil, err
	}
	var tokens []string
	var subject []mcpv1alpha1.Subject
	for i := range agents {
		name := fmt.Sprintf("%s-%d", agentName, i)
		token, err := s.dev.AgentToken(ctx, name)
		if err != nil {
			return nil, err
		}
		tokens = append(tokens, token)
		subject = append(subject, mcpv1alpha1.Subject{Kind: mcpv1alpha1.SubjectServiceAccount, Name: name, Namespace: benchutil.DevNamespace})
	}
	rec := func(tool string) []string { return []string{"mcp." + recorderName + "." + tool} }
	policies := []*mcpv1alpha1.ToolPolicy{
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: benchutil.DevNamespace, Name: agentName},
			Spec: mcpv1alpha1.ToolPolicySpec{
				Subjects: subject,
				Rules: []mcpv1alpha1.ToolRule{
					{Tools: append(rec("record"), rec("large")...), Decision: mcpv1alpha1.DecisionAllow},
					{Tools: rec("forbidden"), Decision: mcpv1alpha1.DecisionDeny, Reason: "soak: always denied"},
					{Tools: []string{"mcp.everything.*"}, Decision: mcpv1alpha1.DecisionAllow},
				},
				Resources: []mcpv1alpha1.ResourceRule{{Servers: []string{"everything"}, URIs: []string{"*"}, Decision: mcpv1alpha1.DecisionAllow}},
				Prompts:   []mcpv1alpha1.PromptRule{{Prompts: []string{"mcp.everything.*"}, Decision: mcpv1alpha1.DecisionAllow}},
			},
		},
		asking(agentName+"-person", subject, rec("ask"), mcpv1alpha1.ChannelToolApproval),
		asking(agentName+"-client", subject, rec("confirm"), mcpv1alpha1.ChannelElicitation),
	}
	for _, p := range policies {
		_ = c.Delete(ctx, p)
		if err := c.Create(ctx, p); client.IgnoreAlreadyExists(err) != nil {
			return nil, err
		}
	}
	if _, err := s.dev.CS.AppsV1().Deployments(benchutil.DevBridgeNamespace).UpdateScale(ctx, benchutil.DevBridgeService, &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: benchutil.DevBridgeService, Namespace: benchutil.DevBridgeNamespace},
		Spec:       autoscalingv1.ScaleSpec{Replicas: replicas},
	}, metav1.UpdateOptions{}); err != nil {
		return nil, err
	}
	err := s.waitFor(ctx, "the bridge's replicas to be Ready and "+recorderName+" Ready", func() (bool, error) {
		dep, err := s.dev.CS.AppsV1().Deployments(benchutil.DevBridgeNamespace).Get(ctx, benchutil.DevBridgeService, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		var got mcpv1alpha1.MCPServer
		if err := c.Get(ctx, client.ObjectKeyFromObject(srv), &got); err != nil {
			return false, err
		}
		return dep.Status.ReadyReplicas == replicas && dep.Status.UpdatedReplicas == replicas && dep.Status.Replicas == replicas &&
			meta.IsStatusConditionTrue(got.Status.Conditions, "Ready"), nil
	})
	return tokens, err
}

func asking(name string, subject []mcpv1alpha1.Subject, tools []string, channel mcpv1alpha1.ApprovalChannel) *mcpv1alpha1.ToolPolicy {
	return &mcpv1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchutil.DevNamespace, Name: name},
		Spec: mcpv1alpha1.ToolPolicySpec{
			Subjects: subject,
			Rules:    []mcpv1alpha1.ToolRule{{Tools: tools, Decision: mcpv1alpha1.DecisionAsk, Reason: "soak: asked first"}},
			Approval: mcpv1alpha1.ApprovalSpec{
				Channels: []mcpv1alpha1.ApprovalChannel{channel},
				Modes:    []mcpv1alpha1.ApprovalMode{mcpv1alpha1.ApprovalAllowOnce},
				Timeout:  metav1.Duration{Duration: approvalTimeout},
			},
		},
	}
}

// targets reads the sample server's catalog through the bridge and picks
// what the agents call there; it waits until the recorder's tools are
// listed too.
func (s *soak) targets(ctx context.Context, url, token string) (target, error) {
	var t target
	l := &load{bridgeURL: url, tokens: []string{token}}
	err := s.waitFor(ctx, "the bridge to list both servers' tools, a resource and a prompt", func() (bool, error) {
		c, err := l.connect(ctx, token, mcpclient.EraSession)
		if err != nil {
			return false, nil
		}
		defer c.Close()
		names := func(items []json.RawMessage, key string) []string {
			var out []string
			for _, raw := range items {
				var v map[string]any
				_ = json.Unmarshal(raw, &v)
				field := key
				if key == "prompt" {
					if args, _ := v["arguments"].([]any); len(args) > 0 {
						continue
					}
					field = "name"
				}
				out = append(out, fmt.Sprint(v[field]))
			}
			return out
		}
		tools, _ := c.ListTools(ctx, mcpclient.Limits{})
		resources, _ := c.ListResources(ctx, mcpclient.Limits{})
		prompts, _ := c.ListPrompts(ctx, mcpclient.Limits{})
		toolNames := names(tools, "name")
		for _, n := range toolNames {
			if strings.HasPrefix(n, "mcp.everything.") && strings.Contains(n, "progress") {
				t.progressTool = n
			}
		}
		if uris := names(resources, "uri"); len(uris) > 0 {
			t.resourceURI = uris[0]
		}
		// A prompt that expands at once: the sample also has one that asks
		// its caller for input, which the bridge refuses to pass on.
		for _, p := range names(prompts, "prompt") {
			if t.prompt == "" || strings.Contains(p, "simple") {
				t.prompt = p
			}
		}
		return slices.Contains(toolNames, "mcp."+recorderName+".record") && t.progressTool != "" && t.resourceURI != "" && t.prompt != "", nil
	})
	return t, err
}

func (s *soak) waitFor(ctx context.Context, what string, done func() (bool, error)) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ok, err := done()
		if err != nil && !strings.Contains(err.Error(), "connect") {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: timed out", what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// report prints what the soak saw and says whether it failed.
func (s *soak) report(l *load, reps *replicaSet, sm *sampler, windows []window, pending, decided int, warmup time.Duration) bool {
	l.mu.Lock()
	records := slices.Clone(l.records)
	replays := l.replays
	l.mu.Unlock()

	fmt.Println()
	var calls, ok, lost, notSent, hinted, unhinted int
	byOp := map[string][2]int{}
	errorsBy := map[string]int{}
	example := map[string]string{}
	for _, r := range records {
		calls++
		c := byOp[r.op]
		c[0]++
		key := ""
		switch {
		case r.ok:
			ok++
			c[1]++
		case r.lost:
			lost++
			key = r.op + " lost"
		case r.notSent:
			notSent++
			key = r.op + " not sent (no connection: refused or the dial failed; safe to retry)"
		case r.hasHint:
			hinted++
			key = fmt.Sprintf("%s %d %s (says whether to retry)", r.op, r.code, r.reason)
		default:
			unhinted++
			key = fmt.Sprintf("%s %d %s (no retry verdict)", r.op, r.code, r.reason)
		}
		if key != "" {
			errorsBy[key]++
			if example[key] == "" {
				example[key] = textcut.Cut(r.errText, 240)
			}
		}
		byOp[r.op] = c
	}
	fmt.Printf("calls by kind (answered as wanted / made):")
	for _, op := range sortedKeys(byOp) {
		fmt.Printf(" %s %d/%d", op, byOp[op][1], byOp[op][0])
	}
	fmt.Println()
	fmt.Printf("answered as wanted: %d; failed with a retry verdict: %d; failed without one: %d; not sent: %d; lost: %d\n", ok, hinted, unhinted, notSent, lost)
	for _, k := range sortedKeys(errorsBy) {
		fmt.Printf("  %6d  %s\n          e.g. %s\n", errorsBy[k], k, example[k])
	}
	printLost(records)

	// Executions upstream: each id at most once; a denied call never.
	runs := s.rec.executions()
	twice := 0
	deniedRan := 0
	for _, r := range records {
		if runs[r.id] > 1 {
			twice++
		}
		if r.op == "denied" && runs[r.id] > 0 {
			deniedRan++
		}
	}
	fmt.Printf("executions upstream: %d ids ran, %d ran more than once, %d denied calls ran\n", len(runs), twice, deniedRan)
	fmt.Printf("allow-once states replayed to every replica: %d states, %d replays: %d refused as spent, %d accepted, %d otherwise\n",
		replays.states, replays.sent, replays.refused, replays.accepted, replays.other)
	opened, closed, live := s.rec.sessionCounts()
	fmt.Printf("upstream sessions: %d opened, %d closed, %d live (opened = closed + live: %v)\n", opened, closed, live, opened == closed+live)

	total, incomplete, why, unanswered, examples := reps.chains("mcp." + recorderName + ".confirm")
	fmt.Printf("audit chains: %d, incomplete %d; questions by elicitation whose answer never got through (open by design): %d\n", total, incomplete, unanswered)
	for _, k := range sortedKeys(why) {
		fmt.Printf("  %6d  %s\n", why[k], k)
	}
	for i, e := range examples {
		if i == 30 {
			fmt.Printf("  (%d more)\n", len(examples)-30)
			break
		}
		fmt.Printf("  %s\n", e)
	}
	fmt.Printf("ToolApprovals decided by the scripted approver: %d; pending after their requests ended: %d\n", decided, pending)

	// Away: -32012 refusals, and for how long in a row per server.
	away, longest := awayFigures(records)
	fmt.Printf("refused as server away (-32012): %d calls; longest stretch from the first refusal to the next answer: %s\n", away, longest.Round(time.Millisecond))

	quiet, hurt := splitMinutes(records, windows)
	fmt.Printf("latency in quiet minutes:      p50 %s p99 %s (%d calls)\n", benchutil.Pct(quiet, 50).Round(time.Millisecond), benchutil.Pct(quiet, 99).Round(time.Millisecond), len(quiet))
	fmt.Printf("latency in minutes with a fault: p50 %s p99 %s (%d calls)\n", benchutil.Pct(hurt, 50).Round(time.Millisecond), benchutil.Pct(hurt, 99).Round(time.Millisecond), len(hurt))

	var slopeMax float64
	measured := false // some process lived minSlopeWindow past its warm-up
	for _, part := range []string{"bridge", "controller"} {
		largest, procs := sm.slopes(part, warmup)
		counted := 0
		for _, p := range procs {
			if p.window >= minSlopeWindow {
				counted++
			}
		}
		measured = measured || counted > 0
		fmt.Printf("%s after warm-up (%d processes, %d over at least %s), largest slope %%/10min: rss %.2f, fds %.2f, goroutines %.2f (last reading: %.1f MB, %d fds, %.0f goroutines)\n",
			part, len(procs), counted, minSlopeWindow, largest.rss, largest.fds, largest.goroutines, float64(largest.last.rss)/1e6, largest.last.fds, largest.last.goroutines)
		for _, p := range procs {
			fmt.Printf("  %-18s over %6s: rss %6.2f (anon %6.2f, go heap %6.2f), fds %6.2f, goroutines %6.2f (last: %.1f MB, %.1f anon, %.1f heap, %d fds, %.0f goroutines)\n",
				p.key, p.window.Truncate(time.Second), p.rss, p.anon, p.heap, p.fds, p.goroutines, float64(p.last.rss)/1e6, float64(p.last.anon)/1e6, p.last.heap/1e6, p.last.fds, p.last.goroutines)
		}
		slopeMax = max(slopeMax, largest.rss)
	}
	if *samplesFile != "" {
		if err := sm.write(*samplesFile); err != nil {
			fmt.Printf("samples not written: %v\n", err)
		}
	}

	injected := 0
	for _, w := range windows {
		if w.err == nil {
			injected++
		}
	}
	lostAll := lost
	twiceAll := twice + deniedRan + replays.accepted
	fmt.Println()
	fmt.Printf("faults injected: %d\n", injected)
	fmt.Printf("calls: %d\n", calls)
	fmt.Printf("lost: %d\n", lostAll)
	fmt.Printf("run twice: %d\n", twiceAll)
	fmt.Printf("incomplete audit chains: %d\n", incomplete)
	fmt.Printf("pending approvals left: %d\n", pending)
	// A run too short to measure says so: 0.00 would read as flat.
	if measured {
		fmt.Printf("rss slope %%/10min: %.2f\n", slopeMax)
	} else {
		fmt.Printf("rss slope %%/10min: n/a (no process lived %s past its warm-up)\n", minSlopeWindow)
	}
	return lostAll != 0 || twiceAll != 0 || incomplete != 0
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// awayFigures counts -32012 refusals and the longest time per server from a
// refusal to the next answer of that server.
func awayFigures(records []record) (int, time.Duration) {
	sorted := slices.Clone(records)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].start.Before(sorted[j].start) })
	first := map[string]time.Time{}
	var n int
	var longest time.Duration
	for _, r := range sorted {
		end := r.start.Add(r.took)
		switch {
		case r.code == -32012:
			n++
			if first[r.server].IsZero() {
				first[r.server] = r.start
			}
		case r.ok && !first[r.server].IsZero():
			longest = max(longest, end.Sub(first[r.server]))
			first[r.server] = time.Time{}
		}
	}
	return n, longest
}

// splitMinutes sorts the answered calls' latencies into minutes with no
// fault in force and minutes with one.
func splitMinutes(records []record, windows []window) (quiet, hurt []time.Duration) {
	faulty := func(minute time.Time) bool {
		for _, w := range windows {
			if w.start.Before(minute.Add(time.Minute)) && !w.end.Add(30*time.Second).Before(minute) {
				return true
			}
		}
		return false
	}
	for _, r := range records {
		if r.lost || r.op == "ask" || r.op == "confirm" || r.op == "connect" {
			continue // a person's or a replay's time is not the bridge's
		}
		if faulty(r.start.Truncate(time.Minute)) {
			hurt = append(hurt, r.took)
		} else {
			quiet = append(quiet, r.took)
		}
	}
	return quiet, hurt
}

// printLost lists each lost call: when it was made (from the first call),
// its kind, where it went (the Service or the replica picked), how long the
// agent waited, and its error; to be set beside the faults' times.
func printLost(records []record) {
	if len(records) == 0 {
		return
	}
	first := records[0].start
	for _, r := range records {
		if r.start.Before(first) {
			first = r.start
		}
	}
	n := 0
	for _, r := range records {
		if !r.lost {
			continue
		}
		if n++; n == 1 {
			fmt.Println("lost calls (made at, kind, sent to, waited, error):")
		}
		if n > 60 {
			continue
		}
		fmt.Printf("  %7s  %-9s %-32s %8s  %s\n", r.start.Sub(first).Truncate(time.Second), r.op, r.via, r.took.Truncate(time.Millisecond), textcut.Cut(r.errText, 240))
	}
	if n > 60 {
		fmt.Printf("  (%d more)\n", n-60)
	}
}
