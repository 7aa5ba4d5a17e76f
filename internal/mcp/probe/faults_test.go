package probe_test

// Faults no real server produces on demand come from faultserver, our own
// deliberately broken server: over stdio the test binary re-executes itself
// as that server (TestMain), over HTTP it runs in-process on loopback.
// Every fault must end in a clear error or a flagged catalog within its
// timeout: never a hang, a panic or a leaked process.

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/internal/faultserver"
	"github.com/mcp-operator/mcp-operator/internal/mcp/internal/testproc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/probe"
	"github.com/mcp-operator/mcp-operator/internal/mcp/stdio"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
)

func TestMain(m *testing.M) {
	faultserver.RunStdioFromEnv()
	os.Exit(m.Run())
}

const faultTimeout = 3 * time.Second

func stdioFault(mode faultserver.Mode, extraEnv ...string) probe.Target {
	env := append(os.Environ(), "MCP_FAULT_MODE="+string(mode))
	return probe.Target{Stdio: &stdio.Options{
		Command: os.Args[0], Env: append(env, extraEnv...), StopGrace: 300 * time.Millisecond,
	}}
}

func httpFault(t *testing.T, mode faultserver.Mode) (probe.Target, *faultserver.Handler) {
	h := faultserver.NewHandler(mode)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return probe.Target{HTTP: &streamhttp.Options{URL: srv.URL + "/mcp"}}, h
}

// probeFault runs a probe bounded by faultTimeout and checks it ended in
// time and, for stdio, left no child process behind.
func probeFault(t *testing.T, target probe.Target, opts probe.Options) (*probe.Result, time.Duration, error) {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = faultTimeout
	}
	opts.DiscoverTimeout = time.Second
	start := time.Now()
	res, err := probe.Run(context.Background(), target, opts)
	took := time.Since(start)
	t.Logf("%s: took %s, err: %v", target.Transport(), took.Round(time.Millisecond), err)
	if took > opts.Timeout+2*time.Second {
		t.Errorf("the probe took %s, far beyond its %s timeout", took, opts.Timeout)
	}
	if target.Stdio != nil {
		if kids := testproc.Children(os.Getpid()); len(kids) > 0 {
			t.Errorf("child processes left after the probe: %v", kids)
		}
	}
	return res, took, err
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("the probe succeeded; want an error mentioning %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
}

func bothTransports(t *testing.T, mode faultserver.Mode, check func(t *testing.T, target probe.Target)) {
	t.Run("stdio", func(t *testing.T) { check(t, stdioFault(mode)) })
	t.Run("http", func(t *testing.T) {
		target, _ := httpFault(t, mode)
		check(t, target)
	})
}

func TestFaultNeverAnswers(t *testing.T) {
	bothTransports(t, faultserver.Silent, func(t *testing.T, target probe.Target) {
		_, took, err := probeFault(t, target, probe.Options{})
		wantErr(t, err, "initialize", "deadline exceeded", "no answer to server/discover")
		if took < faultTimeout-100*time.Millisecond {
			t.Errorf("gave up after %s, before the %s timeout", took, faultTimeout)
		}
	})
}

func TestFaultExitsMidProbe(t *testing.T) {
	t.Run("stdio", func(t *testing.T) {
		_, _, err := probeFault(t, stdioFault(faultserver.ExitMidProbe), probe.Options{})
		wantErr(t, err, "tools/list", "exit status 3", "simulated crash while listing tools")
		var exit *stdio.ExitError
		if !errors.As(err, &exit) || exit.ExitCode != 3 {
			t.Errorf("error %v carries no ExitError with code 3", err)
		}
	})
	t.Run("http", func(t *testing.T) {
		target, _ := httpFault(t, faultserver.ExitMidProbe)
		_, _, err := probeFault(t, target, probe.Options{})
		wantErr(t, err, "tools/list", target.HTTP.URL)
	})
}

func TestFaultServerDiesAtStart(t *testing.T) {
	target := probe.Target{Stdio: &stdio.Options{Command: "sh", Args: []string{"-c", "echo 'cannot open config' >&2; exit 7"}}}
	_, _, err := probeFault(t, target, probe.Options{})
	wantErr(t, err, "exit status 7", "cannot open config")
	missing := probe.Target{Stdio: &stdio.Options{Command: filepath.Join(t.TempDir(), "no-such-server")}}
	_, _, err = probeFault(t, missing, probe.Options{})
	wantErr(t, err, "while starting the stdio server", "no-such-server")
}

func TestFaultMalformedJSON(t *testing.T) {
	bothTransports(t, faultserver.Malformed, func(t *testing.T, target probe.Target) {
		_, took, err := probeFault(t, target, probe.Options{})
		wantErr(t, err, "initialize", "malformed JSON-RPC message")
		if took > faultTimeout/2 {
			t.Errorf("malformed JSON took %s to report: it should fail at once, not time out", took)
		}
	})
}

func TestFaultTenThousandToolsOverManyPages(t *testing.T) {
	bothTransports(t, faultserver.ManyTools, func(t *testing.T, target probe.Target) {
		res, took, err := probeFault(t, target, probe.Options{Server: "many", Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(res.Catalog.Tools); n != faultserver.ManyToolsCount {
			t.Fatalf("%d tools in the catalog, want %d", n, faultserver.ManyToolsCount)
		}
		t.Logf("%d tools over %d pages in %s", faultserver.ManyToolsCount, faultserver.ManyToolsCount/faultserver.PageSize, took.Round(time.Millisecond))
		if res.Catalog.Tools[0].Name != "mcp.many.tool_00000" || res.Catalog.Tools[9999].Name != "mcp.many.tool_09999" {
			t.Errorf("catalog not sorted: first %s, last %s", res.Catalog.Tools[0].Name, res.Catalog.Tools[9999].Name)
		}
	})
	bounds := []struct {
		bound  string
		limits client.Limits
	}{
		{"maxPages", client.Limits{MaxPages: 50}},
		{"maxItems", client.Limits{MaxItems: 5000}},
		{"maxBytes", client.Limits{MaxBytes: 100 << 10}},
	}
	for _, b := range bounds {
		t.Run(b.bound, func(t *testing.T) {
			_, _, err := probeFault(t, stdioFault(faultserver.ManyTools), probe.Options{Limits: b.limits})
			var le *client.LimitError
			if !errors.As(err, &le) || le.Bound != b.bound || le.Method != "tools/list" {
				t.Fatalf("error %v, want a LimitError naming %s on tools/list", err, b.bound)
			}
			wantErr(t, err, b.bound)
		})
	}
}

func TestFaultDuplicateToolName(t *testing.T) {
	res, _, err := probeFault(t, stdioFault(faultserver.DuplicateTool), probe.Options{Server: "dup"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Catalog.Tools) != 1 || res.Catalog.Tools[0].UpstreamName != "single" {
		t.Fatalf("tools %+v, want only the unique one", res.Catalog.Tools)
	}
	if len(res.Catalog.Rejected) != 2 {
		t.Fatalf("rejected %v, want both copies of twin", res.Catalog.Rejected)
	}
	for _, r := range res.Catalog.Rejected {
		if r.UpstreamName != "twin" || !strings.Contains(r.Reason, "duplicate") {
			t.Errorf("rejected %+v, want twin as a duplicate", r)
		}
	}
}

func TestFaultInjectionInDescription(t *testing.T) {
	res, _, err := probeFault(t, stdioFault(faultserver.Injection), probe.Options{Server: "poison"})
	if err != nil {
		t.Fatal(err)
	}
	flagged := map[string][]string{}
	for _, tl := range res.Catalog.Tools {
		for _, f := range tl.Findings {
			flagged[tl.UpstreamName] = append(flagged[tl.UpstreamName], f.Pattern)
		}
		wantFlag := tl.UpstreamName == "add"
		if got := len(tl.Flags) == 1 && tl.Flags[0] == v1alpha1.ToolFlagInjectionSuspect; got != wantFlag {
			t.Errorf("tool %s flags %v, want injectionSuspect=%v", tl.UpstreamName, tl.Flags, wantFlag)
		}
	}
	for _, p := range []string{"instruction-tag", "secret-access", "conceal-from-user"} {
		if !strings.Contains(strings.Join(flagged["add"], ","), p) {
			t.Errorf("findings of add %v lack %s", flagged["add"], p)
		}
	}
}

func TestFaultIgnoresDiscover(t *testing.T) {
	bothTransports(t, faultserver.IgnoreDiscover, func(t *testing.T, target probe.Target) {
		res, took, err := probeFault(t, target, probe.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Era != client.EraSession || res.ProtocolVersion != "2025-11-25" {
			t.Errorf("era %s %s, want the session era after the fallback", res.Era, res.ProtocolVersion)
		}
		if !strings.Contains(res.DiscoverNote, "no answer to server/discover") {
			t.Errorf("discover note %q", res.DiscoverNote)
		}
		if took < time.Second || took > 3*time.Second {
			t.Errorf("took %s: want the 1s discover sub-timeout, then a quick fallback", took)
		}
	})
}

func TestFaultSSEStreamCutMidResponseIsResumed(t *testing.T) {
	target, h := httpFault(t, faultserver.CutStream)
	res, _, err := probeFault(t, target, probe.Options{Server: "cut"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Catalog.Tools) != 1 || res.Catalog.Tools[0].Name != "mcp.cut.ok" {
		t.Errorf("tools after resumption: %+v", res.Catalog.Tools)
	}
	// ev2 was cut in half: resumption asks from the last whole event.
	if ids := h.LastEventIDs(); len(ids) != 1 || ids[0] != "ev1" {
		t.Errorf("resumption GETs carried Last-Event-ID %v, want [ev1]", ids)
	}
}

func TestFaultSSEStreamCutWithoutEventIDFails(t *testing.T) {
	target, h := httpFault(t, faultserver.CutStreamNoID)
	_, _, err := probeFault(t, target, probe.Options{})
	wantErr(t, err, "tools/list", "cannot be resumed")
	if ids := h.LastEventIDs(); len(ids) != 0 {
		t.Errorf("tried to resume without an event id: %v", ids)
	}
}

func TestStubbornServerIsKilledWithItsChildren(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
	target := stdioFault(faultserver.Stubborn, faultserver.GrandchildPIDFile+"="+pidFile)
	conn, err := stdio.Start(*target.Stdio)
	if err != nil {
		t.Fatal(err)
	}
	pgid := conn.PID()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, conn, client.Options{DiscoverTimeout: time.Second, Era: client.EraSession})
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		conn.Close()
		t.Fatalf("the stubborn server did not start its grandchild: %v", err)
	}
	grandchild, _ := strconv.Atoi(string(data))
	if !testproc.Alive(grandchild) {
		t.Fatalf("grandchild %d is not running", grandchild)
	}
	start := time.Now()
	_ = c.Close()
	took := time.Since(start)
	t.Logf("stopped a server that ignores stdin's end and SIGTERM in %s", took.Round(time.Millisecond))
	if took < 2*target.Stdio.StopGrace || took > 2*target.Stdio.StopGrace+2*time.Second {
		t.Errorf("Close took %s: want stdin-close grace + SIGTERM grace, then SIGKILL", took)
	}
	testproc.WaitGone(t, pgid, 3*time.Second)
	if testproc.Alive(grandchild) {
		t.Errorf("grandchild %d outlived Close (an orphan)", grandchild)
	}
	if exit := conn.ExitErr(); exit == nil || exit.Signal != "killed" {
		t.Errorf("exit %+v, want killed by SIGKILL", exit)
	}
}
