package stdio_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/internal/testproc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/stdio"
)

// These use small shell scripts as servers: each produces one behaviour of
// the wire a real server rarely shows on demand.

func start(t *testing.T, script string, opts stdio.Options) *stdio.Conn {
	t.Helper()
	opts.Command, opts.Args = "sh", []string{"-c", script}
	c, err := stdio.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		testproc.WaitGone(t, c.PID(), 3*time.Second)
	})
	return c
}

func call(t *testing.T, c *stdio.Conn, timeout time.Duration, params string) (*jsonrpc.Message, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return c.Call(ctx, jsonrpc.NewRequest(0, "tools/list", json.RawMessage(params)))
}

func TestServerPingIsAnsweredAndNotificationsDelivered(t *testing.T) {
	// The server speaks only after the test's first message, so the
	// notification can't arrive before the handler is set.
	c := start(t, `read go
echo '{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"hi"}}'
echo '{"jsonrpc":"2.0","id":"p1","method":"ping"}'
echo '{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage"}'
read a; read b; echo "$a" >&2; echo "$b" >&2; sleep 5`, stdio.Options{StopGrace: 200 * time.Millisecond})
	var mu sync.Mutex
	var got []string
	c.SetNotificationHandler(func(m *jsonrpc.Message) {
		mu.Lock()
		got = append(got, m.Method)
		mu.Unlock()
	})
	if err := c.Notify(context.Background(), jsonrpc.NewNotification("notifications/initialized", nil)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for !strings.Contains(c.StderrTail(), `"s1"`) || !strings.Contains(c.StderrTail(), `"p1"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the server's requests were not answered; its stderr: %q", c.StderrTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
	tail := c.StderrTail()
	if !strings.Contains(tail, `{"jsonrpc":"2.0","id":"p1","result":{}}`) {
		t.Errorf("ping answer missing: %q", tail)
	}
	if !strings.Contains(tail, `"id":"s1","error":{"code":-32601`) {
		t.Errorf("sampling (not offered) was not refused: %q", tail)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "notifications/message" {
		t.Errorf("notifications delivered: %v", got)
	}
}

func TestTooLongLineIsAnError(t *testing.T) {
	c := start(t, `head -c 5000 /dev/zero | tr '\0' a; echo; sleep 5`, stdio.Options{MaxMessageBytes: 1000, StopGrace: 100 * time.Millisecond})
	_, err := call(t, c, 3*time.Second, `{}`)
	if err == nil || !strings.Contains(err.Error(), "maxMessageBytes") {
		t.Fatalf("err %v, want the maxMessageBytes bound named", err)
	}
}

func TestStderrTailIsBounded(t *testing.T) {
	c := start(t, `i=0; while [ $i -lt 200 ]; do echo "log line $i" >&2; i=$((i+1)); done; exit 9`, stdio.Options{StderrTailBytes: 64})
	<-c.Exited()
	exit := c.ExitErr()
	if exit == nil || exit.ExitCode != 9 {
		t.Fatalf("exit %+v", exit)
	}
	if len(exit.StderrTail) > 64 || !strings.HasSuffix(exit.StderrTail, "log line 199") {
		t.Errorf("tail %q: want at most 64 bytes ending with the last line", exit.StderrTail)
	}
	if _, err := call(t, c, time.Second, `{}`); !errors.As(err, new(*stdio.ExitError)) {
		t.Errorf("call on an exited server: %v, want its ExitError", err)
	}
}

func TestServerThatStopsReadingCannotBlockAWrite(t *testing.T) {
	c := start(t, `exec sleep 30`, stdio.Options{StopGrace: 100 * time.Millisecond})
	big := `{"pad":"` + strings.Repeat("x", 1<<20) + `"}` // far more than a pipe holds
	start := time.Now()
	_, err := call(t, c, 300*time.Millisecond, big)
	if err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("write to a server that does not read: %v after %s", err, time.Since(start))
	}
}

func TestCloseIsQuickForAWellBehavedServerAndFinal(t *testing.T) {
	c := start(t, `cat >/dev/null`, stdio.Options{})
	begin := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took > time.Second {
		t.Errorf("closing a server that exits on EOF took %s", took)
	}
	if exit := c.ExitErr(); exit == nil || exit.ExitCode != 0 {
		t.Errorf("exit %+v, want a clean exit", exit)
	}
	if _, err := call(t, c, time.Second, `{}`); !errors.Is(err, stdio.ErrClosed) {
		t.Errorf("call after Close: %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestLateResponseToACancelledCallIsDropped(t *testing.T) {
	// Answers each request 300ms late, echoing its id.
	c := start(t, `while read line; do id=$(echo "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p'); [ -n "$id" ] || continue; sleep 0.3; echo "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{\"n\":$id}}"; done`, stdio.Options{StopGrace: 100 * time.Millisecond})
	if _, err := call(t, c, 100*time.Millisecond, `{}`); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first call: %v", err)
	}
	resp, err := call(t, c, 3*time.Second, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Result) != `{"n":2}` {
		t.Errorf("second call got %s: the late answer to the first leaked into it", resp.Result)
	}
}
