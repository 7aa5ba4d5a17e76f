package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/mcp-operator/mcp-operator/bench/internal/benchutil"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

// profileBridge writes a CPU profile of the bridge child taken while
// sessions 2025-11-25 agents call one upstream's tool through it for d
// (go tool pprof -top FILE): where the bridge's time goes under load. The
// upstream is "fast" (mcp-go, JSON answers) or "everything" (the go-sdk
// everything-server, SSE answers): the bridge reads the two kinds of
// answer on different paths. It also prints the bridge's CPU per call over
// the profile, from /proc, and first that of seqCalls sequential calls.
func profileBridge(file, upstreamName string, seqCalls, sessions int, d time.Duration) error {
	self, _ := os.Executable()
	var procs children
	defer procs.stop()
	upAddr, bridgeAddr := benchutil.FreeAddr(), benchutil.FreeAddr()
	var tool, textEnd string
	var args json.RawMessage
	switch upstreamName {
	case "fast":
		if _, err := procs.start(upAddr, nil, self, "-role=fast", "-listen="+upAddr); err != nil {
			return err
		}
		tool, args, textEnd = "echo", fastArgs, fastAnswer
	case "everything":
		root, err := testenv.RepoRoot()
		if err != nil {
			return err
		}
		if _, err := procs.startEverything(root, upAddr); err != nil {
			return err
		}
		tool, textEnd = "test_simple_text", everythingAnswer
	default:
		return fmt.Errorf("-profile-upstream takes fast or everything, not %q", upstreamName)
	}
	bridgePid, err := procs.start(bridgeAddr, []string{"BENCH_BRIDGE_PPROF=1"}, self, "-role=bridge", "-listen="+bridgeAddr,
		"-upstreams="+upstreamName+"=http://"+upAddr+"/mcp")
	if err != nil {
		return err
	}
	url, tool := "http://"+bridgeAddr+"/mcp", "mcp."+upstreamName+"."+tool
	if err := callChecked(url, client.EraSession, tool, args, textEnd); err != nil {
		return err
	}
	if _, err := sequential(url, benchToken, client.EraSession, tool, args, 200); err != nil {
		return err
	}
	// The bench's targets count the CPU of sequential calls: measured here
	// too, before the profile, so that two builds can be compared quickly.
	cpu0 := benchutil.CPU(bridgePid)
	lat, err := sequential(url, benchToken, client.EraSession, tool, args, seqCalls)
	if err != nil {
		return err
	}
	fmt.Printf("%d sequential calls of %s through the bridge: p50 %s, %s of bridge CPU per call\n",
		seqCalls, tool, benchutil.Pct(lat, 50).Round(time.Microsecond), perCall(benchutil.CPU(bridgePid)-cpu0, int64(seqCalls)))
	type answer struct {
		profile []byte
		err     error
	}
	got := make(chan answer, 1)
	cpu0 = benchutil.CPU(bridgePid)
	go func() {
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", bridgeAddr, int(d.Seconds())))
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- answer{b, err}
	}()
	n, err := load(url, client.EraSession, tool, args, sessions, d)
	cpu := benchutil.CPU(bridgePid) - cpu0
	if err != nil {
		return err
	}
	a := <-got
	if a.err != nil {
		return a.err
	}
	fmt.Printf("%d calls of %s in %s through the bridge, %s of bridge CPU per call; CPU profile in %s\n", n, tool, d, perCall(cpu, n), file)
	return os.WriteFile(file, a.profile, 0o644)
}
