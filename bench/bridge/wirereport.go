package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-operator/mcp-operator/bench/internal/benchutil"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

// wireReport (-only wire) shows what the everything-server receives from
// each path, through a wire in front of it: per sequential call (one
// agent session, as the comparison's sequential phase), the connections it
// accepts, its requests by kind, their bytes and headers; and, after a
// load of sessions ends, what comes in the window the next target's
// sequential calls would be timed in (session teardown) and the CPU the
// server spends there. Then it sends the everything-server the exact
// tools/call request of the bare proxy (the agent's, relayed) and of the
// bridge, interleaved, shapeCalls each, and compares its CPU per call.
func wireReport(calls, sessions int, loadFor time.Duration, shapeCalls int) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	self, _ := os.Executable()
	var procs children
	defer procs.stop()
	upAddr := benchutil.FreeAddr()
	upPid, err := procs.startEverything(root, upAddr)
	if err != nil {
		return err
	}
	w, err := newWire(upAddr)
	if err != nil {
		return err
	}
	defer w.close()
	upURL := "http://" + w.addr() + "/mcp"
	proxyAddr, thvAddr, bridgeAddr := benchutil.FreeAddr(), benchutil.FreeAddr(), benchutil.FreeAddr()
	if _, err := procs.start(proxyAddr, nil, self, "-role=proxy", "-listen="+proxyAddr, "-upstream="+upURL); err != nil {
		return err
	}
	thvHome, err := os.MkdirTemp("", "bench-thv-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(thvHome)
	if _, err := procs.start(thvAddr, thvEnv(thvHome), filepath.Join(root, "bin", "thv"), thvArgs(upURL, thvAddr)...); err != nil {
		return fmt.Errorf("ToolHive's proxy (run make bench-bridge): %w", err)
	}
	if _, err := procs.start(bridgeAddr, nil, self, "-role=bridge", "-listen="+bridgeAddr, "-upstreams=everything="+upURL); err != nil {
		return err
	}
	paths := []struct{ via, url, tool string }{
		{"direct", upURL, "test_simple_text"},
		{"proxy", "http://" + proxyAddr + "/mcp", "test_simple_text"},
		{"thv", "http://" + thvAddr + "/mcp", "test_simple_text"},
		{"bridge", "http://" + bridgeAddr + "/mcp", "mcp.everything.test_simple_text"},
	}
	fmt.Printf("what the everything-server receives: %d sequential calls in one agent session, then %s at %d sessions, per path\n", calls, loadFor, sessions)
	samples := map[string]wireRequest{}
	for _, p := range paths {
		if err := callChecked(p.url, client.EraSession, p.tool, nil, everythingAnswer); err != nil {
			return fmt.Errorf("%s: %w", p.via, err)
		}
		w.quiet(300*time.Millisecond, 5*time.Second)
		w.snapshot()

		c, err := connect(p.url, benchToken, client.EraSession)
		if err != nil {
			return err
		}
		cpu0, runs0, err := benchutil.Sched(upPid)
		if err != nil {
			return err
		}
		for i := 0; i < calls; i++ {
			if _, err := c.CallTool(context.Background(), p.tool, nil); err != nil {
				return fmt.Errorf("%s: %w", p.via, err)
			}
		}
		cpu1, runs1, err := benchutil.Sched(upPid)
		if err != nil {
			return err
		}
		upCPU, upRuns := cpu1-cpu0, runs1-runs0
		samples[p.via], _ = w.sample("POST tools/call")
		c.Close()
		w.quiet(300*time.Millisecond, 5*time.Second)
		seq := w.snapshot()

		clients, err := openSessions(p.url, client.EraSession, sessions)
		if err != nil {
			return err
		}
		w.quiet(300*time.Millisecond, 5*time.Second)
		w.snapshot()
		if _, err := callFor(context.Background(), clients, p.tool, nil, loadFor); err != nil {
			return err
		}
		ended := time.Now()
		after, err := benchutil.ProcCPU(upPid)
		if err != nil {
			return err
		}
		closeAll(clients)
		var windows []string
		for _, to := range []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second} {
			time.Sleep(time.Until(ended.Add(to)))
			now, err := benchutil.ProcCPU(upPid)
			if err != nil {
				return err
			}
			windows = append(windows, fmt.Sprintf("%s: %s", to, (now-after).Round(10*time.Microsecond)))
			after = now
		}
		load := w.snapshot()
		printWire(p.via, calls, seq, upCPU, upRuns, load, ended, windows)
	}
	printSample("the proxy's tools/call (the agent's, relayed)", samples["proxy"])
	printSample("ToolHive's tools/call", samples["thv"])
	printSample("the bridge's tools/call", samples["bridge"])
	if shapeCalls <= 0 {
		return nil
	}
	return compareShapes(upAddr, upPid, procs.pids(), shapeCalls, []shape{
		{via: "proxy", req: samples["proxy"]}, {via: "thv", req: samples["thv"]}, {via: "bridge", req: samples["bridge"], debug: true},
		{via: "proxy", req: samples["proxy"]}, // the same twice: the spread of a non-difference
		{via: "proxy", req: samples["proxy"], pause: 200 * time.Microsecond}, {via: "proxy", req: samples["proxy"], pause: 500 * time.Microsecond},
	})
}

func printWire(via string, calls int, seq wireCounts, upCPU time.Duration, upRuns int64, load wireCounts, ended time.Time, windows []string) {
	per := func(n int) string { return strconv.FormatFloat(float64(n)/float64(calls), 'f', 3, 64) }
	fmt.Printf("\n%s, %d sequential calls (session opened, calls, session closed):\n", via, calls)
	fmt.Printf("  connections accepted %d (%.1f per 1000 calls), closed by the hop %d; bytes received per call %.0f, sent back %.0f; upstream CPU per call %s, its threads woken per call %.2f\n",
		seq.dials, 1000*float64(seq.dials)/float64(calls), seq.closes, float64(seq.sent)/float64(calls), float64(seq.back)/float64(calls), upCPU/time.Duration(calls), float64(upRuns)/float64(calls))
	fmt.Printf("  reads per call (about the TCP segments sent): from the hop %.2f, from the upstream %.2f\n", float64(seq.reads[0])/float64(calls), float64(seq.reads[1])/float64(calls))
	for _, k := range slices.Sorted(maps.Keys(seq.kinds)) {
		fmt.Printf("  %-36s %6d  (%s per call, %d bytes each)\n", k, seq.kinds[k], per(seq.kinds[k]), seq.kindBytes[k]/seq.kinds[k])
	}
	late := map[string]int{}
	var last time.Duration
	for _, r := range load.reqs {
		if r.at.After(ended) {
			late[r.kind]++
			last = max(last, r.at.Sub(ended))
		}
	}
	fmt.Printf("  load: connections accepted %d, closed by the hop %d; requests %v\n", load.dials, load.closes, load.kinds)
	fmt.Printf("  after the load's last call: requests %v, the last %s after; upstream CPU in the windows to %s\n", late, last.Round(time.Millisecond), strings.Join(windows, ", "))
}

func printSample(what string, r wireRequest) {
	fmt.Printf("\n%s: %d bytes; headers %s\n  body %s\n", what, r.bytes, strings.Join(headerNames(r.header), ", "), compactJSON(r.body))
	for _, k := range headerNames(r.header) {
		fmt.Printf("  %s: %s\n", k, strings.Join(r.header[k], ", "))
	}
}

// openSessions connects n agent sessions.
func openSessions(url string, era client.Era, n int) ([]agent, error) {
	clients := make([]agent, 0, n)
	for range n {
		c, err := connect(url, benchToken, era)
		if err != nil {
			closeAll(clients)
			return nil, err
		}
		clients = append(clients, c)
	}
	return clients, nil
}

func closeAll(clients []agent) {
	for _, c := range clients {
		if c != nil {
			c.Close()
		}
	}
}

// shape is a captured request, named by the path that sent it.
type shape struct {
	via   string
	req   wireRequest
	pause time.Duration // between an answer and the next request
	debug bool          // the session's log level set to debug, as the bridge's
}

// compareShapes sends the everything-server the captured tools/call
// requests as they were (each in a session of its own on one connection;
// only the session id and the JSON-RPC id changed), in turns of chunks
// in the main bench's order (turns.go: every child quiet before a turn,
// the server quiet again before its end reading, every other pass
// backwards), n calls each, and prints its CPU per call for each
// and the spread, over the turns, of each one's ratio to the first's. The
// same client sends all: only the request's bytes differ.
func compareShapes(addr string, pid int, all []int, n int, shapes []shape) error {
	rs := make([]*replayer, len(shapes))
	for i, s := range shapes {
		r, err := newReplayer(addr, s.req, s.debug, everythingAnswer)
		if err != nil {
			return fmt.Errorf("the %s's request: %w", s.via, err)
		}
		defer r.close()
		rs[i] = r
	}
	const chunk = 500
	cpu := make([]time.Duration, len(rs))
	runs := make([]int64, len(rs))
	perTurn := make([][]float64, len(rs)) // CPU of each turn's chunk
	turns := 0
	idx := make([]int, len(rs))
	for i := range idx {
		idx[i] = i
	}
	var quiet quietWaits
	for ; turns*chunk < n; turns++ {
		for _, i := range order(idx, turns) {
			if err := quiet.wait(all...); err != nil {
				return err
			}
			c0, r0, err := benchutil.Sched(pid)
			if err != nil {
				return err
			}
			for range chunk {
				if err := rs[i].call(); err != nil {
					return err
				}
				if p := shapes[i].pause; p > 0 {
					time.Sleep(p)
				}
			}
			if err := quiet.settle(pid); err != nil {
				return err
			}
			c1, r1, err := benchutil.Sched(pid)
			if err != nil {
				return err
			}
			cpu[i] += c1 - c0
			runs[i] += r1 - r0
			perTurn[i] = append(perTurn[i], float64(c1-c0))
		}
	}
	calls := int64(turns * chunk)
	fmt.Printf("\nthe everything-server's CPU per tools/call, the captured requests sent directly by one client, in turns of %d, %d calls each:\n", chunk, calls)
	for i, s := range shapes {
		name := s.via
		if s.pause > 0 {
			name += fmt.Sprintf(", %s pause", s.pause)
		}
		fmt.Printf("  %-22s %s per call, threads woken %.2f per call; to the %s's: %.3f, per turn quartiles %s\n",
			name, cpu[i]/time.Duration(calls), float64(runs[i])/float64(calls), shapes[0].via, float64(cpu[i])/float64(cpu[0]), quartiles(perTurn[i], perTurn[0]))
	}
	fmt.Println(quiet)
	return nil
}

// replayer sends one captured tools/call again and again in a session of
// its own over one kept-alive connection, reading each SSE answer to its
// end, and accepts an answer only if its first message is the call's
// result with the expected text (a replay answered with an error, or with
// something else first, would measure another path of the server).
type replayer struct {
	addr      string
	cli       *client.Client // holds the session
	conn      net.Conn
	br        *bufio.Reader
	head      string // request line and headers up to Content-Length
	pre, post string // the body around its id
	quoted    bool
	id        int
	answer    string // what the result's text ends with
}

var idMember = regexp.MustCompile(`"id"\s*:\s*("?)[A-Za-z0-9_-]+"?`)

func newReplayer(addr string, r wireRequest, debug bool, answer string) (*replayer, error) {
	if len(r.body) == 0 {
		return nil, fmt.Errorf("no tools/call was captured")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := connectOwn(ctx, "http://"+addr+"/mcp", "", client.EraSession)
	if err != nil {
		return nil, err
	}
	if debug {
		if _, err := cli.Call(context.Background(), "logging/setLevel", json.RawMessage(`{"level":"debug"}`)); err != nil {
			return nil, err
		}
	}
	session := cli.Conn().(interface{ SessionID() string }).SessionID()
	var h strings.Builder
	h.WriteString("POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\n")
	for _, k := range headerNames(r.header) {
		switch k {
		case "Content-Length", "Transfer-Encoding", "Mcp-Session-Id": // the body is sent with a Content-Length of its own
			continue
		}
		for _, v := range r.header[k] {
			h.WriteString(k + ": " + v + "\r\n")
		}
	}
	h.WriteString("Mcp-Session-Id: " + session + "\r\n")
	loc := idMember.FindSubmatchIndex(r.body)
	if loc == nil {
		return nil, fmt.Errorf("no id in %s", r.body)
	}
	rp := &replayer{addr: addr, cli: cli, head: h.String(), pre: string(r.body[:loc[0]]), post: string(r.body[loc[1]:]), quoted: loc[3] > loc[2], id: 1000, answer: answer}
	return rp, rp.dial()
}

func (r *replayer) dial() error {
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		return err
	}
	r.conn, r.br = c, bufio.NewReader(c)
	return nil
}

func (r *replayer) call() error {
	r.id++
	id := strconv.Itoa(r.id)
	if r.quoted {
		id = strconv.Quote(id)
	}
	body := r.pre + `"id":` + id + r.post
	req := r.head + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	if _, err := io.WriteString(r.conn, req); err != nil {
		return err
	}
	resp, err := http.ReadResponse(r.br, nil)
	if err != nil {
		return err
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("replayed tools/call: status %d, %v", resp.StatusCode, err)
	}
	result, err := firstResult(resp.Header.Get("Content-Type"), answer)
	if err != nil {
		return fmt.Errorf("replayed tools/call: %w", err)
	}
	if err := checkAnswer("the replayed tools/call", result, r.answer); err != nil {
		return err
	}
	if resp.Close {
		r.conn.Close()
		return r.dial()
	}
	return nil
}

// firstResult is the result of the first JSON-RPC message of an answer,
// a JSON body or an SSE stream (its first event's data lines).
func firstResult(contentType string, body []byte) (json.RawMessage, error) {
	msg := body
	if strings.HasPrefix(contentType, "text/event-stream") {
		var data []string
		for _, line := range strings.Split(string(body), "\n") {
			line = strings.TrimSuffix(line, "\r")
			if d, ok := strings.CutPrefix(line, "data:"); ok {
				data = append(data, strings.TrimPrefix(d, " "))
			} else if line == "" && len(data) > 0 {
				break // the first event ended
			}
		}
		msg = []byte(strings.Join(data, "\n"))
	}
	var m struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(msg, &m); err != nil || len(m.Result) == 0 {
		return nil, fmt.Errorf("its first message %q is not a result", msg)
	}
	return m.Result, nil
}

func (r *replayer) close() {
	r.conn.Close()
	r.cli.Close()
}
