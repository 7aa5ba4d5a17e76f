package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// refusingVersionFront is a fake in front of the real dual-era server at
// url that answers every tools/call with -32022 (unsupported protocol
// version), as a server replaced behind its URL might, or a load balancer
// with a server of each version behind it; a real server refuses a
// version only at its first message, not every call. It counts the
// server/discover requests (each dial of the shared connection, or a
// relearn), and holds the one numbered holdAt (0: none) until release.
type refusingVersionFront struct {
	url       string
	discovers atomic.Int32
	holdAt    int32
	hold      chan struct{}
	release   func()
}

func newRefusingVersionFront(t *testing.T, holdAt int32) *refusingVersionFront {
	url, _ := dualEraServer(t)
	f := &refusingVersionFront{holdAt: holdAt, hold: make(chan struct{})}
	var once sync.Once
	f.release = func() { once.Do(func() { close(f.hold) }) }
	t.Cleanup(f.release)
	f.url = faultyFront(t, url, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		m := requestIn(body)
		switch m.Method {
		case "server/discover":
			if f.discovers.Add(1) == f.holdAt {
				select {
				case <-f.hold:
				case <-r.Context().Done():
				}
			}
		case "tools/call":
			refuseVersion(w, m.ID)
			return true
		}
		return false
	})
	return f
}

// request is what a fake front reads of a JSON-RPC message.
type request struct {
	Method string
	ID     json.RawMessage
}

// requestIn is the message body holds (zero if it holds none).
func requestIn(body []byte) request {
	var m request
	_ = json.Unmarshal(body, &m)
	return m
}

// refuseVersion answers the request numbered id with -32022 (unsupported
// protocol version), as a server that does not speak its era.
func refuseVersion(w http.ResponseWriter, id json.RawMessage) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":"unsupported protocol version"}}`, id, jsonrpc.CodeUnsupportedProtocolVersion)
}

// refused fails t unless err is the server's -32022.
func refused(t *testing.T, err error) {
	t.Helper()
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeUnsupportedProtocolVersion {
		t.Fatalf("a call the server refuses: %v; want its -32022", err)
	}
}

const echoCall = `{"name":"echo","arguments":{"text":"x"}}`

// A server that refuses every call with -32022 is learned again once per
// sessionsRetry, not once per call: each relearn costs a dial (a
// server/discover, an initialize, a DELETE).
func TestRefusingServerIsLearnedAgainOncePerInterval(t *testing.T) {
	f := newRefusingVersionFront(t, 0)
	c := newTestConn(t, f.url)
	clock := newAgents(t)
	c.clock = clock.clock.Now
	for range 4 {
		_, err := c.CallTool(testkit.Context(t), json.RawMessage(echoCall), CallHooks{})
		refused(t, err)
	}
	if n := f.discovers.Load(); n != 2 {
		t.Fatalf("4 refused calls sent %d server/discover; want 2 (the shared connection's dial, one relearn)", n)
	}
	clock.clock.Step(sessionsRetry)
	_, err := c.CallTool(testkit.Context(t), json.RawMessage(echoCall), CallHooks{})
	refused(t, err)
	if n := f.discovers.Load(); n != 3 {
		t.Fatalf("a refused call after sessionsRetry sent %d server/discover in all; want 3 (one more relearn)", n)
	}
}

// Calls refused while a relearn runs wait for its result rather than each dial
// the server, and a waiting call whose caller gives up ends at once with the
// server's refusal, not after the relearn's dial.
func TestRefusedCallsShareOneRelearn(t *testing.T) {
	f := newRefusingVersionFront(t, 2) // the relearn's dial is held
	c := newTestConn(t, f.url)
	if _, err := c.Client(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}
	waiting := func(n int) func() bool { return relearnWaiters(c, n) }
	results := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := c.CallTool(testkit.Context(t), json.RawMessage(echoCall), CallHooks{})
			results <- err
		}()
	}
	testkit.Eventually(t, "two calls waiting for the third's relearn", waiting(2))

	ctx, giveUp := context.WithCancel(testkit.Context(t))
	gaveUp := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctx, json.RawMessage(echoCall), CallHooks{})
		gaveUp <- err
	}()
	testkit.Eventually(t, "a fourth call waiting for the relearn", waiting(3))
	giveUp()
	refused(t, within(t, "the call that gave up ends", gaveUp)) // its own answer, while the relearn is still held

	f.release()
	for range 3 {
		refused(t, within(t, "each waiting call ends once the relearn did", results))
	}
	if n := f.discovers.Load(); n != 2 {
		t.Fatalf("the refused calls sent %d server/discover; want 2 (the shared connection's dial, one relearn)", n)
	}
}

// A dual-era server that answers one agent session's initialize without a
// session id ends only that agent's line: the other agents keep their upstream
// sessions (a relearn finds the server unchanged), the call goes on the shared
// connection, and after sessionsRetry agents get sessions again. The missing
// id is a fake in front of the real server.
func TestInitializeWithoutSessionIDEndsOnlyThatAgentsLine(t *testing.T) {
	url, _ := dualEraServer(t)
	var strip atomic.Bool
	front := faultyFront(t, url, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if strings.Contains(string(body), `"method":"notifications/initialized"`) && r.Header.Get("Mcp-Session-Id") == "" {
			w.WriteHeader(http.StatusAccepted) // taken, as by a server that keeps no session
			return true
		}
		if strings.Contains(string(body), `"method":"initialize"`) && strip.CompareAndSwap(true, false) {
			relay(w, r, url, body, "Mcp-Session-Id")
			return true
		}
		return false
	})
	c := newTestConn(t, front)
	as := newAgents(t)
	c.clock = as.clock.Now
	_, a := as.open(t)
	_, b := as.open(t)
	callTool(t, c, echoCall, CallHooks{Agent: a})
	sa := agentSession(c, a)

	strip.Store(true)
	if res := callTool(t, c, echoCall, CallHooks{Agent: b}); !strings.Contains(res, `"x"`) {
		t.Fatalf("the call whose session opened without an id answered %s", res)
	}
	if got := agentSession(c, a); got != sa || sa == "" || c.mode.Load() != modeDualEra || agentSession(c, b) != "" {
		t.Fatalf("after one initialize without a session id: a's session %q (was %q), b's %q, mode %s; want a's kept, none for b, the server still both eras", got, sa, agentSession(c, b), modeNames[c.mode.Load()])
	}

	as.clock.Step(sessionsRetry)
	callTool(t, c, echoCall, CallHooks{Agent: b})
	if sb := agentSession(c, b); sb == "" || sb == sa {
		t.Fatalf("b's upstream session after sessionsRetry: %q; want one of its own", sb)
	}
}

// The shared session relearn replaces is closed (DELETE) once no call uses it:
// a call in flight on it ends with its answer, and a call in flight on the new
// shared connection does not keep it open (waiting for the shared line to be
// idle, calls on the new connection could put it off for ever). The
// session-only server is replaced by a dual-era one behind a fake front that
// refuses calls in the old sessions with -32022 (the real dual-era server
// would not know them: a 404, which a session's call does not take for a
// change of era).
func TestReplacedSharedSessionClosesOnceIdle(t *testing.T) {
	before := testpeers.GoEverything(t, false)
	after, _ := dualEraServer(t)
	var switched, holdNext, holdNew atomic.Bool
	held, release := make(chan struct{}), make(chan struct{})
	heldNew, releaseNew := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	var mu sync.Mutex
	var deleted []string
	front := faultyFront(t, before.URL, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		sid := r.Header.Get("Mcp-Session-Id")
		isCall := strings.Contains(string(body), `"method":"tools/call"`)
		switch {
		case r.Method == http.MethodDelete:
			mu.Lock()
			deleted = append(deleted, sid)
			mu.Unlock()
		case isCall && holdNext.CompareAndSwap(true, false):
			close(held)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case isCall && sid == "" && holdNew.CompareAndSwap(true, false):
			close(heldNew)
			<-releaseNew
			relay(w, r, after, body)
			return true
		case isCall && switched.Load() && sid != "":
			var m struct{ ID json.RawMessage }
			_ = json.Unmarshal(body, &m)
			refuseVersion(w, m.ID)
			return true
		case switched.Load() && sid == "":
			relay(w, r, after, body)
			return true
		}
		return false
	})
	var releaseNewOnce sync.Once
	t.Cleanup(func() { releaseNewOnce.Do(func() { close(releaseNew) }) })
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // before the front closes
	c := newTestConn(t, front)
	const call = `{"name":"test_simple_text","arguments":{}}`
	old, err := c.Client(testkit.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	oldID := old.Conn().(*streamhttp.Conn).SessionID()

	holdNext.Store(true)
	inFlight := make(chan string, 1)
	go func() {
		res, err := c.CallTool(testkit.Context(t), json.RawMessage(call), CallHooks{})
		inFlight <- fmt.Sprint(string(res), err)
	}()
	within(t, "the call in the old session reaches the server", held)
	switched.Store(true)
	if res := callTool(t, c, echoCall, CallHooks{}); !strings.Contains(res, `"x"`) {
		t.Fatalf("the call refused in the old session answered %s after the relearn", res)
	}
	if c.mode.Load() != modeDualEra {
		t.Fatalf("the Conn's mode is %s; want both eras, learned again", modeNames[c.mode.Load()])
	}
	if err := c.WaitClosed(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	early := slices.Contains(deleted, oldID)
	mu.Unlock()
	if early {
		t.Fatalf("the replaced shared session %q was DELETEd under a call in flight", oldID)
	}

	holdNew.Store(true)
	onNew := make(chan string, 1)
	go func() { onNew <- callTool(t, c, echoCall, CallHooks{}) }()
	within(t, "the call on the new connection reaches the server", heldNew)
	releaseOnce.Do(func() { close(release) })
	if res := within(t, "the call in flight on the replaced session ends", inFlight); !strings.Contains(res, "simple text") {
		t.Fatalf("the call in flight on the replaced session ended with %s; want its answer", res)
	}
	testkit.Eventually(t, "the replaced shared session DELETEd once its own calls ended, a call on the new one in flight", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(deleted, oldID)
	})
	releaseNewOnce.Do(func() { close(releaseNew) })
	if res := within(t, "the call on the new shared connection ends", onNew); !strings.Contains(res, `"x"`) {
		t.Fatalf("the call on the new shared connection answered %s", res)
	}
}

// The call that starts a relearn and then gives up does not end the relearn:
// it returns with the server's refusal, the relearn's dial goes on for the
// calls still waiting, and no second dial starts: the dial does not run under
// the first call's context.
func TestRelearnOutlivesTheCallThatStartedIt(t *testing.T) {
	f := newRefusingVersionFront(t, 2) // the relearn's dial is held
	c := newTestConn(t, f.url)
	if _, err := c.Client(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}
	waiting := func(n int) func() bool { return relearnWaiters(c, n) }
	ctx, giveUp := context.WithCancel(testkit.Context(t))
	first := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctx, json.RawMessage(echoCall), CallHooks{})
		first <- err
	}()
	testkit.Eventually(t, "the first call's relearn dialling", func() bool {
		return f.discovers.Load() == 2 && waiting(0)()
	})
	second := make(chan error, 1)
	go func() {
		_, err := c.CallTool(testkit.Context(t), json.RawMessage(echoCall), CallHooks{})
		second <- err
	}()
	testkit.Eventually(t, "a second call waiting for the relearn", waiting(1))
	giveUp()
	refused(t, within(t, "the call that gave up ends", first))

	f.release()
	refused(t, within(t, "the waiting call ends once the relearn did", second))
	if n := f.discovers.Load(); n != 2 {
		t.Fatalf("the refused calls sent %d server/discover; want 2 (the shared connection's dial, one relearn)", n)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.relearnRun != nil || c.relearnAfter.IsZero() {
		t.Fatalf("after the relearn: run %v, next one after %v; want none running and the interval set", c.relearnRun, c.relearnAfter)
	}
}

// relearnWaiters says when a relearn runs on c with n calls waiting for it
// besides the one that started it.
func relearnWaiters(c *Conn, n int) func() bool {
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.relearnRun != nil && c.relearnRun.waiters == n
	}
}

// A call of an agent session whose session dial was answered without a session
// id does not fail another call of the same agent session: the line ends and
// the interval without sessions starts before the relearn's dial, so a call
// meanwhile goes on the shared connection rather than dialling a session on
// the failed line and failing with `cancelled` (as if its agent session had
// ended) when the first call ends the line after the relearn. The missing id
// and the held dials are a fake in front of the real server.
func TestCallDuringAFailedSessionDialsRelearnIsServed(t *testing.T) {
	url, _ := dualEraServer(t)
	var strip, holdInit atomic.Bool
	var discovers atomic.Int32
	heldDiscover, releaseDiscover := make(chan struct{}), make(chan struct{})
	heldInit, releaseInit := make(chan struct{}), make(chan struct{})
	var releaseDiscoverOnce, releaseInitOnce sync.Once
	front := faultyFront(t, url, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		isInit := strings.Contains(string(body), `"method":"initialize"`)
		switch {
		case strings.Contains(string(body), `"method":"notifications/initialized"`) && r.Header.Get("Mcp-Session-Id") == "":
			w.WriteHeader(http.StatusAccepted) // taken, as by a server that keeps no session
			return true
		case strings.Contains(string(body), `"method":"server/discover"`) && discovers.Add(1) == 2:
			close(heldDiscover) // the relearn's dial
			<-releaseDiscover
		case isInit && strip.CompareAndSwap(true, false):
			relay(w, r, url, body, "Mcp-Session-Id")
			return true
		case isInit && holdInit.CompareAndSwap(true, false):
			close(heldInit)
			<-releaseInit
		}
		return false
	})
	t.Cleanup(func() { releaseInitOnce.Do(func() { close(releaseInit) }) })
	t.Cleanup(func() { releaseDiscoverOnce.Do(func() { close(releaseDiscover) }) }) // before the front closes
	c := newTestConn(t, front)
	as := newAgents(t)
	c.clock = as.clock.Now
	_, a := as.open(t)
	if _, err := c.Client(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}

	strip.Store(true)
	first := make(chan string, 1)
	go func() { first <- callTool(t, c, echoCall, CallHooks{Agent: a}) }()
	within(t, "the relearn's dial reaches the server", heldDiscover)
	holdInit.Store(true)
	second := make(chan error, 1)
	go func() {
		_, err := c.CallTool(testkit.Context(t), json.RawMessage(echoCall), CallHooks{Agent: a})
		second <- err
	}()
	var err error
	select {
	case err = <-second: // served while the relearn dials
		holdInit.Store(false)
		releaseDiscoverOnce.Do(func() { close(releaseDiscover) })
		within(t, "the first call ends once the relearn did", first)
	case <-heldInit: // dialling a session on the failed line
		releaseDiscoverOnce.Do(func() { close(releaseDiscover) })
		within(t, "the first call ends once the relearn did", first)
		releaseInitOnce.Do(func() { close(releaseInit) })
		err = within(t, "the second call ends once its dial did", second)
	case <-testkit.Context(t).Done():
		t.Fatal("the second call neither answered nor dialled a session")
	}
	if err != nil {
		t.Fatalf("a call of the agent session during the relearn after its failed session dial: %v; want the server's answer", err)
	}
}
