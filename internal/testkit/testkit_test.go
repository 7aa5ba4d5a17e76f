package testkit

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"
)

// recorder is a TB that records a failure instead of ending the test, so
// that the helpers' failures can be checked.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	panic(r)
}

// failure runs f with a recorder and returns the failure it reported.
func failure(t *testing.T, f func(TB)) (msg string) {
	r := &recorder{TB: t}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
		msg = r.failed
	}()
	f(r)
	return ""
}

func TestContextEndsWithTheTest(t *testing.T) {
	var ended func() error
	t.Run("inner", func(t *testing.T) {
		ctx := Context(t)
		if d, ok := ctx.Deadline(); !ok || time.Until(d) > 30*time.Second || time.Until(d) < 29*time.Second {
			t.Fatalf("deadline %v, want 30 s from now", d)
		}
		ended = ctx.Err
	})
	if ended() == nil {
		t.Fatal("the context outlived its test")
	}
}

func TestEventually(t *testing.T) {
	n := 0
	if msg := failure(t, func(tb TB) { Eventually(tb, "n reaches 3", func() bool { n++; return n >= 3 }) }); msg != "" || n != 3 {
		t.Fatalf("a condition that comes to hold: failure %q after %d polls", msg, n)
	}
	start := time.Now()
	msg := failure(t, func(tb TB) { eventually(tb, 100*time.Millisecond, "never", func() bool { return false }) })
	if msg != "timed out after 100ms waiting until never" || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("a condition that never holds: failure %q after %s", msg, time.Since(start))
	}
}

// The port FreePort names can be listened on at once.
func TestFreePortCanBeListenedOn(t *testing.T) {
	port := FreePort(t)
	if port <= 0 || port > 65535 {
		t.Fatalf("port %d", port)
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatalf("listening on the free port %d: %v", port, err)
	}
	l.Close()
}

func TestSecretURL(t *testing.T) {
	raw := SecretURL(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if u.Hostname() != "127.0.0.1" || u.Path != "/mcp" {
		t.Fatalf("%s: want a loopback MCP URL", raw)
	}
	for _, s := range URLSecrets {
		if !strings.Contains(raw, s) {
			t.Errorf("%s lacks %q", raw, s)
		}
	}
	if s := ShownSecret(strings.ReplaceAll(raw, "Zq81xw", "")); s != "urluser" {
		t.Errorf("ShownSecret = %q, want the first secret shown", s)
	}
	if s := ShownSecret("http://REDACTED@127.0.0.1/mcp?token=REDACTED"); s != "" {
		t.Errorf("ShownSecret of a redacted URL = %q", s)
	}
}

// Spinning is counted: the reading grows by 20 ms of CPU within 10 s of
// wall time, however busy the machine's other cores are.
func TestProcessCPUCountsWork(t *testing.T) {
	before := ProcessCPU()
	for deadline := time.Now().Add(10 * time.Second); ProcessCPU()-before < 20*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatalf("10 s of spinning counted %s of CPU", ProcessCPU()-before)
		}
	}
}
