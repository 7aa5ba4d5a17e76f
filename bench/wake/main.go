// Command wake measures sleeping servers on the dev cluster (`make dev`),
// through the operator as installed there, with the bridge's Service called
// from this machine (kube-proxy routes a Service's IP from the node) as an
// agent whose token is a TokenRequest of a ServiceAccount for audience
// mcp-operator. In one run, side by side:
//
//	wake        a stdio everything-server (the sample's spec, its image
//	            present on the node) put to sleep by hand (the sleep
//	            annotation, as kubectl mcp sleep writes it) and woken by a
//	            tools/call through the bridge: the time from the call to its
//	            answer, over -wakes wakes, and when each step of the wake
//	            (the bridge's Lease write, the controller's pod, the
//	            kubelet's reports, Ready) was seen by a watch (steps.go);
//	cold apply  the same server deleted and created again: the time from the
//	            create to the first answer of the same call through the bridge
//	            (the call is retried until the bridge lists the tool), over
//	            -colds applies;
//	at rest     -servers sleeping servers (created with the sleep
//	            annotation, so none starts a pod): their pods, every write to
//	            their MCPServers, Leases, Events and pods seen by watches over
//	            -window, per server per hour, and the controller's CPU meanwhile
//	            (its process on this node, from /proc).
//
// Targets: wake p50 <= 1.5 s, p95 <= 3 s, at most 2 writes per idle server
// per hour, no pods. It exits non-zero on a missed target or a missing
// reading. Run it with `make bench-wake`, which brings the dev cluster up
// and tears it down.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/bench/internal/benchutil"
	mcpclient "github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
)

const (
	// The dev install's bridge serves namespace default.
	namespace  = benchutil.DevNamespace
	serverName = "bench-wake"
	agentName  = "bench-wake-agent"
	idlePrefix = "bench-idle-"
	tool       = "mcp." + serverName + ".test_simple_text"
	image      = "localhost/mcp-operator/everything-server:dev"
)

// Targets.
const (
	wakeP50Target        = 1500 * time.Millisecond
	wakeP95Target        = 3 * time.Second
	writesPerHourTarget  = 2.0
	callTimeout          = time.Minute
	stateTimeout         = 3 * time.Minute
	pollEvery            = 50 * time.Millisecond
	createRequestsAtOnce = 8
)

func main() {
	servers := flag.Int("servers", 200, "sleeping servers at rest")
	wakes := flag.Int("wakes", 20, "wakes of the stdio server")
	colds := flag.Int("colds", 10, "cold applies of the stdio server")
	window := flag.Duration("window", 2*time.Minute, "how long the sleeping servers are watched at rest")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := run(ctx, *servers, *wakes, *colds, *window)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/wake:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// bench is the dev cluster as the benchmark uses it.
type bench struct {
	c         client.WithWatch
	cs        *kubernetes.Clientset
	agent     *mcpclient.Client
	bridgeURL string
	steps     wakeSteps
}

func run(ctx context.Context, servers, wakes, colds int, window time.Duration) (bool, error) {
	b, err := connect(ctx)
	if err != nil {
		return false, err
	}
	cold, err := b.coldApplies(ctx, colds)
	if err != nil {
		return false, fmt.Errorf("cold apply: %w", err)
	}
	wake, err := b.wakes(ctx, wakes)
	if err != nil {
		return false, fmt.Errorf("wake: %w", err)
	}
	rest, err := b.atRest(ctx, servers, window)
	if err != nil {
		return false, fmt.Errorf("at rest: %w", err)
	}

	p50, p95 := benchutil.Pct(wake, 50), benchutil.Pct(wake, 95)
	fmt.Printf("wake p50: %.2f s\n", p50.Seconds())
	fmt.Printf("wake p95: %.2f s\n", p95.Seconds())
	fmt.Printf("wake steps after the call:\n%s\n", &b.steps)
	fmt.Printf("cold apply p50: %.2f s\n", benchutil.Pct(cold, 50).Seconds())
	fmt.Printf("cold apply p95: %.2f s\n", benchutil.Pct(cold, 95).Seconds())
	fmt.Printf("servers at rest: %d (watched %s)\n", servers, window)
	fmt.Printf("pods: %d\n", rest.pods)
	fmt.Printf("API writes per idle server per hour: %.2f\n", rest.writesPerServerHour)
	fmt.Printf("controller CPU at rest: %.2f ms/s\n", rest.controllerMsPerSec)
	fmt.Println()

	checks := []struct {
		what string
		ok   bool
	}{
		{fmt.Sprintf("wake p50 <= %.1f s", wakeP50Target.Seconds()), len(wake) > 0 && p50 <= wakeP50Target},
		{fmt.Sprintf("wake p95 <= %.1f s", wakeP95Target.Seconds()), len(wake) > 0 && p95 <= wakeP95Target},
		{fmt.Sprintf("API writes per idle server per hour <= %.0f", writesPerHourTarget), rest.writesPerServerHour <= writesPerHourTarget},
		{"pods of sleeping servers: 0", rest.pods == 0},
		{"cold apply measured", len(cold) > 0},
		{"controller CPU read", rest.controllerMsPerSec >= 0},
	}
	all := true
	for _, c := range checks {
		fmt.Printf("target %-45s %s\n", c.what, benchutil.Verdict(c.ok))
		all = all && c.ok
	}
	return all, nil
}

// connect connects to the dev cluster, makes the agent's ServiceAccount and
// ToolPolicy, and connects to the bridge as that agent.
func connect(ctx context.Context) (*bench, error) {
	dev, err := benchutil.ConnectDev(ctx)
	if err != nil {
		return nil, err
	}
	b := &bench{c: dev.C, cs: dev.CS, bridgeURL: dev.BridgeURL}
	token, err := dev.AgentToken(ctx, agentName)
	if err != nil {
		return nil, err
	}
	tp := &mcpv1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: agentName},
		Spec: mcpv1alpha1.ToolPolicySpec{
			Subjects: []mcpv1alpha1.Subject{{Kind: mcpv1alpha1.SubjectServiceAccount, Name: agentName, Namespace: namespace}},
			Rules:    []mcpv1alpha1.ToolRule{{Tools: []string{"mcp." + serverName + ".*"}, Decision: mcpv1alpha1.DecisionAllow}},
		},
	}
	if err := b.c.Create(ctx, tp); client.IgnoreAlreadyExists(err) != nil {
		return nil, err
	}
	conn, err := streamhttp.New(streamhttp.Options{URL: b.bridgeURL, BearerToken: token})
	if err != nil {
		return nil, err
	}
	if b.agent, err = mcpclient.Connect(ctx, conn, mcpclient.Options{ClientName: "bench-wake", ClientVersion: "1"}); err != nil {
		return nil, fmt.Errorf("connecting to the bridge at %s: %w", b.bridgeURL, err)
	}
	return b, nil
}

// stdioServer is the sample stdio everything-server's spec, sleeping only by
// hand (idle far longer than the run) unless annotated otherwise.
func stdioServer(name string, idle time.Duration) *mcpv1alpha1.MCPServer {
	return &mcpv1alpha1.MCPServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: mcpv1alpha1.MCPServerSpec{
			Transport: mcpv1alpha1.TransportStdio,
			Workload: &mcpv1alpha1.Workload{
				Image: image, Command: []string{"/everything-server"},
				Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
				}},
				Network: mcpv1alpha1.NetworkSpec{Egress: mcpv1alpha1.EgressNone},
				Idle:    &metav1.Duration{Duration: idle},
			},
		},
	}
}

// call is one tools/call of the stdio server through the bridge.
func (b *bench) call(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	res, err := b.agent.CallTool(ctx, tool, nil)
	if err != nil {
		return err
	}
	if !strings.Contains(string(res), "test_simple_text") {
		return fmt.Errorf("an unexpected answer: %s", res)
	}
	return nil
}

// coldApplies creates the stdio server n times, each from nothing, and
// times each create to the first answer through the bridge. The server is
// left Ready.
func (b *bench) coldApplies(ctx context.Context, n int) ([]time.Duration, error) {
	var took []time.Duration
	for i := range n {
		if err := b.deleteServer(ctx, serverName); err != nil {
			return nil, err
		}
		s := stdioServer(serverName, time.Hour)
		start := time.Now()
		if err := b.c.Create(ctx, s); err != nil {
			return nil, err
		}
		// Until the bridge lists the tool, the call fails at once: retry.
		deadline := start.Add(stateTimeout)
		for {
			err := b.call(ctx)
			if err == nil {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return nil, fmt.Errorf("apply %d: no answer within %s: %w", i+1, stateTimeout, err)
			}
			time.Sleep(pollEvery)
		}
		took = append(took, time.Since(start))
	}
	return took, nil
}

// wakes puts the stdio server to sleep n times and times the call that
// wakes it.
func (b *bench) wakes(ctx context.Context, n int) ([]time.Duration, error) {
	key := client.ObjectKey{Namespace: namespace, Name: serverName}
	var took []time.Duration
	for i := range n {
		var s mcpv1alpha1.MCPServer
		if err := b.c.Get(ctx, key, &s); err != nil {
			return nil, err
		}
		// What kubectl mcp sleep writes.
		patch := client.MergeFrom(s.DeepCopy())
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[mcpv1alpha1.SleepAnnotation] = time.Now().UTC().Format(time.RFC3339Nano)
		if err := b.c.Patch(ctx, &s, patch); err != nil {
			return nil, err
		}
		if err := b.waitFor(ctx, "asleep with no pod", func() (bool, error) {
			if err := b.c.Get(ctx, key, &s); err != nil {
				return false, err
			}
			pods, err := b.pods(ctx, serverName)
			return readyReason(&s) == mcpv1alpha1.ReasonSleeping && pods == 0, err
		}); err != nil {
			return nil, fmt.Errorf("sleep %d: %w", i+1, err)
		}
		watchCtx, stopWatch := context.WithCancel(ctx)
		steps, err := b.watchSteps(watchCtx, serverName)
		if err != nil {
			stopWatch()
			return nil, err
		}
		start := steps.start
		if err := b.call(ctx); err != nil {
			stopWatch()
			return nil, fmt.Errorf("wake %d: %w", i+1, err)
		}
		took = append(took, time.Since(start))
		b.steps.add(steps.finish(took[len(took)-1]))
		stopWatch()
	}
	return took, nil
}

// restFigures is what the sleeping servers cost at rest.
type restFigures struct {
	pods                int
	writesPerServerHour float64
	controllerMsPerSec  float64
}

// atRest creates n servers asleep, waits until every one is Sleeping, then
// watches what is written about them for window.
func (b *bench) atRest(ctx context.Context, n int, window time.Duration) (restFigures, error) {
	// Created asleep: the controller starts the activity Lease just before
	// the standing request, so no pod is started.
	asleepFrom := time.Now().UTC().Format(time.RFC3339Nano)
	sem := make(chan struct{}, createRequestsAtOnce)
	errs := make(chan error, n)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			s := stdioServer(fmt.Sprintf("%s%03d", idlePrefix, i), 30*time.Minute)
			s.Annotations = map[string]string{mcpv1alpha1.SleepAnnotation: asleepFrom}
			errs <- client.IgnoreAlreadyExists(b.c.Create(ctx, s))
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			return restFigures{}, err
		}
	}
	if err := b.waitFor(ctx, fmt.Sprintf("%d servers asleep", n), func() (bool, error) {
		var list mcpv1alpha1.MCPServerList
		if err := b.c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			return false, err
		}
		asleep := 0
		for i := range list.Items {
			if strings.HasPrefix(list.Items[i].Name, idlePrefix) && readyReason(&list.Items[i]) == mcpv1alpha1.ReasonSleeping {
				asleep++
			}
		}
		return asleep == n, nil
	}); err != nil {
		return restFigures{}, err
	}

	pid, err := controllerPID()
	if err != nil {
		return restFigures{}, err
	}
	var writes atomic.Int64
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := b.countWrites(watchCtx, &writes); err != nil {
		return restFigures{}, err
	}
	cpu0, start := benchutil.CPU(pid), time.Now()
	select {
	case <-time.After(window):
	case <-ctx.Done():
		return restFigures{}, ctx.Err()
	}
	elapsed := time.Since(start)
	cpu := benchutil.CPU(pid) - cpu0
	cancel()

	pods := 0
	for i := range n {
		p, err := b.pods(ctx, fmt.Sprintf("%s%03d", idlePrefix, i))
		if err != nil {
			return restFigures{}, err
		}
		pods += p
	}
	return restFigures{
		pods:                pods,
		writesPerServerHour: float64(writes.Load()) / float64(n) / elapsed.Hours(),
		controllerMsPerSec:  float64(cpu.Milliseconds()) / elapsed.Seconds(),
	}, nil
}

// countWrites counts every change to the idle servers' MCPServers, Leases,
// Events and pods from now on: each is a write to the API server.
func (b *bench) countWrites(ctx context.Context, writes *atomic.Int64) error {
	lists := []client.ObjectList{&mcpv1alpha1.MCPServerList{}, &coordinationv1.LeaseList{}, &corev1.EventList{}, &corev1.PodList{}}
	for _, list := range lists {
		// From the list's resource version: only what comes after counts.
		if err := b.c.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return err
		}
		from := &client.ListOptions{Namespace: namespace, Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}}
		w, err := b.c.Watch(ctx, list, from)
		if err != nil {
			return err
		}
		go func() {
			defer w.Stop()
			for e := range w.ResultChan() {
				if e.Type == watch.Error || e.Type == watch.Bookmark {
					continue
				}
				if o, ok := e.Object.(client.Object); !ok || !aboutIdleServer(o) {
					continue
				}
				writes.Add(1)
			}
		}()
	}
	return nil
}

// aboutIdleServer says whether o is one of the idle servers' objects.
func aboutIdleServer(o client.Object) bool {
	if e, ok := o.(*corev1.Event); ok {
		return strings.HasPrefix(e.InvolvedObject.Name, idlePrefix)
	}
	return strings.HasPrefix(o.GetName(), idlePrefix)
}

func readyReason(s *mcpv1alpha1.MCPServer) string {
	if c := meta.FindStatusCondition(s.Status.Conditions, mcpv1alpha1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

// pods counts the server's pods, terminating ones included.
func (b *bench) pods(ctx context.Context, server string) (int, error) {
	var pods corev1.PodList
	err := b.c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{mcpv1alpha1.ServerLabel: server})
	return len(pods.Items), err
}

// deleteServer deletes a server and waits until it and its pods are gone.
func (b *bench) deleteServer(ctx context.Context, name string) error {
	s := &mcpv1alpha1.MCPServer{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := b.c.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
		return err
	}
	return b.waitFor(ctx, name+" deleted with its pods", func() (bool, error) {
		err := b.c.Get(ctx, client.ObjectKeyFromObject(s), s)
		if err == nil || !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		pods, err := b.pods(ctx, name)
		return pods == 0, err
	})
}

// waitFor polls done until it holds, within stateTimeout.
func (b *bench) waitFor(ctx context.Context, what string, done func() (bool, error)) error {
	deadline := time.Now().Add(stateTimeout)
	for {
		ok, err := done()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not %s within %s", what, stateTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

// controllerPID is the controller's process on this node.
func controllerPID() (int, error) {
	pids, err := benchutil.ManagerPIDs("controller")
	if err != nil {
		return 0, err
	}
	return pids[0], nil
}
