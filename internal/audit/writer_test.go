package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/canonjson"
	"github.com/mcp-operator/mcp-operator/internal/mcp/injection"
	"github.com/mcp-operator/mcp-operator/internal/redact"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const (
	ghToken = "ghp_A1b2C3A1b2C3A1b2C3A1b2C3A1b2C3A1b2C3"
	session = "3f1c9a7e-5b2d-4e8a-9c6f-0d1e2f3a4b5c"
	subject = "system:serviceaccount:agents:researcher"
)

// fixedClock starts at a fixed instant and moves 1.5 ms a call.
func fixedClock() func() time.Time {
	t := time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(1500 * time.Microsecond)
		return t
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func newTestWriter(sink *bytes.Buffer, mode ArgsMode) *Writer {
	return New(Options{Sink: lockedWriter{w: sink}, Clock: fixedClock(), ArgsMode: mode, Redactor: redact.New("db-password-9f8e7d")})
}

// lockedWriter lets a test read the buffer the Writer's goroutine writes.
type lockedWriter struct{ w *bytes.Buffer }

var bufMu sync.Mutex

func (l lockedWriter) Write(p []byte) (int, error) {
	bufMu.Lock()
	defer bufMu.Unlock()
	return l.w.Write(p)
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update once to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("stream differs from %s:\n got:\n%s\nwant:\n%s", path, got, want)
	}
}

func writeAll(t *testing.T, w *Writer, events ...Payload) {
	t.Helper()
	for i, e := range events {
		seq, err := w.Write(session, subject, e)
		if err != nil {
			t.Fatal(err)
		}
		if seq != uint64(i+1) {
			t.Fatalf("event %d got seq %d", i, seq)
		}
	}
	if err := w.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

var callArgs = json.RawMessage(`{"message": "hello", "token": "` + ghToken + `", "password": "db-password-9f8e7d"}`)

// The seed's chain for one successful tool call, byte for byte.
func TestGoldenSuccessChain(t *testing.T) {
	var out bytes.Buffer
	w := newTestWriter(&out, ArgsPreview)
	writeAll(t, w,
		PermissionRequested{Tool: "mcp.everything.echo", Args: callArgs, RiskAtDecision: "network", SourcedFrom: "mcp", ToolCallID: "call-1"},
		PermissionResolved{Decision: "allow", Actor: "policy", SourcedFrom: "policy:agents/researchers#rules[0]", ToolCallID: "call-1", Tool: "mcp.everything.echo"},
		MCPCallStarted{Server: "everything", ToolCallID: "call-1", Method: "tools/call", Args: callArgs},
		ToolStarted{Tool: "mcp.everything.echo", ToolCallID: "call-1", Server: "everything"},
		MCPCallCompleted{Server: "everything", ToolCallID: "call-1", DurationMs: Ms(1234 * time.Microsecond)},
		ToolCompleted{ResultPreview: "Echo: hello <b>&</b> " + ghToken, ResultSize: 81, ToolCallID: "call-1", Tool: "mcp.everything.echo",
			Redactions: map[string]int{"github-token": 1}},
	)
	checkGolden(t, "success-chain.jsonl", out.Bytes())
	if bytes.Contains(out.Bytes(), []byte(ghToken)) || bytes.Contains(out.Bytes(), []byte("db-password-9f8e7d")) {
		t.Fatal("a secret reached the stream")
	}
}

// The failure chain: the upstream answers a JSON-RPC error.
func TestGoldenFailureChain(t *testing.T) {
	var out bytes.Buffer
	w := newTestWriter(&out, ArgsFull)
	writeAll(t, w,
		PermissionRequested{Tool: "mcp.everything.get-sum", Args: json.RawMessage(`{"a":1,"b":"x"}`), RiskAtDecision: "read", SourcedFrom: "server:everything", ToolCallID: "call-2"},
		PermissionResolved{Decision: "allow", Actor: "user", SourcedFrom: "approval:once", ToolCallID: "call-2", Tool: "mcp.everything.get-sum"},
		MCPCallStarted{Server: "everything", ToolCallID: "call-2", Method: "tools/call", Args: json.RawMessage(`{"a":1,"b":"x"}`)},
		ToolStarted{Tool: "mcp.everything.get-sum", ToolCallID: "call-2", Server: "everything"},
		MCPCallFailed{Server: "everything", ToolCallID: "call-2", DurationMs: Ms(812 * time.Microsecond), Error: "MCP error -32602: Invalid arguments: b: Expected number, received string", Code: -32602},
		ToolFailed{Reason: "upstream_error", ToolCallID: "call-2", Tool: "mcp.everything.get-sum", Message: "Invalid arguments: b: Expected number, received string"},
	)
	checkGolden(t, "failure-chain.jsonl", out.Bytes())
}

// A traced request's events carry its trace and span ids after the subject;
// an event written without them (Write) has none.
func TestGoldenTracedChain(t *testing.T) {
	var out bytes.Buffer
	w := newTestWriter(&out, ArgsNone)
	tr := Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7"}
	for _, p := range []Payload{
		PermissionRequested{Tool: "mcp.everything.echo", Args: callArgs, RiskAtDecision: "read", SourcedFrom: "mcp", ToolCallID: "call-3"},
		PermissionResolved{Decision: "deny", Actor: "policy", SourcedFrom: "default", ToolCallID: "call-3", Tool: "mcp.everything.echo", Reason: "no rule allows it"},
	} {
		if _, err := w.WriteTraced(session, subject, tr, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Write("", "", ServerCrashed{Server: "everything", Reason: "OOMKilled", Crashes: 1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "traced-chain.jsonl", out.Bytes())
}

// Every event type, with the field names docs/audit.md lists: each event's
// defined payload fields first, in their order.
func TestEveryEventsFields(t *testing.T) {
	finding := []injection.Finding{{Pattern: "model-directive", Where: "content[0].text", Excerpt: `"you are now"`}}
	cases := []struct {
		p    Payload
		keys string
	}{
		{PermissionRequested{Tool: "t", Args: json.RawMessage(`{}`)}, "tool args riskAtDecision sourcedFrom toolCallId"},
		{PermissionRequested{Resource: "r"}, "riskAtDecision sourcedFrom toolCallId resource"},
		{PermissionRequested{Prompt: "p", Args: json.RawMessage(`{}`)}, "args riskAtDecision sourcedFrom toolCallId prompt"},
		{PermissionResolved{Tool: "t", Reason: "r"}, "decision actor sourcedFrom toolCallId tool reason"},
		{PermissionResolved{Resource: "r"}, "decision actor sourcedFrom toolCallId resource"},
		{PermissionResolved{Prompt: "p", Reason: "r"}, "decision actor sourcedFrom toolCallId reason prompt"},
		{MCPCallStarted{Args: json.RawMessage(`{}`)}, "server toolCallId method args"},
		{MCPCallCompleted{}, "server toolCallId durationMs"},
		{MCPCallFailed{Code: 1}, "server toolCallId durationMs error code"},
		{ToolStarted{}, "tool toolCallId server"},
		{ToolCompleted{IsError: true, Redactions: map[string]int{"jwt": 1}, Injection: finding, Blocked: true, Artifact: "artifact://x"},
			"resultPreview resultSize toolCallId tool isError redactions injection blocked artifact"},
		{ToolFailed{Tool: "t", Message: "m"}, "reason toolCallId tool message"},
		{ToolFailed{Resource: "r", Message: "m"}, "reason toolCallId resource message"},
		{ToolFailed{Prompt: "p"}, "reason toolCallId prompt"},
		{ToolAmbiguousCall{Candidates: []string{"mcp.a.x", "mcp.b.x"}}, "tool candidates"},
		{ResourceRequested{ToolCallID: "c"}, "server uri toolCallId"},
		{ResourceFetched{ToolCallID: "c"}, "server uri sizeBytes contentHash toolCallId"},
		{PromptInvoked{Args: json.RawMessage(`{}`), ToolCallID: "c"}, "server prompt args toolCallId"},
		{PromptExpanded{Injection: finding, Blocked: true, ToolCallID: "c"}, "server prompt messages sizeBytes injection blocked toolCallId"},
		{ServerCrashed{Namespace: "n"}, "server namespace reason crashes"},
		{ServerRestarting{Namespace: "n"}, "server namespace attempt backoffMs"},
		{ServerPermanentlyFailed{Namespace: "n"}, "server namespace restarts lastExitReason"},
		{ServerShutdown{Namespace: "n"}, "server namespace reason"},
		{ServerRequest{Reason: "r", Injection: finding}, "server toolCallId method outcome reason injection"},
		{Dropped{}, "count"},
	}
	var out bytes.Buffer
	w := New(Options{Sink: lockedWriter{&out}, Clock: fixedClock(), ArgsMode: ArgsFull})
	for _, tc := range cases {
		if _, err := w.Write("s", "u", tc.p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("%d lines for %d events", len(lines), len(cases))
	}
	for i, tc := range cases {
		keys, typ := topKeys(t, lines[i])
		if want := "seq time type session subject " + tc.keys; keys != want {
			t.Errorf("%s: keys\n got %s\nwant %s", tc.p.EventType(), keys, want)
		}
		if typ != tc.p.EventType() {
			t.Errorf("type %q, want %q", typ, tc.p.EventType())
		}
	}
}

// topKeys lists an event's keys in order, and its type.
func topKeys(t *testing.T, line string) (string, string) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	typ := ""
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		if k == "type" {
			_ = json.Unmarshal(v, &typ)
		}
	}
	return strings.Join(keys, " "), typ
}

func TestArgsModes(t *testing.T) {
	// A token right where a preview is cut: redaction comes first, so no part
	// of it shows.
	big := json.RawMessage(`{"pad":"` + strings.Repeat("x", 240) + `","token":"` + ghToken + `","more":"` + strings.Repeat("y", 500) + `"}`)
	redactedLen := len(big) - len(ghToken) + len("[REDACTED:github-token]")
	for _, tc := range []struct {
		mode ArgsMode
		want func(string) bool
	}{
		{ArgsNone, func(l string) bool { return !strings.Contains(l, `"args"`) && !strings.Contains(l, "argumentsSha256") }},
		{ArgsFull, func(l string) bool {
			return strings.Contains(l, `"args":{"pad":"xxx`) && strings.Contains(l, `"token":"[REDACTED:github-token]","more":"yyy`)
		}},
		{ArgsPreview, func(l string) bool {
			var ev struct {
				Args            string
				ArgumentsSha256 string
			}
			// The structure, not a prefix: padding cannot push the other
			// arguments out of sight; each member has
			// its share, and long strings show both ends. The digest is of
			// the exact arguments, in the form a ToolApproval binds.
			want := `{"pad":"` + strings.Repeat("x", 41) + `…` + strings.Repeat("x", 41) + `"(240 bytes),"token":"[REDACTED:github-token]","more":"` +
				strings.Repeat("y", 40) + `…` + strings.Repeat("y", 41) + `"(500 bytes)} (` + itoa(uint64(redactedLen)) + ` bytes)`
			digest, err := canonjson.ArgumentsDigest(big)
			return err == nil && json.Unmarshal([]byte(l), &ev) == nil && ev.Args == want && ev.ArgumentsSha256 == digest
		}},
	} {
		var out bytes.Buffer
		w := New(Options{Sink: lockedWriter{&out}, Clock: fixedClock(), ArgsMode: tc.mode})
		if _, err := w.Write(session, subject, MCPCallStarted{Server: "s", ToolCallID: "c", Method: "tools/call", Args: big}); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(ctx(t)); err != nil {
			t.Fatal(err)
		}
		line := out.String()
		if !tc.want(line) || strings.Contains(line, "ghp_") {
			t.Errorf("mode %d: %s", tc.mode, line)
		}
	}
	for _, s := range []string{"full", "preview", "none", ""} {
		if _, err := ParseArgsMode(s); err != nil {
			t.Error(err)
		}
	}
	if _, err := ParseArgsMode("all"); err == nil {
		t.Error("ParseArgsMode(all): no error")
	}
}

// The arguments' digest is the one a ToolApproval of the request binds
// (canonical JSON: their spelling does not change it), and an event that
// carries it is not hashed again.
func TestArgumentsDigest(t *testing.T) {
	digests := func(evs ...Payload) []string {
		var out bytes.Buffer
		w := New(Options{Sink: lockedWriter{&out}, Clock: fixedClock()})
		for _, ev := range evs {
			if _, err := w.Write(session, subject, ev); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(ctx(t)); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var ev struct{ ArgumentsSha256 string }
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatal(err)
			}
			got = append(got, ev.ArgumentsSha256)
		}
		return got
	}
	want, _ := canonjson.ArgumentsDigest([]byte(`{"a":1,"b":"x"}`))
	got := digests(
		PermissionRequested{Tool: "mcp.s.t", Args: json.RawMessage(`{"a":1,"b":"x"}`)},
		MCPCallStarted{Server: "s", Method: "tools/call", Args: json.RawMessage("{ \"b\": \"x\",\n \"a\": 1 }")},
		PromptInvoked{Server: "s", Prompt: "p", Args: json.RawMessage(`{"b":"x","a":1}`)},
		MCPCallStarted{Server: "s", Method: "tools/call", Args: json.RawMessage(`{"a":1,"b":"x"}`), ArgsDigest: "sha256:given"},
	)
	if !slices.Equal(got, []string{want, want, want, "sha256:given"}) {
		t.Errorf("argumentsSha256 of one set of arguments: %q; want %s three times, then the one given", got, want)
	}
}

// WritesArgsDigest tells a caller whether to hash arguments for an event:
// it says yes exactly when the Writer shows argumentsSha256 for them.
func TestWritesArgsDigestMatchesWhatIsWritten(t *testing.T) {
	for _, mode := range []ArgsMode{ArgsPreview, ArgsFull, ArgsNone} {
		for _, args := range []json.RawMessage{nil, json.RawMessage(`{"a":1}`)} {
			var out bytes.Buffer
			w := New(Options{Sink: lockedWriter{&out}, Clock: fixedClock(), ArgsMode: mode})
			says := w.WritesArgsDigest(args)
			if _, err := w.Write(session, subject, MCPCallStarted{Server: "s", Method: "tools/call", Args: args}); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(ctx(t)); err != nil {
				t.Fatal(err)
			}
			written := strings.Contains(out.String(), `"argumentsSha256"`)
			if says != written {
				t.Errorf("mode %d, arguments %q: WritesArgsDigest says %v, the event has argumentsSha256: %v", mode, args, says, written)
			}
		}
	}
}

// Writers in many goroutines: the stream's seqs are 1..N in line order, and
// each Write's seq is the line of its event.
func TestConcurrentWritesAreSequenced(t *testing.T) {
	var out bytes.Buffer
	w := New(Options{Sink: lockedWriter{&out}, BufferBytes: 8 << 10, BlockTimeout: 5 * time.Second})
	const goroutines, each = 8, 500
	got := make([][]uint64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				seq, err := w.Write("session-"+string(rune('a'+g)), subject, ToolStarted{Tool: "t", ToolCallID: strings.Repeat("i", i%7)})
				if err != nil {
					t.Error(err)
					return
				}
				got[g] = append(got[g], seq)
			}
		})
	}
	wg.Wait()
	if err := w.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	sessionOf := map[uint64]string{}
	sc := bufio.NewScanner(&out)
	var last uint64
	for sc.Scan() {
		var ev struct {
			Seq     uint64
			Session string
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Seq != last+1 {
			t.Fatalf("seq %d after %d", ev.Seq, last)
		}
		last = ev.Seq
		sessionOf[ev.Seq] = ev.Session
	}
	if last != goroutines*each {
		t.Fatalf("%d events in the stream, want %d", last, goroutines*each)
	}
	for g, seqs := range got {
		if !slices.IsSorted(seqs) {
			t.Fatalf("goroutine %d got seqs out of order", g)
		}
		for _, s := range seqs {
			if sessionOf[s] != "session-"+string(rune('a'+g)) {
				t.Fatalf("seq %d is %s's event, not goroutine %d's", s, sessionOf[s], g)
			}
		}
	}
	if st := w.Stats(); st.Accepted != goroutines*each || st.Written != goroutines*each || st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A sink nobody reads (a pipe whose reader is stuck, as stdout is when the
// log collector stops): the queue fills, events are refused with
// ErrDropped and counted, and when the reader resumes an audit.dropped
// event with the count enters the stream before the next event.
func TestFullQueueDropsLoudly(t *testing.T) {
	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var logged []string
	var logMu sync.Mutex
	w := New(Options{Sink: pw, BufferBytes: 4 << 10, BlockTimeout: 20 * time.Millisecond, Log: func(msg string, _ ...any) {
		logMu.Lock()
		logged = append(logged, msg)
		logMu.Unlock()
	}})
	ev := ToolStarted{Tool: "mcp.s.t", ToolCallID: strings.Repeat("x", 200), Server: "s"}
	var dropped uint64
	for i := 0; i < 100000 && dropped < 5; i++ {
		if _, err := w.Write(session, subject, ev); errors.Is(err, ErrDropped) {
			dropped++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if dropped < 5 {
		t.Fatal("the queue never filled")
	}
	if st := w.Stats(); st.Dropped != dropped {
		t.Fatalf("stats say %d dropped, Write said %d", st.Dropped, dropped)
	}
	// The reader resumes.
	var stream bytes.Buffer
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		_, _ = stream.ReadFrom(r)
	}()
	deadline := time.Now().Add(5 * time.Second)
	var lastSeq uint64
	for {
		seq, err := w.Write(session, subject, ToolStarted{Tool: "mcp.s.after", ToolCallID: "last", Server: "s"})
		if err == nil {
			lastSeq = seq
			break
		}
		if !errors.Is(err, ErrDropped) || time.Now().After(deadline) {
			t.Fatalf("the writer did not recover: %v", err)
		}
		dropped++
		time.Sleep(5 * time.Millisecond)
	}
	if err := w.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	<-readDone
	lines := strings.Split(strings.TrimSuffix(stream.String(), "\n"), "\n")
	var reported uint64
	var prev uint64
	for i, l := range lines {
		var e struct {
			Seq   uint64
			Type  string
			Count uint64
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if e.Seq != prev+1 {
			t.Fatalf("seq %d after %d", e.Seq, prev)
		}
		prev = e.Seq
		if e.Type == "audit.dropped" {
			reported += e.Count
		}
	}
	if reported != dropped || w.Stats().Dropped != dropped {
		t.Fatalf("the stream reports %d dropped, stats %d, Write refused %d", reported, w.Stats().Dropped, dropped)
	}
	if !strings.Contains(lines[len(lines)-2], `"type":"audit.dropped"`) || !strings.Contains(lines[len(lines)-1], `"seq":`+itoa(lastSeq)) {
		t.Fatalf("the audit.dropped event must come just before the next event:\n%s\n%s", lines[len(lines)-2], lines[len(lines)-1])
	}
	logMu.Lock()
	defer logMu.Unlock()
	if !slices.Contains(logged, "audit queue full: dropping events until the sink catches up") || !slices.Contains(logged, "audit sink caught up") {
		t.Fatalf("logged %q", logged)
	}
}

func itoa(n uint64) string { b, _ := json.Marshal(n); return string(b) }

// A sink that fails (a pipe whose reader is gone): the failure is counted
// and logged.
func TestSinkErrorsAreCounted(t *testing.T) {
	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	var logged int
	var mu sync.Mutex
	w := New(Options{Sink: pw, Log: func(string, ...any) { mu.Lock(); logged++; mu.Unlock() }})
	if _, err := w.Write(session, subject, ToolStarted{}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.SinkErrors != 1 || st.LastSinkError == nil || st.Written != 0 {
		t.Fatalf("stats %+v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if logged != 1 {
		t.Fatalf("logged %d times", logged)
	}
	_ = w.Close(ctx(t))
}

func TestFileSinkFlushAndClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	w := New(Options{Sink: f, Clock: fixedClock()})
	for range 3 {
		if _, err := w.Write(session, subject, ServerShutdown{Server: "fs", Reason: "suspend"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if bytes.Count(data, []byte("\n")) != 3 {
		t.Fatalf("after Flush the file has %q", data)
	}
	if err := w.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(session, subject, ServerShutdown{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
	if _, err := f.Write([]byte("x")); err == nil {
		t.Fatal("Close left the file open")
	}
	info, _ := os.Stat(path)
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", info.Mode())
	}
}

func TestTimeFormat(t *testing.T) {
	w := &Writer{}
	for _, tc := range []time.Time{
		time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC),
		time.Date(2026, 7, 28, 10, 0, 0, 999999999, time.UTC),
		time.Date(2026, 7, 28, 10, 0, 1, 1000, time.UTC),
		time.Date(2026, 12, 31, 23, 59, 59, 123456789, time.FixedZone("x", 3600)),
		time.Date(1999, 1, 1, 0, 0, 0, 5000, time.UTC),
	} {
		got := string(w.appendTime(nil, tc))
		if want := tc.UTC().Format("2006-01-02T15:04:05.000000Z07:00"); got != want {
			t.Errorf("appendTime(%v) = %s, want %s", tc, got, want)
		}
	}
}

// writesTo hands each Write's bytes to a channel: the test sees each batch.
type writesTo chan []byte

func (c writesTo) Write(p []byte) (int, error) {
	c <- bytes.Clone(p)
	return len(p), nil
}

// Events reach the sink without Flush, after the linger: the events
// written within it go in one batch, and an event after a batch arms the
// linger again (a missed re-arm leaves the second batch unwritten); a
// Flush cuts the linger short.
func TestLingerWritesBatchesWithoutFlush(t *testing.T) {
	batches := make(writesTo, 16)
	w := New(Options{Sink: batches, Linger: time.Millisecond})
	defer func() { _ = w.Close(ctx(t)) }()
	next := func() []byte {
		select {
		case b := <-batches:
			return b
		case <-time.After(10 * time.Second):
			t.Fatal("an event never reached the sink without Flush")
			return nil
		}
	}
	for round := 1; round <= 2; round++ {
		seq, err := w.Write(session, subject, ToolStarted{Tool: "mcp.s.t", ToolCallID: "c", Server: "s"})
		if err != nil {
			t.Fatal(err)
		}
		if b := next(); !bytes.HasPrefix(b, []byte(`{"seq":`+itoa(seq)+`,`)) || bytes.Count(b, []byte{'\n'}) != 1 {
			t.Fatalf("round %d: batch %q, want the one event of seq %d", round, b, seq)
		}
	}

	// A long linger: three events wait for it together, and Flush cuts it
	// short with one write of the three.
	slow := make(writesTo, 16)
	w2 := New(Options{Sink: slow, Linger: time.Hour})
	defer func() { _ = w2.Close(ctx(t)) }()
	for range 3 {
		if _, err := w2.Write(session, subject, ToolStarted{Tool: "mcp.s.t", ToolCallID: "c", Server: "s"}); err != nil {
			t.Fatal(err)
		}
	}
	// Given time to write (50 ms: a writer that did not linger would have
	// written by then on an idle machine; under load a late write only
	// makes the check weaker, never wrong).
	select {
	case b := <-slow:
		t.Fatalf("written before the linger ran out or a Flush: %q", b)
	case <-time.After(50 * time.Millisecond):
	}
	if err := w2.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if b := <-slow; bytes.Count(b, []byte{'\n'}) != 3 {
		t.Fatalf("Flush wrote %q, want the three events in one write", b)
	}
}
