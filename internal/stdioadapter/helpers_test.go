package stdioadapter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// The test binary doubles as a scripted stdio server for the faults real
// servers cannot produce on demand: a result with unusual JSON, a server
// that ignores server/discover, one that ignores SIGTERM.
const fakeChildEnv = "STDIOADAPTER_FAKE_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeChildEnv); mode != "" {
		os.Exit(fakeChild(mode))
	}
	code := m.Run()
	for _, f := range cleanups {
		f()
	}
	os.Exit(code)
}

// cleanups run after all tests (for what tests share, such as the built
// manager binary).
var cleanups []func()

// vendorResult is a tools/call result as an unusual server might write it:
// members in odd order, vendor keys, numbers no Go or JS type round-trips
// (a 30-digit integer, 1.50, -0, 1E+2), escapes, inner whitespace. The
// adapter must deliver it byte for byte; %s is the id.
const vendorResult = `{"result":{"x-vendor.example/trace":{"big":123456789012345678901234567890,"n":1.50,"neg0":-0,"e":1E+2,"arr":[ 1 , 2 ],"empty":{}},"content":[{"type":"text","text":"caf\u00e9 \ud83d\ude00 <b>&amp;</b> \"q\""}],"structuredContent":{"z":1,"a":2},"isError":false},"id":%s,"jsonrpc":"2.0"}`

// fakeChild speaks just enough MCP for the tests that need it.
func fakeChild(mode string) int {
	if mode == "stubborn" {
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || m.ID == nil {
			continue
		}
		switch m.Method {
		case "initialize":
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"0"}}}`+"\n", m.ID)
		case "tools/call":
			fmt.Printf(vendorResult+"\n", m.ID)
		case "server/discover":
			// a server from before server/discover that ignores it
		default:
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", m.ID)
		}
	}
	return 0
}

// fakeChildCommand runs this test binary as a scripted stdio server.
func fakeChildCommand(mode string) []string {
	return []string{"env", fakeChildEnv + "=" + mode, os.Args[0]}
}

func peer(t testing.TB, name string) string {
	t.Helper()
	p, err := testpeers.NPMBin(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// lockedBuffer collects the adapter's stderr (the server's and its own).
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// running is an adapter run in this process.
type running struct {
	url     string
	base    string
	stderr  *lockedBuffer
	signals chan os.Signal
	code    chan int
	exited  *int
}

// startAdapter runs the adapter in-process on a loopback port and waits
// until it is healthy. Cleanup kills whatever is left.
func startAdapter(t testing.TB, command []string, tweak func(*Config)) *running {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	r := &running{
		url: base + "/mcp", base: base,
		stderr:  &lockedBuffer{},
		signals: make(chan os.Signal, 4),
		code:    make(chan int, 1),
	}
	cfg := Config{Command: command, Listener: ln, Stderr: r.stderr, Signals: r.signals, GracePeriod: 3 * time.Second}
	if tweak != nil {
		tweak(&cfg)
	}
	go func() { r.code <- Run(context.Background(), cfg) }()
	t.Cleanup(func() {
		if r.exited == nil {
			r.signals <- syscall.SIGKILL
			r.wait(t, 10*time.Second)
		}
		if t.Failed() {
			t.Logf("adapter stderr:\n%s", r.stderr)
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r
			}
		}
		select {
		case code := <-r.code:
			r.exited = &code
			t.Fatalf("the adapter exited with %d before it was healthy; stderr:\n%s", code, r.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the adapter was not healthy within 15s; stderr:\n%s", r.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wait returns the adapter's exit code.
func (r *running) wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	if r.exited != nil {
		return *r.exited
	}
	select {
	case code := <-r.code:
		r.exited = &code
		return code
	case <-time.After(timeout):
		t.Fatalf("the adapter did not exit within %s; stderr:\n%s", timeout, r.stderr)
		return 0
	}
}

var pidInLog = regexp.MustCompile(`msg=serving .* pid=(\d+)`)

// childPID reads the server's pid from the adapter's log.
func childPID(t testing.TB, log string) int {
	t.Helper()
	m := pidInLog.FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no server pid in the log:\n%s", log)
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

// groupMembers lists the live processes of process group pgid, from /proc.
func groupMembers(pgid int) []string {
	var out []string
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) {
			out = append(out, strings.TrimSpace(s[:strings.LastIndexByte(s, ')')+1])+" state="+f[0])
		}
	}
	return out
}

// waitGroupGone fails unless process group pgid is empty (no process, no
// zombie) within timeout.
func waitGroupGone(t *testing.T, pgid int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		left := groupMembers(pgid)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the server's group are left: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tsClient runs testdata/client.mjs (the official TypeScript SDK client)
// against url and returns what it printed.
func tsClient(t *testing.T, url, scenario, arg string) map[string]any {
	t.Helper()
	out, err := tsClientRun(url, scenario, arg)
	if err != nil {
		t.Fatalf("TypeScript client %s: %v", scenario, err)
	}
	return out
}

func tsClientRun(url, scenario, arg string) (map[string]any, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node is needed for the TypeScript client: %w", err)
	}
	sdk, err := testpeers.NPMPackageDir("@modelcontextprotocol/sdk")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "testdata/client.mjs", url, scenario, arg)
	cmd.Env = append(os.Environ(), "MCP_SDK_DIR="+sdk)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, runErr := cmd.Output()
	var out map[string]any
	if err := json.Unmarshal(stdout, &out); err != nil {
		return nil, fmt.Errorf("output %q is not JSON (%v); stderr: %s", stdout, runErr, stderr.String())
	}
	if runErr != nil || out["error"] != nil {
		return nil, fmt.Errorf("failed (%v): %v; stderr: %s", runErr, out, stderr.String())
	}
	return out, nil
}

// rawClient is a hand-driven Streamable HTTP client, for what a library
// client would hide: exact bytes, chosen ids, malformed input.
type rawClient struct {
	url    string
	sid    string
	proto  string // Mcp-Protocol-Version to send, if any
	accept string // Accept to send instead of JSON and SSE
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

// post sends body and returns the response with its whole body read (an SSE
// response ends once every request in it is answered).
func (c *rawClient) post(t testing.TB, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.accept != "" {
		req.Header.Set("Accept", c.accept)
	}
	if c.sid != "" {
		req.Header.Set(headerSessionID, c.sid)
	}
	if c.proto != "" {
		req.Header.Set(headerProtocolVersion, c.proto)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", body, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the response to %s: %v", body, err)
	}
	return resp, data
}

// initialize opens a session.
func (c *rawClient) initialize(t testing.TB) []byte {
	t.Helper()
	resp, body := c.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %s %s", resp.Status, body)
	}
	c.sid = resp.Header.Get(headerSessionID)
	if c.sid == "" {
		t.Fatal("initialize returned no Mcp-Session-Id")
	}
	events := sseData(body)
	resp, body = c.post(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %s %s", resp.Status, body)
	}
	return events[len(events)-1]
}

// sseData returns the data of each SSE event in body, or body itself when
// it is plain JSON.
func sseData(body []byte) [][]byte {
	if len(body) > 0 && (body[0] == '{' || body[0] == '[') {
		return [][]byte{body}
	}
	var out [][]byte
	for _, line := range bytes.Split(body, []byte("\n")) {
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			out = append(out, d)
		}
	}
	return out
}

// jsonField decodes one member of a JSON object (for assertions).
func jsonField(t *testing.T, msg []byte, path ...string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(msg, &v); err != nil {
		t.Fatalf("%s is not JSON: %v", msg, err)
	}
	for _, p := range path {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = obj[p]
	}
	return v
}
