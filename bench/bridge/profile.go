package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/mcp-operator/mcp-operator/bench/internal/benchutil"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
)

// profileBridge writes a CPU profile of the bridge child taken while
// sessions 2025-11-25 agents call the fast upstream's echo through it for d
// (go tool pprof -top FILE): where the bridge's time goes under load.
func profileBridge(file string, sessions int, d time.Duration) error {
	self, _ := os.Executable()
	var procs children
	defer procs.stop()
	upAddr, bridgeAddr := benchutil.FreeAddr(), benchutil.FreeAddr()
	if _, err := procs.start(upAddr, nil, self, "-role=fast", "-listen="+upAddr); err != nil {
		return err
	}
	if _, err := procs.start(bridgeAddr, []string{"BENCH_BRIDGE_PPROF=1"}, self, "-role=bridge", "-listen="+bridgeAddr,
		"-upstreams=fast=http://"+upAddr+"/mcp"); err != nil {
		return err
	}
	url, args := "http://"+bridgeAddr+"/mcp", []byte(`{"text":"hello"}`)
	if _, err := sequential(url, benchToken, client.EraSession, "mcp.fast.echo", args, 200); err != nil {
		return err
	}
	type answer struct {
		profile []byte
		err     error
	}
	got := make(chan answer, 1)
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
	n, err := load(url, client.EraSession, "mcp.fast.echo", args, sessions, d)
	if err != nil {
		return err
	}
	a := <-got
	if a.err != nil {
		return a.err
	}
	fmt.Printf("%d calls in %s through the bridge; CPU profile in %s\n", n, d, file)
	return os.WriteFile(file, a.profile, 0o644)
}
