package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	mcpclient "github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
)

func TestChainProblem(t *testing.T) {
	ev := func(seq int64, typ string) auditEvent { return auditEvent{Seq: seq, Type: typ, ToolCallID: "c"} }
	for _, tc := range []struct {
		name  string
		chain []auditEvent
		want  string
	}{
		{"whole", []auditEvent{ev(1, "permission.requested"), ev(2, "permission.resolved"), ev(3, "mcp.call.started"), ev(4, "tool.started"), ev(5, "mcp.call.completed"), ev(6, "tool.completed")}, ""},
		{"denied read", []auditEvent{ev(1, "permission.requested"), {Seq: 2, Type: "permission.resolved", Decision: "deny", Resource: "mcp://x/y"}}, ""},
		{"no end", []auditEvent{ev(1, "permission.requested"), ev(2, "permission.resolved"), ev(3, "mcp.call.started")}, "no end (last: mcp.call.started)"},
		{"after end", []auditEvent{ev(1, "permission.requested"), ev(2, "tool.failed"), ev(3, "mcp.call.completed")}, "mcp.call.completed after the end"},
		{"two ends", []auditEvent{ev(1, "permission.requested"), ev(2, "tool.failed"), ev(3, "tool.completed")}, "two ends"},
		{"subscription held", []auditEvent{ev(1, "permission.requested"), ev(2, "permission.resolved"), {Seq: 3, Type: "mcp.resource.requested", Method: "resources/subscribe"}}, ""},
		{"subscription refused", []auditEvent{ev(1, "permission.requested"), ev(2, "permission.resolved"), {Seq: 3, Type: "mcp.resource.requested", Method: "resources/subscribe"}, ev(4, "mcp.call.failed"), ev(5, "tool.failed")}, ""},
		{"subscription held, then a call completed", []auditEvent{ev(1, "permission.requested"), {Seq: 2, Type: "mcp.resource.requested", Method: "resources/subscribe"}, ev(3, "mcp.call.completed"), ev(4, "tool.failed")}, "two ends"},
		{"subscription held, then failed without the call's record", []auditEvent{ev(1, "permission.requested"), {Seq: 2, Type: "mcp.resource.requested", Method: "resources/subscribe"}, ev(3, "tool.failed")}, "two ends"},
		{"subscription held, then a call started and failed", []auditEvent{ev(1, "permission.requested"), {Seq: 2, Type: "mcp.resource.requested", Method: "resources/subscribe"}, ev(3, "mcp.call.started"), ev(4, "mcp.call.failed"), ev(5, "tool.failed")}, "two ends"},
		{"subscription refused twice", []auditEvent{ev(1, "permission.requested"), {Seq: 2, Type: "mcp.resource.requested", Method: "resources/subscribe"}, ev(3, "tool.failed"), ev(4, "tool.failed")}, "two ends"},
		{"out of order", []auditEvent{ev(2, "permission.requested"), ev(1, "tool.completed")}, "out of order"},
		{"no start", []auditEvent{ev(1, "mcp.call.started"), ev(2, "tool.completed")}, "begins with mcp.call.started"},
	} {
		if got := chainProblem(tc.chain); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The recorder, called by the project's MCP client: each call counted once
// per id whatever the mode, each fault seen by the client as a failure, and
// sessions counted as opened and closed.
func TestRecorderCountsEveryExecution(t *testing.T) {
	rec := newRecorder()
	srv := httptest.NewServer(rec)
	defer srv.Close()
	ctx := context.Background()
	conn, err := streamhttp.New(streamhttp.Options{URL: srv.URL + "/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := mcpclient.Connect(ctx, conn, mcpclient.Options{ClientName: "t", ClientVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.CallTool(ctx, "record", json.RawMessage(`{"id":"a"}`))
	if err != nil || !strings.Contains(string(res), "ran a") {
		t.Fatalf("a healthy call: %s, %v", res, err)
	}
	for i, m := range []upstreamMode{modeGarbage, modeCut, modeHang} {
		rec.setMode(m)
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err := c.CallTool(cctx, "record", json.RawMessage(`{"id":"`+string(rune('b'+i))+`"}`))
		cancel()
		if err == nil {
			t.Errorf("%s: answered as if healthy", m)
		}
	}
	rec.setMode(modeHealthy)
	if _, err := c.CallTool(ctx, "large", json.RawMessage(`{"id":"a","size":4096}`)); err != nil {
		t.Fatal(err)
	}
	runs := rec.executions()
	if runs["a"] != 2 || runs["b"] != 1 || runs["c"] != 1 || runs["d"] != 1 {
		t.Errorf("executions %v, want a twice, b, c and d once", runs)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if opened, closed, live := rec.sessionCounts(); opened != 1 || closed != 1 || live != 0 {
		t.Errorf("sessions: %d opened, %d closed, %d live; want 1, 1, 0", opened, closed, live)
	}
}

func TestSlope(t *testing.T) {
	t0 := time.Now()
	var flat, growing []sample
	for i := range 10 {
		at := t0.Add(time.Duration(i) * time.Minute)
		flat = append(flat, sample{at: at, rss: 100})
		growing = append(growing, sample{at: at, rss: int64(100 + i)})
	}
	if s := slope(flat, func(s sample) float64 { return float64(s.rss) }); s != 0 {
		t.Errorf("flat: %.2f %%/10min", s)
	}
	// 1 per minute on a mean of 104.5: 10/104.5 = 9.57 % per 10 minutes.
	if s := slope(growing, func(s sample) float64 { return float64(s.rss) }); s < 9.5 || s > 9.6 {
		t.Errorf("growing: %.2f %%/10min, want 9.57", s)
	}
}

// A process that lived only a few minutes past its warm-up is listed with
// its slope but not taken as the trend; a reading without goroutines is
// no reading.
func TestSlopesCountOnlyLongWindows(t *testing.T) {
	t0 := time.Now()
	sm := &sampler{byProc: map[string][]sample{}}
	for i := range 15 {
		at := t0.Add(time.Duration(i) * time.Minute)
		goroutines := 100.0
		if i%3 == 0 {
			goroutines = 0 // /metrics not reached
		}
		sm.byProc["bridge/1"] = append(sm.byProc["bridge/1"], sample{at: at, rss: 100, fds: 10, goroutines: goroutines})
		if i < 6 { // deleted 4 minutes after its warm-up, still filling its heap
			sm.byProc["bridge/2"] = append(sm.byProc["bridge/2"], sample{at: at, rss: int64(100 + 10*i), fds: 10, goroutines: 100})
		}
	}
	largest, procs := sm.slopes("bridge", 2*time.Minute)
	if len(procs) != 2 {
		t.Fatalf("%d processes listed, want 2", len(procs))
	}
	if procs[1].rss <= 0 {
		t.Errorf("the short-lived process's own slope is %.2f, want its growth", procs[1].rss)
	}
	if largest.rss != 0 || largest.goroutines != 0 {
		t.Errorf("largest slope rss %.2f goroutines %.2f, want 0: the long-lived process is flat", largest.rss, largest.goroutines)
	}
}

// A request whose connection could not be made was never written: not
// sent. One cut on a connection it was written to may have been read.
func TestNotDelivered(t *testing.T) {
	dial := fmt.Errorf("while sending tools/call: %w", &url.Error{Op: "Post", URL: "http://10.244.0.5:8090/mcp",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}})
	if !notDelivered(dial) {
		t.Errorf("%v: not counted as not sent", dial)
	}
	if !notDelivered(errors.New(`while sending prompts/get: Post "http://10.244.0.10:8090/mcp": dial tcp 10.244.0.10:8090: i/o timeout`)) {
		t.Error("a dial timeout in text: not counted as not sent")
	}
	if notDelivered(errors.New(`while sending tools/call: Post "http://10.96.0.81:80/mcp": EOF`)) {
		t.Error("EOF on a written request counted as not sent")
	}
}
