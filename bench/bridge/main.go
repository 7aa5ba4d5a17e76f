// Command bridge measures what the bridge costs an agent,
// side by side in one run, in alternating rounds, against two upstreams:
//
//	everything  the go-sdk everything-server, session era only (2025-11-25),
//	            which answers tools/call on an SSE stream;
//	fast        mcp-go's server (mcpgo.go), which speaks both eras and
//	            answers an echo in about 0.2 ms with JSON.
//
// Each upstream is reached four ways by agents of the 2025-11-25 era, and
// the fast one also by agents of the 2026-07-28 era (no session). The
// session-era agents are mcp-go's Streamable HTTP client (agent.go: one
// session and one HTTP connection each), software nobody here wrote; the
// 2026-07-28 agents are our own client, internal/mcp/client. The ways:
//
//	direct  the agent talks to the upstream itself;
//	proxy   through a bare httputil.ReverseProxy (its transport reads an
//	        answer its agent gave up to the end, so that the connection
//	        stays: proxykeep.go): the unavoidable cost of one
//	        more HTTP hop on the same cores;
//	thv     through ToolHive's standalone proxy (thv proxy, built by
//	        `make bench-bridge` into bin/thv): the gateway users compare us
//	        with, without authentication or policy;
//	bridge  through the bridge with TokenReview authentication (a reviewer
//	        in the process, with the bridge's cache in front of it: at steady
//	        state production is served from that cache too), one allow rule,
//	        the output pipeline and audit events written to a file. Like the
//	        proxies it gives the upstream one session per session-era agent
//	        session (and none to 2026-07-28 agents).
//
// The proxies and the bridge run as child processes, so /proc tells their CPU
// and memory apart from the upstream's. It prints p50 and p99 of one
// tools/call (sequential calls in one session), calls/s at 32 concurrent
// sessions, the CPU per sequential call of the hop and of the upstream, what
// each path made the upstream do (sessions, protocol versions, stream
// types), the idle RSS of a real `manager bridge` process with its informers
// on a real API server (envtest; manager.go), and the bridge's heap and
// stacks per idle session, for sessions that never called and for sessions
// that called once (and so hold an upstream session). A missed target
// prints MISSED and the program exits 1. Run it with `make bench-bridge`.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcp-operator/mcp-operator/bench/internal/benchutil"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

func main() {
	role := flag.String("role", "", "internal: run as the proxy, bridge or fast upstream child")
	upstreams := flag.String("upstreams", "", "internal: the bridge child's upstreams, name=URL,...")
	upstreamURL := flag.String("upstream", "", "internal: the proxy child's upstream URL")
	listen := flag.String("listen", "", "internal: where a child listens")
	rounds := flag.Int("rounds", 5, "alternating rounds")
	calls := flag.Int("calls", 2000, "sequential calls per target per round (latency, CPU per call)")
	chunk := flag.Int("chunk", 250, "sequential calls per target in one turn: the targets' calls are interleaved in chunks")
	loadFor := flag.Duration("load", 5*time.Second, "duration of the concurrent load per target per round")
	slice := flag.Duration("slice", time.Second, "the load of a target in one turn: the targets' loads are interleaved in slices")
	sessions := flag.Int("sessions", 32, "concurrent sessions of the load")
	idle := flag.Int("idle-sessions", 1000, "idle sessions opened to measure heap per session")
	cpuProfile := flag.String("cpuprofile", "", "instead of the comparison: write a CPU profile of the bridge under the load (2025-11-25 agents) to this file")
	profileUpstream := flag.String("profile-upstream", "fast", "the upstream of -cpuprofile: fast (mcp-go, JSON answers) or everything (go-sdk everything-server, SSE answers)")
	only := flag.String("only", "", "instead of the comparison: memory measures the idle RSS of a real manager bridge alone; wire shows what the everything-server receives from each path (wirereport.go)")
	idleWait := flag.Duration("idle-wait", managerIdleWait, "how long the real manager bridge idles after its calls before its RSS is read")
	attribute := flag.Bool("attribute", false, "with -only memory: also print whose the manager binary's resident pages are, by section and package")
	shapeCalls := flag.Int("shape-calls", 20000, "with -only wire: calls of each captured tools/call request sent to the everything-server directly (0: none)")
	flag.Parse()
	var err error
	switch *role {
	case "proxy":
		err = serveProxy(*listen, *upstreamURL)
	case "bridge":
		err = serveBridge(*listen, *upstreams)
	case "fast":
		err = serveFast(*listen)
	case "":
		// Ctrl-C or a timeout's SIGTERM ends the run through its defers:
		// the children (each in a process group of its own, so not
		// signalled with us) stopped, the scratch directory removed.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		go func() { <-ctx.Done(); stop() }() // a second signal ends the process at once
		err = inScratchDir(func() error {
			switch {
			case *cpuProfile != "":
				return profileBridge(*cpuProfile, *profileUpstream, *calls, *sessions, *loadFor)
			case *only == "memory":
				return memoryOnly(*idleWait, *attribute)
			case *only == "wire":
				return wireReport(*calls, *sessions, *loadFor, *shapeCalls)
			case *only != "":
				return fmt.Errorf("-only takes memory or wire, not %q", *only)
			}
			if *calls < 1 || *chunk < 1 || *rounds < 1 || *sessions < 1 || *slice <= 0 || *loadFor < *slice {
				return fmt.Errorf("-rounds, -calls, -chunk and -sessions must be at least 1 and -load at least -slice (above 0), not %d, %d, %d, %d, %s and %s", *rounds, *calls, *chunk, *sessions, *loadFor, *slice)
			}
			return run(ctx, *rounds, *calls, *chunk, *loadFor, *slice, *sessions, *idle)
		})
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted, children stopped and temporary files removed: %w", err)
		}
		if errors.Is(err, errMissed) {
			fmt.Println(err)
			os.Exit(1)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/bridge:", err)
		os.Exit(1)
	}
}

// inScratchDir runs f with TMPDIR set to a directory of its own, removed after
// f, whose children are stopped by then: the temporary files of the run (the
// bridge children's audit logs and artifacts, Jaeger's config, ToolHive's
// home, envtest's etcd) go there. The children are killed, so they cannot
// remove their own: without this, each run would leave directories behind.
func inScratchDir(f func() error) error {
	dir, err := os.MkdirTemp("", "bench-bridge-run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	old, had := os.LookupEnv("TMPDIR")
	if err := os.Setenv("TMPDIR", dir); err != nil {
		return err
	}
	defer func() {
		if had {
			_ = os.Setenv("TMPDIR", old)
		} else {
			_ = os.Unsetenv("TMPDIR")
		}
	}()
	return f()
}

var errMissed = errors.New("bench/bridge: a target was MISSED")

// mcpServer is one upstream MCP server the targets reach.
type mcpServer struct {
	name   string // the MCPServer's name behind the bridge
	about  string
	url    string
	pid    int
	tool   string // the tool called, by its upstream name
	args   json.RawMessage
	answer string // what the tool's answer text ends with
	stats  string // URL of its counters (the fast upstream only)
}

// target is one way to reach an upstream.
type target struct {
	via  string // direct, proxy, thv or bridge
	up   *mcpServer
	url  string
	era  client.Era // the agent's
	pid  int        // the hop's, 0 for direct
	tool string
	does string // what the hop does, and what the upstream saw

	seq          agent   // its sequential calls' session, open across turns
	load         []agent // its load's sessions, open across turns
	lat          []time.Duration
	loadCalls    int64         // calls made under load
	loadTime     time.Duration // the load turns' time
	sliceRate    []float64     // calls/s of each load turn, in pass order
	seqCalls     int64
	hopCPU, upCP time.Duration // over the sequential calls
	chunkCPU     []float64     // hop and upstream CPU per call, ns, of each chunk, in pass order
	chunkUp      []float64     // the upstream's alone
	rss          int64         // the hop's, after load (max over rounds)
}

func (t *target) name() string {
	if t.era == client.EraStateless {
		return t.via + " (2026-07-28 agents)"
	}
	return t.via
}

// start runs a process and waits until addr accepts connections.
func start(addr string, env []string, name string, args ...string) (*exec.Cmd, error) {
	cmd := exec.Command(name, args...)
	cmd.Stderr = os.Stderr
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return cmd, nil
		}
	}
	benchutil.Stop(cmd)
	return nil, fmt.Errorf("%s did not listen on %s", name, addr)
}

// children are the processes of one run, stopped together.
type children []*exec.Cmd

func (cs *children) start(addr string, env []string, name string, args ...string) (int, error) {
	cmd, err := start(addr, env, name, args...)
	if err != nil {
		return 0, err
	}
	*cs = append(*cs, cmd)
	return cmd.Process.Pid, nil
}

// startEverything runs the go-sdk everything-server (bin/everything-server,
// built by make peers) in the session era, listening on addr.
func (cs *children) startEverything(root, addr string) (int, error) {
	pid, err := cs.start(addr, nil, filepath.Join(root, "bin", "everything-server"), "-http="+addr, "-stateless=false")
	if err != nil {
		return 0, fmt.Errorf("while starting the everything-server (run make peers): %w", err)
	}
	return pid, nil
}

// pids are the children's process ids.
func (cs children) pids() []int {
	var out []int
	for _, c := range cs {
		out = append(out, c.Process.Pid)
	}
	return out
}

// stop is deferred as procs.stop(): a pointer receiver, so that it stops
// the children started after the defer too.
func (cs *children) stop() {
	for _, c := range *cs {
		benchutil.Stop(c)
	}
}

func run(ctx context.Context, rounds, calls, chunk int, loadFor, slice time.Duration, sessions, idle int) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	thv := filepath.Join(root, "bin", "thv")
	if _, err := os.Stat(thv); err != nil {
		return fmt.Errorf("ToolHive's proxy is not built (run make bench-bridge): %w", err)
	}
	self, _ := os.Executable()
	var procs children
	defer procs.stop()

	everything := &mcpServer{name: "everything", about: "go-sdk everything-server, session era, SSE answers", tool: "test_simple_text", answer: everythingAnswer}
	fast := &mcpServer{name: "fast", about: "mcp-go server, both eras, JSON answers", tool: "echo", args: fastArgs, answer: fastAnswer}
	addr := benchutil.FreeAddr()
	if everything.pid, err = procs.startEverything(root, addr); err != nil {
		return err
	}
	everything.url = "http://" + addr + "/mcp"
	addr = benchutil.FreeAddr()
	if fast.pid, err = procs.start(addr, nil, self, "-role=fast", "-listen="+addr); err != nil {
		return err
	}
	fast.url, fast.stats = "http://"+addr+"/mcp", "http://"+addr+"/stats"
	ups := []*mcpServer{everything, fast}

	bridgeAddr := benchutil.FreeAddr()
	bridgePid, err := procs.start(bridgeAddr, nil, self, "-role=bridge", "-listen="+bridgeAddr,
		"-upstreams=everything="+everything.url+",fast="+fast.url)
	if err != nil {
		return err
	}
	// The same bridge with tracing on: every request sampled,
	// its spans exported over OTLP HTTP to Jaeger on loopback.
	otlp, err := startJaeger(&procs)
	if err != nil {
		return err
	}
	tracedAddr := benchutil.FreeAddr()
	tracedPid, err := procs.start(tracedAddr, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_TRACES_SAMPLER=always_on",
		// Spans exported 50 ms after they end, not at the SDK's 5 s tick: a
		// turn's spans are sent within the wait after it, and so counted as
		// the traced bridge's, not in another target's turn.
		"OTEL_BSP_SCHEDULE_DELAY=50"},
		self, "-role=bridge", "-listen="+tracedAddr, "-upstreams=everything="+everything.url+",fast="+fast.url)
	if err != nil {
		return err
	}
	if os.Getenv("BENCH_BRIDGE_PPROF") != "" {
		fmt.Printf("bridge child: http://%s/debug/pprof/\n", bridgeAddr)
	}
	thvHome, err := os.MkdirTemp("", "bench-thv-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(thvHome)

	var targets []*target
	for _, up := range ups {
		ts := []*target{{via: "direct", up: up, url: up.url, tool: up.tool, does: "no hop"}}
		proxyAddr, thvAddr := benchutil.FreeAddr(), benchutil.FreeAddr()
		proxyPid, err := procs.start(proxyAddr, nil, self, "-role=proxy", "-listen="+proxyAddr, "-upstream="+up.url)
		if err != nil {
			return err
		}
		ts = append(ts, &target{via: "proxy", up: up, url: "http://" + proxyAddr + "/mcp", pid: proxyPid, tool: up.tool,
			does: "relays each request and answer as they are: one upstream session per agent session, the upstream's stream type"})
		thvPid, err := procs.start(thvAddr, thvEnv(thvHome), thv, thvArgs(up.url, thvAddr)...)
		if err != nil {
			return fmt.Errorf("ToolHive's proxy: %w", err)
		}
		ts = append(ts, &target{via: "thv", up: up, url: "http://" + thvAddr + "/mcp", pid: thvPid, tool: up.tool,
			does: "ToolHive's transparent proxy: one upstream session per agent session, the upstream's stream type"})
		ts = append(ts, &target{via: "bridge", up: up, url: "http://" + bridgeAddr + "/mcp", pid: bridgePid, tool: "mcp." + up.name + "." + up.tool,
			does: "authenticates, checks the policy, runs the output pipeline, writes audit; one upstream session per agent session (opened on its first call, DELETEd when it ends), all on one pool of HTTP connections; answers JSON"})
		if up == fast {
			ts = append(ts,
				&target{via: "direct", up: up, url: up.url, era: client.EraStateless, tool: up.tool, does: "no hop"},
				&target{via: "bridge", up: up, url: "http://" + bridgeAddr + "/mcp", era: client.EraStateless, pid: bridgePid, tool: "mcp." + up.name + "." + up.tool,
					does: "as above, but 2026-07-28 agents have no session: their calls go statelessly on the one shared connection, detached from their requests, so the upstream may ask mid-call"},
				&target{via: "bridge+otel", up: up, url: "http://" + tracedAddr + "/mcp", pid: tracedPid, tool: "mcp." + up.name + "." + up.tool,
					does: "the bridge with tracing on: every request sampled, its spans exported over OTLP HTTP to Jaeger on loopback"})
		}
		targets = append(targets, ts...)
	}
	for _, t := range targets {
		if t.era == "" {
			t.era = client.EraSession
		}
	}
	fmt.Printf("bridge benchmark: %d rounds x (%d sequential calls, in turns of %d across targets, + %s at %d sessions, in slices of %s across targets) per target, GOMAXPROCS=%d\n", rounds, calls, chunk, loadFor, sessions, slice, runtime.GOMAXPROCS(0))
	fmt.Printf("agents (on every path): %s\n", agentsDo)

	// Warm up every path (connections, caches, the bridge's catalog).
	for _, t := range targets {
		if err := callChecked(t.url, t.era, t.tool, t.up.args, t.up.answer); err != nil {
			return fmt.Errorf("%s to %s: %w", t.name(), t.up.name, err)
		}
		if _, err := sequential(t.url, benchToken, t.era, t.tool, t.up.args, 200); err != nil {
			return fmt.Errorf("%s to %s: %w", t.name(), t.up.name, err)
		}
	}
	for _, t := range targets {
		if err := openTarget(ctx, t, sessions, slice); err != nil {
			return fmt.Errorf("%s to %s: %w", t.name(), t.up.name, err)
		}
		defer func() { closeAll(append(t.load, t.seq)) }()
	}
	all := procs.pids()
	var quiet quietWaits
	for r := 0; r < rounds; r++ {
		if err := sequentialRound(ctx, targets, r, calls, chunk, all, &quiet); err != nil {
			return err
		}
		if err := loadRound(ctx, targets, r, loadFor, slice, all, &quiet); err != nil {
			return err
		}
		fmt.Printf("round %d of %d done\n", r+1, rounds)
	}
	for _, t := range targets {
		closeAll(append(t.load, t.seq))
		t.load, t.seq = nil, nil
	}
	fmt.Println(quiet)
	if err := ctx.Err(); err != nil {
		return err
	}
	heapPer, err := heapPerSession("http://"+bridgeAddr, "http://"+bridgeAddr+"/mcp", idle, "", nil)
	if err != nil {
		return err
	}
	heapCalled, err := heapPerSession("http://"+bridgeAddr, "http://"+bridgeAddr+"/mcp", idle, "mcp.fast."+fast.tool, fast.args)
	if err != nil {
		return err
	}
	idleRSS, err := managerIdleRSS(root, fast, managerIdleWait, false)
	if err != nil {
		// The comparison stands on its own: print it, with the idle RSS missed.
		fmt.Println("the real manager bridge could not be measured:", err)
		idleRSS = math.MaxInt64
	}
	return report(ups, targets, idleRSS, heapPer, heapCalled, idle)
}

// thvArgs runs `thv proxy` in front of an upstream, listening on addr.
func thvArgs(upstreamURL, addr string) []string {
	host, port, _ := net.SplitHostPort(addr)
	u := strings.TrimSuffix(upstreamURL, "/mcp")
	return []string{"proxy", "bench", "--target-uri", u, "--host", host, "--port", port}
}

// thvEnv switches off ToolHive's update check, desktop-app check and usage
// metrics (pkg/updates, pkg/desktop, pkg/usagemetrics), so that it makes no
// network call, and keeps its config and state in a directory of the run.
func thvEnv(home string) []string {
	return []string{
		"TOOLHIVE_SKIP_UPDATE_CHECK=true", "TOOLHIVE_SKIP_DESKTOP_CHECK=true", "TOOLHIVE_USAGE_METRICS_ENABLED=false",
		// thv refuses to start any command but informational ones without a
		// container runtime (cmd/thv/main.go), though `thv proxy` uses none;
		// naming the Kubernetes one passes that check.
		"TOOLHIVE_RUNTIME=kubernetes",
		"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "config"), "XDG_STATE_HOME=" + filepath.Join(home, "state"),
		"XDG_DATA_HOME=" + filepath.Join(home, "data"), "XDG_CACHE_HOME=" + filepath.Join(home, "cache"),
	}
}

// openTarget opens a target's sessions for the run: the one of its
// sequential calls and the load's, each making one untimed call first, so
// that every path has its upstream sessions open before the timing (the
// bridge opens one at an agent session's first call; the proxies relay
// the handshake when the agent connects). On the fast upstream it also
// runs one untimed slice of the load and notes what the upstream saw in
// it.
func openTarget(ctx context.Context, t *target, sessions int, slice time.Duration) error {
	var err error
	if t.seq, err = connect(t.url, benchToken, t.era); err != nil {
		return err
	}
	if err := checkedCall(ctx, t.seq, t.tool, t.up.args, t.up.answer); err != nil {
		return err
	}
	if t.load, err = openSessions(t.url, t.era, sessions); err != nil {
		return err
	}
	for _, c := range t.load {
		if _, err := c.CallTool(ctx, t.tool, t.up.args); err != nil {
			return err
		}
	}
	if t.up.stats == "" {
		return nil
	}
	if _, err := upstreamSaw(t.up.stats); err != nil { // reset
		return err
	}
	if _, err := callFor(ctx, t.load, t.tool, t.up.args, slice); err != nil {
		return fmt.Errorf("under load: %w", err)
	}
	saw, err := upstreamSaw(t.up.stats)
	if err != nil {
		return err
	}
	t.does += "\n      under load: " + saw.String()
	return nil
}

// upstreamSaw reads and resets the fast upstream's counters.
func upstreamSaw(url string) (upstreamStats, error) {
	var s upstreamStats
	resp, err := http.Post(url, "", nil)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

func perCall(d time.Duration, n int64) time.Duration {
	return (d / time.Duration(max(n, 1))).Round(time.Microsecond)
}

func report(ups []*mcpServer, targets []*target, idleRSS int64, heapPer, heapCalled float64, idle int) error {
	missed := false
	verdict := func(ok bool) string {
		missed = missed || !ok
		return benchutil.Verdict(ok)
	}
	for _, up := range ups {
		fmt.Printf("\nupstream %s (%s):\n", up.name, up.about)
		fmt.Printf("  %-28s %9s %9s %9s %14s %14s %9s\n", "target", "p50", "p99", "calls/s", "hop CPU/call", "upstr CPU/call", "hop RSS")
		rate := func(t *target) float64 { return float64(t.loadCalls) / t.loadTime.Seconds() }
		byName := map[string]*target{}
		for _, t := range targets {
			if t.up != up {
				continue
			}
			byName[t.name()] = t
			hop, rss := "-", "-"
			if t.pid != 0 {
				hop = perCall(t.hopCPU, t.seqCalls).String()
				rss = fmt.Sprintf("%.1f MB", float64(t.rss)/1e6)
			}
			fmt.Printf("  %-28s %9s %9s %9.0f %14s %14s %9s\n", t.name(), benchutil.Pct(t.lat, 50).Round(time.Microsecond), benchutil.Pct(t.lat, 99).Round(time.Microsecond),
				rate(t), hop, perCall(t.upCP, t.seqCalls), rss)
		}
		for _, t := range targets {
			if t.up == up {
				fmt.Printf("  %s: %s\n", t.name(), t.does)
			}
		}
		b, p, th, d := byName["bridge"], byName["proxy"], byName["thv"], byName["direct"]
		p50 := func(t *target) float64 { return float64(benchutil.Pct(t.lat, 50)) }
		cpu := func(t *target) float64 { return float64(t.hopCPU+t.upCP) / float64(max(t.seqCalls, 1)) }
		fmt.Printf("  proxy vs direct: p50 %.2fx, throughput %.2fx\n", p50(p)/p50(d), rate(p)/rate(d))
		fmt.Printf("  bridge vs proxy: p50 %.2fx (target <= 1.15x) %s, throughput %.2fx (target >= 0.85x) %s\n",
			p50(b)/p50(p), verdict(p50(b) > 0 && p50(b) <= 1.15*p50(p)), rate(b)/rate(p), verdict(rate(b) > 0 && rate(b) >= 0.85*rate(p)))
		fmt.Printf("  bridge vs thv: p50 %.2fx (target <= 1x) %s, throughput %.2fx (target >= 1x) %s, CPU per call with the upstream's %.2fx (target <= 1x) %s\n",
			p50(b)/p50(th), verdict(p50(b) > 0 && p50(b) <= p50(th)), rate(b)/rate(th), verdict(rate(b) > 0 && rate(b) >= rate(th)), cpu(b)/cpu(th), verdict(cpu(b) > 0 && cpu(b) <= cpu(th)))
		fmt.Printf("  upstream CPU per call: behind the bridge %s, behind the proxy %s, direct %s\n",
			perCall(b.upCP, b.seqCalls), perCall(p.upCP, p.seqCalls), perCall(d.upCP, d.seqCalls))
		fmt.Printf("  the spread over the %d turns of sequential calls (quartiles of each turn's ratio): CPU per call with the upstream's, bridge/thv %s; upstream CPU per call, behind the bridge/behind the proxy %s\n",
			len(b.chunkCPU), quartiles(b.chunkCPU, th.chunkCPU), quartiles(b.chunkUp, p.chunkUp))
		fmt.Printf("  the spread over the %d turns of load (quartiles of each turn's calls/s ratio): bridge/proxy %s, bridge/thv %s\n",
			len(b.sliceRate), quartiles(b.sliceRate, p.sliceRate), quartiles(b.sliceRate, th.sliceRate))
		if bt := byName["bridge+otel"]; bt != nil {
			fmt.Printf("  tracing on (all sampled, to Jaeger on loopback) vs off: p50 %.2fx, throughput %.2fx, CPU per call with the upstream's %.2fx (reported, no target)\n",
				p50(bt)/p50(b), rate(bt)/rate(b), cpu(bt)/cpu(b))
		}
		if b26, d26 := byName["bridge (2026-07-28 agents)"], byName["direct (2026-07-28 agents)"]; b26 != nil && d26 != nil {
			fmt.Printf("  2026-07-28 agents: bridge vs direct p50 %.2fx; bridge vs its 2025-11-25 agents: p50 %.2fx, throughput %.2fx\n",
				p50(b26)/p50(d26), p50(b26)/p50(b), rate(b26)/rate(b))
		}
	}
	fmt.Printf("\nreal manager bridge (informers on envtest), idle RSS: %.1f MB (target <= 40 MB) %s\n", float64(idleRSS)/1e6, verdict(idleRSS <= 40e6))
	fmt.Printf("bridge heap and stacks per idle session at %d sessions: %.1f KB (target <= 30 KB) %s\n", idle, heapPer/1e3, verdict(heapPer <= 30e3))
	fmt.Printf("  the same, each session having called the fast upstream once (its own upstream session open): %.1f KB (target <= 30 KB) %s\n", heapCalled/1e3, verdict(heapCalled <= 30e3))
	fmt.Println("(the machine is shared: compare the rows of one run, not runs)")
	if missed {
		return errMissed
	}
	return nil
}

// quartiles are those of a[i]/b[i], for the turns both ran.
func quartiles(a, b []float64) string {
	var r []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			r = append(r, a[i]/b[i])
		}
	}
	if len(r) == 0 {
		return "-"
	}
	slices.Sort(r)
	q := func(p int) float64 { return r[benchutil.Rank(len(r), p)] }
	return fmt.Sprintf("%.2f %.2f %.2f", q(25), q(50), q(75))
}

// What the text of the tools' answers the bench calls ends with (the
// bridge prefixes it with where it came from): fast's echo of its argument,
// and the everything-server's test_simple_text.
const (
	fastAnswer       = "hello"
	everythingAnswer = "This is a simple text response for testing."
)

// fastArgs asks fast's echo for fastAnswer.
var fastArgs = json.RawMessage(`{"text":"` + fastAnswer + `"}`)

// callChecked makes one call of tool in a session of its own and checks
// its answer. The calls timed are not checked: both clients return a
// tool's error result (isError) as a success, and a bench of error
// results would measure the wrong path.
func callChecked(url string, era client.Era, tool string, args json.RawMessage, answer string) error {
	c, err := connect(url, benchToken, era)
	if err != nil {
		return err
	}
	defer c.Close()
	return checkedCall(context.Background(), c, tool, args, answer)
}

// checkedCall makes one call of tool in the agent's session and checks its
// answer.
func checkedCall(ctx context.Context, a agent, tool string, args json.RawMessage, answer string) error {
	res, err := a.CallTool(ctx, tool, args)
	if err != nil {
		return err
	}
	raw, err := res.JSON()
	if err != nil {
		return fmt.Errorf("%s answered a result that cannot be encoded again: %w", tool, err)
	}
	return checkAnswer(tool, raw, answer)
}

// checkAnswer says whether a tools/call result is one text ending in answer.
func checkAnswer(tool string, res json.RawMessage, answer string) error {
	var r struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
	}
	if json.Unmarshal(res, &r) != nil || r.IsError || len(r.Content) != 1 || !strings.HasSuffix(r.Content[0].Text, answer) {
		return fmt.Errorf("%s answered %s, want one text ending in %q", tool, res, answer)
	}
	return nil
}

// sequential times n calls in one session, one after the other.
func sequential(url, token string, era client.Era, tool string, args json.RawMessage, n int) ([]time.Duration, error) {
	c, err := connect(url, token, era)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return timeCalls(context.Background(), c, tool, args, n)
}

// timeCalls times n calls of c, one after the other.
func timeCalls(ctx context.Context, c agent, tool string, args json.RawMessage, n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if _, err := c.CallTool(ctx, tool, args); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

// load runs sessions concurrent sessions calling for d and counts the calls.
func load(url string, era client.Era, tool string, args json.RawMessage, sessions int, d time.Duration) (int64, error) {
	clients, err := openSessions(url, era, sessions)
	if err != nil {
		return 0, err
	}
	defer closeAll(clients)
	return callFor(context.Background(), clients, tool, args, d)
}

// callFor has each client call tool, one call after another, for d, all
// at once, and counts the calls.
func callFor(ctx context.Context, clients []agent, tool string, args json.RawMessage, d time.Duration) (int64, error) {
	var n atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if _, err := c.CallTool(ctx, tool, args); err != nil {
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
// heap and goroutine stacks grew, after a GC on both readings. With a tool,
// each session calls it once first (the bridge then holds the session's
// own upstream session too).
func heapPerSession(base, url string, n int, tool string, args json.RawMessage) (float64, error) {
	before, err := heapOf(base)
	if err != nil {
		return 0, err
	}
	var clients []agent
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for i := 0; i < n; i++ {
		c, err := connect(url, benchToken, client.EraSession)
		if err != nil {
			return 0, err
		}
		clients = append(clients, c)
		if tool == "" {
			continue
		}
		if _, err := c.CallTool(context.Background(), tool, args); err != nil {
			return 0, err
		}
	}
	after, err := heapOf(base)
	if err != nil {
		return 0, err
	}
	return float64(after-before) / float64(n), nil
}

// startJaeger runs the collector the traced bridge exports to (bin/jaeger,
// built by make peers) as one of procs, and returns its OTLP HTTP endpoint.
func startJaeger(procs *children) (string, error) {
	bin, err := testpeers.JaegerBinary()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "bench-jaeger-")
	if err != nil {
		return "", err
	}
	port := func() int { _, p, _ := net.SplitHostPort(benchutil.FreeAddr()); n, _ := strconv.Atoi(p); return n }
	query, queryGRPC, otlpGRPC, otlpHTTP := port(), port(), port(), port()
	config := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(config, []byte(testpeers.JaegerConfig(query, queryGRPC, otlpGRPC, otlpHTTP)), 0o600); err != nil {
		return "", err
	}
	// The OTLP receiver listening is what the traced bridge needs.
	otlpAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(otlpHTTP))
	if _, err := procs.start(otlpAddr, nil, bin, "--config", config); err != nil {
		return "", fmt.Errorf("while starting jaeger (run make peers): %w", err)
	}
	return "http://" + otlpAddr, nil
}
