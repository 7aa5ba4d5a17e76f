// Command controller measures what the MCPServer controller costs to bring
// many servers up and keep them probed, on a real kube-apiserver and etcd (envtest), with N remote
// MCPServers all pointing at one real upstream (the go-sdk everything-server
// over HTTP, session era), so every reconcile includes a real MCP probe.
// Side by side in one run, in alternating rounds:
//
//	baseline    a bare client creates the N MCPServers and writes each one's
//	            status once (the status the controller writes): the API
//	            server work that bringing N servers up cannot avoid;
//	controller  the same client creates the N MCPServers and the controller
//	            (a child process running the reconcilers as `manager
//	            controller` does, watching all namespaces) probes them and
//	            publishes their catalogs. The child is stopped while the
//	            baseline runs.
//
// Both are timed from the first create until a watch has seen every server
// Ready with its tools in status. For the controller it also reports the
// per-server create→Ready latency, reconciles and API requests per server,
// its CPU per server, its heap with N servers Ready and, in steady state, the
// CPU of N servers' periodic probes, and whether the targets hold: all Ready
// within 2x the baseline, at most 30 KB of heap per Ready server, and the
// busiest second of periodic probes at most 2x the mean; and at rest, with
// only periodic probes running, at most 0.01 status writes and 0.01 watch
// events (what a watcher of MCPServers, the bridge, receives) per probe and at
// most 5 ms of API server and etcd CPU per server per minute. It exits
// non-zero when a target is missed. Everything is deleted between rounds
// (N defaults to 1,000).
// Run it with `make bench-controller`.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/bench/internal/benchutil"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

const (
	baseNS = "bench-baseline"
	ctlNS  = "bench-controller"
)

func main() {
	role := flag.String("role", "", "internal: run as the controller child")
	listen := flag.String("listen", "", "internal: where the child answers /stats")
	servers := flag.Int("servers", 1000, "MCPServers per round")
	rounds := flag.Int("rounds", 3, "alternating rounds")
	workers := flag.Int("workers", 4, "the controller's reconcile workers (manager controller's default) and the client's concurrent creates")
	interval := flag.Duration("interval", 15*time.Second, "spec.probe.interval of every server (the default is 5m; shorter so the idle window sees periodic probes)")
	idle := flag.Duration("idle", 30*time.Second, "steady-state window with every server Ready")
	flag.Parse()
	var err error
	if *role == "controller" {
		err = serveController(*listen, *workers)
	} else {
		err = run(config{servers: *servers, rounds: *rounds, workers: *workers, interval: *interval, idle: *idle})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/controller:", err)
		os.Exit(1)
	}
}

type config struct {
	servers, rounds, workers int
	interval, idle           time.Duration
}

// bench is the running setup: API server, upstream, controller child.
type bench struct {
	config
	c        client.WithWatch
	upstream string
	child    *exec.Cmd
	stats    string // the child's /stats URL
	template mcpv1alpha1.MCPServerStatus
}

// ctlRound is what one controller round measured.
type ctlRound struct {
	total, apiCPU, cpu        time.Duration
	latencies                 []time.Duration
	reconciles, probes        float64
	requests                  map[string]float64
	heapReady, heapEmpty      uint64
	idleCPU, idleAPICPU       time.Duration
	idleProbes, idleFailures  int64
	idlePatches, idleRequests float64
	idleWatchEvents           int64
	peakProbesPerSecond       int64
	reconcileErrors, failures float64
}

// baseRound is what one baseline round measured.
type baseRound struct {
	total, apiCPU time.Duration
	latencies     []time.Duration
}

func run(cfg config) (err error) {
	t := &tb{}
	defer t.close()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	env, err := testenv.New()
	if err != nil {
		return err
	}
	restCfg, err := env.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	restCfg.QPS = -1 // the bare client is never throttled on its side
	b := &bench{config: cfg}
	if b.c, err = client.NewWithWatch(restCfg, client.Options{Scheme: testenv.Scheme()}); err != nil {
		return err
	}
	b.upstream = testpeers.GoEverything(t, false).URL
	if err := b.startController(t, env); err != nil {
		return err
	}
	defer benchutil.Stop(b.child)
	ctx := context.Background()
	for _, ns := range []string{baseNS, ctlNS} {
		if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	if err := b.warmUp(ctx); err != nil {
		return err
	}
	fmt.Printf("controller benchmark: %d remote MCPServers, %d alternating rounds, %d workers, probe interval %s, idle window %s, GOMAXPROCS=%d\n",
		cfg.servers, cfg.rounds, cfg.workers, cfg.interval, cfg.idle, runtime.GOMAXPROCS(0))

	var bases []baseRound
	var ctls []ctlRound
	for r := range cfg.rounds {
		for i := range 2 {
			if (i+r)%2 == 0 {
				br, err := b.baseline(ctx)
				if err != nil {
					return fmt.Errorf("baseline round %d: %w", r+1, err)
				}
				bases = append(bases, br)
			} else {
				cr, err := b.controller(ctx)
				if err != nil {
					return fmt.Errorf("controller round %d: %w", r+1, err)
				}
				ctls = append(ctls, cr)
			}
		}
		fmt.Printf("round %d: baseline %s, controller %s (%.2fx)\n", r+1, bases[r].total.Round(time.Millisecond), ctls[r].total.Round(time.Millisecond), ratio(ctls[r].total, bases[r].total))
	}
	if !report(cfg, bases, ctls) {
		return fmt.Errorf("a target was missed")
	}
	return nil
}

// startController runs the controller child with a kubeconfig of its own.
func (b *bench) startController(t *tb, env *envtest.Environment) error {
	user, err := env.AddUser(envtest.User{Name: "bench-controller", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return err
	}
	dir := t.TempDir()
	kcPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kcPath, kubeconfig, 0o600); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(dir, "controller.log"))
	if err != nil {
		return err
	}
	addr := benchutil.FreeAddr()
	self, _ := os.Executable()
	b.child = exec.Command(self, "-role=controller", "-listen="+addr, "-workers="+strconv.Itoa(b.workers))
	b.child.Env = append(os.Environ(), "KUBECONFIG="+kcPath)
	b.child.Stdout, b.child.Stderr = logf, logf
	b.child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := b.child.Start(); err != nil {
		return err
	}
	b.stats = "http://" + addr + "/stats"
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := b.read(false); err == nil {
			return nil
		}
	}
	benchutil.Stop(b.child)
	data, _ := os.ReadFile(logf.Name())
	return fmt.Errorf("the controller child did not answer on %s: %s", addr, data)
}

// warmUp brings one server up through the controller: it warms every path
// and gives the baseline the status the controller writes.
func (b *bench) warmUp(ctx context.Context) error {
	w, err := b.watchReady(ctx, ctlNS, 1)
	if err != nil {
		return err
	}
	s := b.server(ctlNS, 0)
	if err := b.c.Create(ctx, s); err != nil {
		return err
	}
	if err := w.wait(time.Minute); err != nil {
		return err
	}
	if err := b.c.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
		return err
	}
	b.template = s.Status
	return b.deleteAll(ctx, ctlNS)
}

func (b *bench) server(ns string, i int) *mcpv1alpha1.MCPServer {
	return &mcpv1alpha1.MCPServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("s%04d", i)},
		Spec: mcpv1alpha1.MCPServerSpec{
			Transport: mcpv1alpha1.TransportStreamableHTTP,
			Remote:    &mcpv1alpha1.Remote{URL: b.upstream},
			Probe:     mcpv1alpha1.ProbeSpec{Interval: metav1.Duration{Duration: b.interval}},
		},
	}
}

// baseline: create the servers and write each one's status once. The
// controller watches all namespaces, as `manager controller` does, so it is
// stopped (SIGSTOP) while the baseline runs and its servers are deleted
// before it goes on; it then only finds them gone.
func (b *bench) baseline(ctx context.Context) (baseRound, error) {
	var out baseRound
	if err := b.child.Process.Signal(syscall.SIGSTOP); err != nil {
		return out, err
	}
	defer func() { _ = b.child.Process.Signal(syscall.SIGCONT) }()
	w, err := b.watchReady(ctx, baseNS, b.servers)
	if err != nil {
		return out, err
	}
	api0 := apiServerCPU()
	start := time.Now()
	created, err := b.createAll(ctx, baseNS, func(s *mcpv1alpha1.MCPServer) error {
		s.Status = *b.template.DeepCopy()
		s.Status.ObservedGeneration = s.Generation
		return b.c.Status().Update(ctx, s)
	})
	if err != nil {
		return out, err
	}
	if err := w.wait(5 * time.Minute); err != nil {
		return out, err
	}
	out.apiCPU = apiServerCPU() - api0
	out.total, out.latencies = w.since(start, created)
	if err := b.deleteAll(ctx, baseNS); err != nil {
		return out, err
	}
	if err := b.child.Process.Signal(syscall.SIGCONT); err != nil {
		return out, err
	}
	return out, b.quiet()
}

// controller: create the servers and let the controller bring them up; then
// measure its heap and its steady state.
func (b *bench) controller(ctx context.Context) (ctlRound, error) {
	var out ctlRound
	empty, err := b.read(true)
	if err != nil {
		return out, err
	}
	out.heapEmpty = empty.Heap
	w, err := b.watchReady(ctx, ctlNS, b.servers)
	if err != nil {
		return out, err
	}
	pid := b.child.Process.Pid
	cpu0, api0 := benchutil.CPU(pid), apiServerCPU()
	start := time.Now()
	created, err := b.createAll(ctx, ctlNS, nil)
	if err != nil {
		return out, err
	}
	if err := w.wait(5 * time.Minute); err != nil {
		return out, err
	}
	out.cpu, out.apiCPU = benchutil.CPU(pid)-cpu0, apiServerCPU()-api0
	out.total, out.latencies = w.since(start, created)

	// Settle (the last reconciles end after the watch saw their status),
	// then count what bringing them up took, and the heap with N Ready. No
	// periodic probe is due yet: the first comes half an interval after Ready
	// at the soonest.
	time.Sleep(2 * time.Second)
	settled, err := b.read(true)
	if err != nil {
		return out, err
	}
	out.heapReady = settled.Heap
	out.reconciles = settled.Reconciles - empty.Reconciles
	out.probes = float64(settled.Probes - empty.Probes)
	out.reconcileErrors = settled.ReconcileErrors - empty.ReconcileErrors
	out.failures = float64(settled.ProbeFailures - empty.ProbeFailures)
	out.requests = map[string]float64{}
	for m, n := range settled.Requests {
		out.requests[m] = n - empty.Requests[m]
	}

	// Steady state: only periodic probes run. Sampling the probe counter
	// every second shows whether they bunch up; a watch of the servers, as
	// the bridge keeps one, counts what the probes make every watcher see.
	events, err := b.countWatchEvents(ctx, ctlNS)
	if err != nil {
		return out, err
	}
	cpu1, api1 := benchutil.CPU(pid), apiServerCPU()
	last := settled.Probes
	for range int(b.idle / time.Second) {
		time.Sleep(time.Second)
		s, err := b.read(false)
		if err != nil {
			return out, err
		}
		out.peakProbesPerSecond = max(out.peakProbesPerSecond, s.Probes-last)
		last = s.Probes
	}
	out.idleCPU, out.idleAPICPU = benchutil.CPU(pid)-cpu1, apiServerCPU()-api1
	out.idleWatchEvents = events()
	after, err := b.read(false)
	if err != nil {
		return out, err
	}
	out.idleProbes = after.Probes - settled.Probes
	out.idleFailures = after.ProbeFailures - settled.ProbeFailures
	out.idlePatches = after.Requests["PATCH"] - settled.Requests["PATCH"]
	for m, n := range after.Requests {
		out.idleRequests += n - settled.Requests[m]
	}
	if err := b.deleteAll(ctx, ctlNS); err != nil {
		return out, err
	}
	return out, b.quiet()
}

// countWatchEvents watches the MCPServers of ns from now on, as any watcher
// of MCPServers (the bridge) does; the returned function stops the watch and
// says how many events it delivered.
func (b *bench) countWatchEvents(ctx context.Context, ns string) (func() int64, error) {
	var list mcpv1alpha1.MCPServerList
	if err := b.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	wi, err := b.c.Watch(ctx, &mcpv1alpha1.MCPServerList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		return nil, err
	}
	var n atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range wi.ResultChan() {
			if ev.Type != watch.Bookmark {
				n.Add(1)
			}
		}
	}()
	return func() int64 {
		wi.Stop()
		<-done
		return n.Load()
	}, nil
}

// createAll creates the servers with b.workers concurrent clients, each
// followed by then (when set), and returns when each create started.
func (b *bench) createAll(ctx context.Context, ns string, then func(*mcpv1alpha1.MCPServer) error) (map[string]time.Time, error) {
	created := make(map[string]time.Time, b.servers)
	var mu sync.Mutex
	var firstErr error
	next := make(chan int)
	var wg sync.WaitGroup
	for range b.workers {
		wg.Go(func() {
			for i := range next {
				s := b.server(ns, i)
				at := time.Now()
				err := b.c.Create(ctx, s)
				if err == nil && then != nil {
					err = then(s)
				}
				mu.Lock()
				created[s.Name] = at
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	for i := range b.servers {
		next <- i
	}
	close(next)
	wg.Wait()
	return created, firstErr
}

// deleteAll deletes a namespace's servers and waits until they are gone. A
// collection delete of many objects may outlast its request's timeout on a
// busy API server, which then stops part way: it is sent again while any
// are left.
func (b *bench) deleteAll(ctx context.Context, ns string) error {
	var lastErr error
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		var list mcpv1alpha1.MCPServerList
		if err := b.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return nil
		}
		// Its errors are those of a busy API server (a timeout, a reset
		// stream); the list above says whether to send it again.
		lastErr = b.c.DeleteAllOf(ctx, &mcpv1alpha1.MCPServer{}, client.InNamespace(ns))
	}
	return fmt.Errorf("the servers of %s were not gone within 5m (last error: %v)", ns, lastErr)
}

// quiet waits until the controller has reconciled the deletions.
func (b *bench) quiet() error {
	prev := -1.0
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		s, err := b.read(false)
		if err != nil {
			return err
		}
		if s.Reconciles == prev {
			return nil
		}
		prev = s.Reconciles
	}
	return fmt.Errorf("the controller kept reconciling after the servers were deleted")
}

// readyWatch records when a watch first saw each server Ready with its
// tools in status.
type readyWatch struct {
	mu   sync.Mutex
	at   map[string]time.Time
	n    int
	done chan struct{}
	err  error
}

func isReady(s *mcpv1alpha1.MCPServer) bool {
	return meta.IsStatusConditionTrue(s.Status.Conditions, mcpv1alpha1.ConditionReady) && len(s.Status.Tools) > 0
}

// watchReady starts watching before anything is created, so no transition
// is missed. A busy API server may end a watch: it is started again, and a
// list then catches what became Ready in between.
func (b *bench) watchReady(ctx context.Context, ns string, n int) (*readyWatch, error) {
	wi, err := b.c.Watch(ctx, &mcpv1alpha1.MCPServerList{}, client.InNamespace(ns))
	if err != nil {
		return nil, err
	}
	w := &readyWatch{at: map[string]time.Time{}, n: n, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for !w.follow(wi) {
			if wi, err = b.c.Watch(ctx, &mcpv1alpha1.MCPServerList{}, client.InNamespace(ns)); err != nil {
				w.err = fmt.Errorf("while watching %s again: %w", ns, err)
				return
			}
			var list mcpv1alpha1.MCPServerList
			if err := b.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
				w.err = fmt.Errorf("while listing %s: %w", ns, err)
				return
			}
			for i := range list.Items {
				if w.see(&list.Items[i]) {
					wi.Stop()
					return
				}
			}
		}
	}()
	return w, nil
}

// follow records the Ready servers a watch reports until all are Ready
// (true) or the watch ends (false).
func (w *readyWatch) follow(wi watch.Interface) bool {
	defer wi.Stop()
	for ev := range wi.ResultChan() {
		s, ok := ev.Object.(*mcpv1alpha1.MCPServer)
		if ok && (ev.Type == watch.Added || ev.Type == watch.Modified) && w.see(s) {
			return true
		}
	}
	return false
}

// see records when a server was first seen Ready, and reports whether all are.
func (w *readyWatch) see(s *mcpv1alpha1.MCPServer) bool {
	if !isReady(s) {
		return false
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, seen := w.at[s.Name]; !seen {
		w.at[s.Name] = now
	}
	return len(w.at) == w.n
}

func (w *readyWatch) wait(timeout time.Duration) error {
	select {
	case <-w.done:
		return w.err
	case <-time.After(timeout):
		w.mu.Lock()
		defer w.mu.Unlock()
		return fmt.Errorf("only %d of %d servers Ready after %s", len(w.at), w.n, timeout)
	}
}

// since is the time from start until the last server was Ready, and each
// server's create→Ready latency.
func (w *readyWatch) since(start time.Time, created map[string]time.Time) (time.Duration, []time.Duration) {
	var last time.Time
	lat := make([]time.Duration, 0, len(w.at))
	for name, at := range w.at {
		if at.After(last) {
			last = at
		}
		lat = append(lat, at.Sub(created[name]))
	}
	return last.Sub(start), lat
}

// read asks the child for its stats (with the heap after a GC when asked).
func (b *bench) read(heap bool) (stats, error) {
	var s stats
	u := b.stats
	if heap {
		u += "?heap"
	}
	resp, err := http.Get(u)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("%s: %s", u, resp.Status)
	}
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

// report prints the rounds side by side and reports whether every target
// was met.
func report(cfg config, bases []baseRound, ctls []ctlRound) bool {
	n := float64(cfg.servers)
	var baseLat, ctlLat []time.Duration
	var baseTotal, ctlTotal, baseAPI, ctlAPI, cpu, idleCPU, idleAPI []time.Duration
	var recs, probes, heapReady, heapPer, idleProbes, idlePatches, idleEvents, peak, failures, errs []float64
	reqs := map[string][]float64{}
	for _, r := range bases {
		baseLat = append(baseLat, r.latencies...)
		baseTotal = append(baseTotal, r.total)
		baseAPI = append(baseAPI, r.apiCPU)
	}
	for _, r := range ctls {
		ctlLat = append(ctlLat, r.latencies...)
		ctlTotal = append(ctlTotal, r.total)
		ctlAPI = append(ctlAPI, r.apiCPU)
		cpu = append(cpu, r.cpu)
		idleCPU = append(idleCPU, r.idleCPU)
		idleAPI = append(idleAPI, r.idleAPICPU)
		recs = append(recs, r.reconciles/n)
		probes = append(probes, r.probes/n)
		errs = append(errs, r.reconcileErrors)
		failures = append(failures, r.failures+float64(r.idleFailures))
		heapReady = append(heapReady, float64(r.heapReady))
		heapPer = append(heapPer, (float64(r.heapReady)-float64(r.heapEmpty))/n)
		idleProbes = append(idleProbes, float64(r.idleProbes))
		idlePatches = append(idlePatches, r.idlePatches/max(float64(r.idleProbes), 1))
		idleEvents = append(idleEvents, float64(r.idleWatchEvents))
		peak = append(peak, float64(r.peakProbesPerSecond))
		for m, v := range r.requests {
			reqs[m] = append(reqs[m], v/n)
		}
	}
	perMin := func(d time.Duration) time.Duration {
		return time.Duration(float64(d) / n / cfg.idle.Minutes())
	}
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	us := func(d time.Duration) string { return d.Round(time.Microsecond).String() }

	fmt.Printf("\n%-44s %14s %14s\n", "medians over rounds", "baseline", "controller")
	fmt.Printf("%-44s %14s %14s\n", "time to all Ready", ms(medianD(baseTotal)), ms(medianD(ctlTotal)))
	fmt.Printf("%-44s %14s %14s\n", "create→Ready p50", ms(benchutil.Pct(baseLat, 50)), ms(benchutil.Pct(ctlLat, 50)))
	fmt.Printf("%-44s %14s %14s\n", "create→Ready p99", ms(benchutil.Pct(baseLat, 99)), ms(benchutil.Pct(ctlLat, 99)))
	fmt.Printf("%-44s %14s %14s\n", "API server + etcd CPU per server", us(medianD(baseAPI)/time.Duration(n)), us(medianD(ctlAPI)/time.Duration(n)))
	fmt.Printf("%-44s %14s %14s\n", "controller CPU per server (create→Ready)", "-", us(medianD(cpu)/time.Duration(n)))
	fmt.Printf("%-44s %14s %14.2f\n", "reconciles per server until Ready", "-", benchutil.Median(recs))
	fmt.Printf("%-44s %14s %14.2f\n", "probes per server until Ready", "-", benchutil.Median(probes))
	methods := make([]string, 0, len(reqs))
	for m := range reqs {
		methods = append(methods, m)
	}
	slices.Sort(methods)
	var parts []string
	for _, m := range methods {
		parts = append(parts, fmt.Sprintf("%s %.2f", m, benchutil.Median(reqs[m])))
	}
	fmt.Printf("%-44s %14s %14s\n", "API requests per server (not the create)", "PUT 1.00", strings.Join(parts, ", "))
	fmt.Printf("%-44s %14s %11.1f MB\n", "controller heap after settle (N Ready)", "-", benchutil.Median(heapReady)/1e6)
	fmt.Printf("%-44s %14s %11.1f KB\n", "controller heap per Ready server", "-", benchutil.Median(heapPer)/1e3)
	fmt.Printf("\nsteady state, %s idle with %d servers Ready (probe interval %s):\n", cfg.idle, cfg.servers, cfg.interval)
	fmt.Printf("  probes %.0f (peak %.0f in one second, mean %.1f/s), failed probes and reconcile errors over all rounds: %.0f, %.0f\n",
		benchutil.Median(idleProbes), benchutil.Median(peak), benchutil.Median(idleProbes)/cfg.idle.Seconds(), sum(failures), sum(errs))
	fmt.Printf("  controller CPU %s per server per minute, %s per probe; status writes per probe %.3f\n",
		us(perMin(medianD(idleCPU))), us(medianD(idleCPU)/time.Duration(max(benchutil.Median(idleProbes), 1))), benchutil.Median(idlePatches))
	fmt.Printf("  API server + etcd CPU %s per server per minute, %s per probe\n",
		us(perMin(medianD(idleAPI))), us(medianD(idleAPI)/time.Duration(max(benchutil.Median(idleProbes), 1))))
	fmt.Printf("  watch events a watcher of the servers got: %.0f (%.3f per probe)\n",
		benchutil.Median(idleEvents), benchutil.Median(idleEvents)/max(benchutil.Median(idleProbes), 1))

	r := float64(medianD(ctlTotal)) / float64(medianD(baseTotal))
	fmt.Printf("\nsummary: %d servers Ready in %s through the controller vs %s for the bare API work (%.2fx); p50/p99 create→Ready %s/%s; %.2f reconciles and %s controller CPU per server; heap %.1f MB (%.1f KB/server); idle %s CPU per server per minute at a %s probe interval\n",
		cfg.servers, ms(medianD(ctlTotal)), ms(medianD(baseTotal)), r, ms(benchutil.Pct(ctlLat, 50)), ms(benchutil.Pct(ctlLat, 99)),
		benchutil.Median(recs), us(medianD(cpu)/time.Duration(n)), benchutil.Median(heapReady)/1e6, benchutil.Median(heapPer)/1e3, us(perMin(medianD(idleCPU))), cfg.interval)

	// The targets, each as measured / target.
	mean := benchutil.Median(idleProbes) / cfg.idle.Seconds()
	writes, idleAPIPerMin := benchutil.Median(idlePatches), perMin(medianD(idleAPI))
	eventsPerProbe := benchutil.Median(idleEvents) / max(benchutil.Median(idleProbes), 1)
	met := []bool{r <= 2, benchutil.Median(heapPer) <= 30e3, benchutil.Median(peak) <= 2*mean,
		writes <= 0.01, idleAPIPerMin <= 5*time.Millisecond, eventsPerProbe <= 0.01}
	fmt.Printf("targets: all Ready %.2fx the bare API work (target <= 2x) %s; heap %.1f KB per Ready server (target <= 30 KB) %s; busiest second %.2fx the mean probe rate (target <= 2x) %s\n",
		r, benchutil.Verdict(met[0]), benchutil.Median(heapPer)/1e3, benchutil.Verdict(met[1]), benchutil.Median(peak)/max(mean, 1e-9), benchutil.Verdict(met[2]))
	fmt.Printf("idle targets: status writes per probe %.3f (target <= 0.01) %s; API server + etcd CPU %s per server per minute (target <= 5ms) %s; watch events per probe %.3f (target <= 0.01) %s\n",
		writes, benchutil.Verdict(met[3]), us(idleAPIPerMin), benchutil.Verdict(met[4]), eventsPerProbe, benchutil.Verdict(met[5]))
	return !slices.Contains(met, false)
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

func medianD(d []time.Duration) time.Duration { return benchutil.Pct(d, 50) }

func sum(v []float64) float64 {
	var t float64
	for _, x := range v {
		t += x
	}
	return t
}
