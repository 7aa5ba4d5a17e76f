// Command bridge measures what the bridge costs an agent (issue 7), side by
// side in one run with the same client and the same upstream (the go-sdk
// everything-server, session era), in alternating rounds (plus mcp-go's
// server as a bare forwarder, the server side the design first suggested):
//
//	direct  the client talks to the upstream itself;
//	proxy   through a bare httputil.ReverseProxy: the unavoidable cost of one
//	        more HTTP hop on the same cores;
//	bridge  through the bridge with authentication (TokenReview, served from
//	        its cache as in steady state) and a realistic policy (several
//	        policies, globs, a CEL condition, a rate limit), the output
//	        pipeline and audit events written to a file;
//	bridge+otel  the same bridge with tracing on: every request sampled,
//	        its spans exported over OTLP to Jaeger on loopback.
//
// The proxy and the bridge run as child processes, so their CPU and memory
// are theirs alone. It prints p50 and p99 of one tools/call, calls/s at 32
// concurrent sessions, the bridge's CPU per 1,000 calls, its idle and loaded
// RSS and its heap per idle session at 1,000 sessions, with the ratios the
// issue sets targets for. Run it with `make bench-bridge`.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcp-operator/mcp-operator/bench/internal/benchutil"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

func main() {
	role := flag.String("role", "", "internal: run as the proxy or bridge child")
	upstreamURL := flag.String("upstream", "", "internal: the upstream URL (children)")
	listen := flag.String("listen", "", "internal: where a child listens")
	rounds := flag.Int("rounds", 5, "alternating rounds")
	calls := flag.Int("calls", 2000, "sequential calls per target per round (latency)")
	loadFor := flag.Duration("load", 3*time.Second, "duration of the 32-session load per target per round")
	sessions := flag.Int("sessions", 32, "concurrent sessions of the load")
	idle := flag.Int("idle-sessions", 1000, "idle sessions opened to measure heap per session")
	flag.Parse()
	var err error
	switch *role {
	case "proxy":
		err = serveProxy(*listen, *upstreamURL)
	case "bridge":
		err = serveBridge(*listen, *upstreamURL)
	case "mcpgo":
		err = serveMCPGo(*listen, *upstreamURL)
	default:
		err = run(*rounds, *calls, *loadFor, *sessions, *idle)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/bridge:", err)
		os.Exit(1)
	}
}

// target is one way to reach the upstream.
type target struct {
	name string
	url  string
	era  client.Era // the agent side's: the bridge speaks both
	pid  int        // the child's, 0 for direct
	lat  []time.Duration
	rate []float64
	cpu  time.Duration // child CPU over the load phases
	done int64         // calls during the load phases
	rss  int64         // child RSS after load (max over rounds)
}

// start runs a process and waits until addr accepts connections.
func start(addr string, name string, args ...string) (*exec.Cmd, error) {
	return startEnv(nil, addr, name, args...)
}

// startEnv is start with more environment.
func startEnv(env []string, addr string, name string, args ...string) (*exec.Cmd, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if !listening(addr) {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return nil, fmt.Errorf("%s did not listen on %s", name, addr)
	}
	return cmd, nil
}

// listening waits up to 30 s until addr accepts connections.
func listening(addr string) bool {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return true
		}
	}
	return false
}

func run(rounds, calls int, loadFor time.Duration, sessions, idle int) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	upAddr := benchutil.FreeAddr()
	up, err := start(upAddr, filepath.Join(root, "bin", "everything-server"), "-http="+upAddr, "-stateless=false")
	if err != nil {
		return fmt.Errorf("while starting the upstream (run make peers): %w", err)
	}
	defer benchutil.Stop(up)
	upURL := "http://" + upAddr + "/mcp"
	self, _ := os.Executable()
	proxyAddr, bridgeAddr, mcpgoAddr := benchutil.FreeAddr(), benchutil.FreeAddr(), benchutil.FreeAddr()
	proxy, err := start(proxyAddr, self, "-role=proxy", "-listen="+proxyAddr, "-upstream="+upURL)
	if err != nil {
		return err
	}
	defer benchutil.Stop(proxy)
	bridge, err := start(bridgeAddr, self, "-role=bridge", "-listen="+bridgeAddr, "-upstream="+upURL)
	if err != nil {
		return err
	}
	defer benchutil.Stop(bridge)
	mcpgo, err := start(mcpgoAddr, self, "-role=mcpgo", "-listen="+mcpgoAddr, "-upstream="+upURL)
	if err != nil {
		return err
	}
	defer benchutil.Stop(mcpgo)
	otlp, stopJaeger, err := startJaeger()
	if err != nil {
		return err
	}
	defer stopJaeger()
	tracedAddr := benchutil.FreeAddr()
	traced, err := startEnv([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_TRACES_SAMPLER=always_on"},
		tracedAddr, self, "-role=bridge", "-listen="+tracedAddr, "-upstream="+upURL)
	if err != nil {
		return err
	}
	defer benchutil.Stop(traced)

	targets := []*target{
		{name: "direct", url: upURL},
		{name: "proxy", url: "http://" + proxyAddr + "/mcp", pid: proxy.Process.Pid},
		{name: "bridge", url: "http://" + bridgeAddr + "/mcp", pid: bridge.Process.Pid},
		{name: "mcp-go", url: "http://" + mcpgoAddr + "/mcp", pid: mcpgo.Process.Pid},
		// The same bridge with 2026-07-28 agents (no session; each call
		// runs detached from its request, so the server may ask mid-call).
		{name: "bridge26", url: "http://" + bridgeAddr + "/mcp", era: client.EraStateless, pid: bridge.Process.Pid},
		{name: "bridge+otel", url: "http://" + tracedAddr + "/mcp", pid: traced.Process.Pid},
	}
	for _, t := range targets {
		if t.era == "" {
			t.era = client.EraSession
		}
	}
	tool := map[string]string{"direct": "test_simple_text", "proxy": "test_simple_text", "bridge": "mcp.everything.test_simple_text", "mcp-go": "test_simple_text",
		"bridge26": "mcp.everything.test_simple_text", "bridge+otel": "mcp.everything.test_simple_text"}
	fmt.Printf("bridge benchmark: %d rounds x (%d sequential calls + %s at %d sessions) per target, GOMAXPROCS=%d\n", rounds, calls, loadFor, sessions, runtime.GOMAXPROCS(0))

	// Warm up every path (connections, caches, the bridge's catalog).
	for _, t := range targets {
		if _, err := sequential(t.url, t.era, tool[t.name], 200); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
	}
	idleRSS := benchutil.RSS(bridge.Process.Pid)
	for r := 0; r < rounds; r++ {
		for _, t := range rotate(targets, r) {
			lat, err := sequential(t.url, t.era, tool[t.name], calls)
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			t.lat = append(t.lat, lat...)
			cpu0 := benchutil.CPU(t.pid)
			n, err := load(t.url, t.era, tool[t.name], sessions, loadFor)
			if err != nil {
				return fmt.Errorf("%s under load: %w", t.name, err)
			}
			t.cpu += benchutil.CPU(t.pid) - cpu0
			t.done += n
			t.rate = append(t.rate, float64(n)/loadFor.Seconds())
			t.rss = max(t.rss, benchutil.RSS(t.pid))
		}
	}
	heapPer, err := heapPerSession(targets[2].url, idle)
	if err != nil {
		return err
	}

	fmt.Printf("\n%-11s %10s %10s %12s %14s %10s\n", "target", "p50", "p99", "calls/s", "CPU/1k calls", "RSS")
	for _, t := range targets {
		cpu, rss := "-", "-"
		if t.pid != 0 {
			cpu = (t.cpu * 1000 / time.Duration(max(t.done, 1))).Round(time.Microsecond).String()
			rss = fmt.Sprintf("%.1f MB", float64(t.rss)/1e6)
		}
		fmt.Printf("%-11s %10s %10s %12.0f %14s %10s\n", t.name, benchutil.Pct(t.lat, 50), benchutil.Pct(t.lat, 99), benchutil.Median(t.rate), cpu, rss)
	}
	d, p, b, g, b26, bt := targets[0], targets[1], targets[2], targets[3], targets[4], targets[5]
	p50ratio := float64(benchutil.Pct(b.lat, 50)) / float64(benchutil.Pct(p.lat, 50))
	tputRatio := benchutil.Median(b.rate) / benchutil.Median(p.rate)
	fmt.Printf("\nproxy vs direct: p50 %.2fx, throughput %.2fx\n", float64(benchutil.Pct(p.lat, 50))/float64(benchutil.Pct(d.lat, 50)), benchutil.Median(p.rate)/benchutil.Median(d.rate))
	fmt.Printf("bridge vs proxy: p50 %.2fx (target <= 1.1x), throughput %.2fx (target >= 0.9x)\n", p50ratio, tputRatio)
	fmt.Printf("mcp-go forwarder (no auth, policy, pipeline or audit) vs proxy: p50 %.2fx, throughput %.2fx, CPU per call %.2fx the bridge's\n",
		float64(benchutil.Pct(g.lat, 50))/float64(benchutil.Pct(p.lat, 50)), benchutil.Median(g.rate)/benchutil.Median(p.rate), perCall(g)/perCall(b))
	fmt.Printf("bridge with 2026-07-28 agents vs 2025-11-25 sessions: p50 %.2fx, throughput %.2fx, CPU per call %.2fx\n",
		float64(benchutil.Pct(b26.lat, 50))/float64(benchutil.Pct(b.lat, 50)), benchutil.Median(b26.rate)/benchutil.Median(b.rate), perCall(b26)/perCall(b))
	fmt.Printf("bridge with tracing on (all sampled, to Jaeger on loopback) vs off: p50 %.2fx, throughput %.2fx, CPU per call %.2fx\n",
		float64(benchutil.Pct(bt.lat, 50))/float64(benchutil.Pct(b.lat, 50)), benchutil.Median(bt.rate)/benchutil.Median(b.rate), perCall(bt)/perCall(b))
	fmt.Printf("bridge vs direct: p50 %.2fx, throughput %.2fx\n", float64(benchutil.Pct(b.lat, 50))/float64(benchutil.Pct(d.lat, 50)), benchutil.Median(b.rate)/benchutil.Median(d.rate))
	fmt.Printf("bridge RSS: idle %.1f MB (target <= 40 MB), loaded %.1f MB\n", float64(idleRSS)/1e6, float64(b.rss)/1e6)
	fmt.Printf("bridge heap per idle session at %d sessions: %.1f KB (target <= 30 KB)\n", idle, heapPer/1e3)
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	fmt.Printf("targets: p50 %s, throughput %s, idle RSS %s, heap per session %s\n",
		verdict(p50ratio <= 1.1), verdict(tputRatio >= 0.9), verdict(idleRSS <= 40e6), verdict(heapPer <= 30e3))
	return nil
}

func perCall(t *target) float64 { return float64(t.cpu) / float64(max(t.done, 1)) }

// rotate changes which target goes first in each round.
func rotate(ts []*target, r int) []*target {
	out := make([]*target, len(ts))
	for i := range ts {
		out[i] = ts[(i+r)%len(ts)]
	}
	return out
}

func connect(url string, era client.Era) (*client.Client, error) {
	conn, err := streamhttp.New(streamhttp.Options{URL: url, BearerToken: benchToken})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return client.Connect(ctx, conn, client.Options{Era: era, ClientName: "bench"})
}

// sequential times n calls in one session, one after the other.
func sequential(url string, era client.Era, tool string, n int) ([]time.Duration, error) {
	c, err := connect(url, era)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	out := make([]time.Duration, 0, n)
	ctx := context.Background()
	for i := 0; i < n; i++ {
		start := time.Now()
		if _, err := c.CallTool(ctx, tool, nil); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

// load runs sessions concurrent sessions calling for d and counts the calls.
func load(url string, era client.Era, tool string, sessions int, d time.Duration) (int64, error) {
	clients := make([]*client.Client, sessions)
	for i := range clients {
		c, err := connect(url, era)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		clients[i] = c
	}
	var n atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if _, err := c.CallTool(context.Background(), tool, nil); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, err
	}
	return n.Load(), nil
}

// heapPerSession opens n sessions to the bridge and asks it how much its
// heap grew, after a GC on both readings.
func heapPerSession(url string, n int) (float64, error) {
	base := strings.TrimSuffix(url, "/mcp")
	before, err := heapOf(base)
	if err != nil {
		return 0, err
	}
	var clients []*client.Client
	for i := 0; i < n; i++ {
		c, err := connect(url, client.EraSession)
		if err != nil {
			return 0, err
		}
		clients = append(clients, c)
	}
	after, err := heapOf(base)
	for _, c := range clients {
		c.Close()
	}
	if err != nil {
		return 0, err
	}
	return float64(after-before) / float64(n), nil
}

// startJaeger runs the collector the traced bridge exports to (bin/jaeger,
// built by make peers) and returns its OTLP HTTP endpoint.
func startJaeger() (otlp string, stop func(), err error) {
	bin, err := testpeers.JaegerBinary()
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "bench-jaeger-")
	if err != nil {
		return "", nil, err
	}
	port := func() int { _, p, _ := net.SplitHostPort(benchutil.FreeAddr()); n, _ := strconv.Atoi(p); return n }
	query, queryGRPC, otlpGRPC, otlpHTTP := port(), port(), port(), port()
	config := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(config, []byte(testpeers.JaegerConfig(query, queryGRPC, otlpGRPC, otlpHTTP)), 0o600); err != nil {
		return "", nil, err
	}
	otlpAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(otlpHTTP))
	cmd, err := start(net.JoinHostPort("127.0.0.1", strconv.Itoa(query)), bin, "--config", config)
	if err == nil && !listening(otlpAddr) {
		// The receivers open just after the query API, or not at all.
		benchutil.Stop(cmd)
		err = fmt.Errorf("no OTLP receiver on %s", otlpAddr)
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("while starting jaeger (run make peers): %w", err)
	}
	return "http://" + otlpAddr, func() { benchutil.Stop(cmd); os.RemoveAll(dir) }, nil
}
