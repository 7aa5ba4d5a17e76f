package upstream

import (
	"bytes"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/signed"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// Two agent sessions calling a server that keeps state per session each
// see their own state: each has an upstream session of its own. A
// stateless agent's call takes the shared connection. Both a server that
// speaks both eras and one that speaks only the session era.
func TestAgentSessionsKeepTheirOwnUpstreamState(t *testing.T) {
	for _, sessionOnly := range []bool{false, true} {
		name := map[bool]string{false: "both eras", true: "session era only"}[sessionOnly]
		t.Run(name, func(t *testing.T) {
			st := bridgetest.NewStateful(t, sessionOnly)
			c := newTestConn(t, st.URL)
			as := newAgents(t)
			_, a := as.open(t)
			_, b := as.open(t)

			callTool(t, c, `{"name":"remember","arguments":{"value":"apple"}}`, CallHooks{Agent: a})
			callTool(t, c, `{"name":"remember","arguments":{"value":"banana"}}`, CallHooks{Agent: b})
			if res := callTool(t, c, `{"name":"recall","arguments":{}}`, CallHooks{Agent: a}); !strings.Contains(res, "recalled apple") {
				t.Errorf("agent a recalls %s; want its own value, apple", res)
			}
			if res := callTool(t, c, `{"name":"recall","arguments":{}}`, CallHooks{Agent: b}); !strings.Contains(res, "recalled banana") {
				t.Errorf("agent b recalls %s; want its own value, banana", res)
			}
			if res := callTool(t, c, `{"name":"recall","arguments":{}}`, CallHooks{}); strings.Contains(res, "apple") || strings.Contains(res, "banana") {
				t.Errorf("a stateless agent recalls %s; want nothing of the session-era agents'", res)
			}
			seen := st.Calls()
			sa, sb := agentSession(c, a), agentSession(c, b)
			want := []string{sa, sb, sa, sb}
			if sa == "" || sb == "" || sa == sb || len(seen) != 5 || !slices.Equal(seen[:4], want) {
				t.Fatalf("the server saw the calls in sessions %q; want a's (%q) and b's (%q) own, then the stateless agent's", seen, sa, sb)
			}
			if stateless := seen[4]; stateless == sa || stateless == sb || (sessionOnly && stateless == "") || (!sessionOnly && stateless != "") {
				t.Errorf("the stateless agent's call came in session %q; want the shared connection (a session only where the server has no stateless era)", stateless)
			}
			if n := c.AgentSessions(); n != 2 {
				t.Errorf("the Conn holds %d agent sessions, want 2", n)
			}
		})
	}
}

// An agent's upstream session is closed (DELETE) when the agent session
// ends: by DELETE, by idle expiry, and when the Conn is closed. A call for
// an agent session that has ended opens nothing.
func TestUpstreamSessionEndsWithTheAgentSession(t *testing.T) {
	st := bridgetest.NewStateful(t, false)
	c := newTestConn(t, st.URL)
	as := newAgents(t)
	ended, a := as.open(t)
	_, idle := as.open(t)
	busy, b := as.open(t)
	for _, agent := range []*Agent{a, idle, b} {
		callTool(t, c, `{"name":"recall","arguments":{}}`, CallHooks{Agent: agent})
	}
	sa, sIdle, sb := agentSession(c, a), agentSession(c, idle), agentSession(c, b)
	deleted := func(id string) func() bool { return func() bool { return slices.Contains(st.Deleted(), id) } }

	as.End(ended) // the agent's DELETE
	testkit.Eventually(t, "the ended agent session's upstream session DELETEd", deleted(sa))
	if c.AgentSessions() != 2 || slices.Contains(st.Deleted(), sIdle) || slices.Contains(st.Deleted(), sb) {
		t.Fatalf("after one agent session ended: %d agent sessions, DELETEd %q; want the other two kept", c.AgentSessions(), st.Deleted())
	}

	as.clock.Step(2 * time.Minute) // past the idle timeout
	if _, err := as.Resume(busy.Token, busy.Subject, busy.Endpoint); err != nil {
		t.Fatal(err)
	}
	as.Sweep()
	testkit.Eventually(t, "the idle agent session's upstream session DELETEd", deleted(sIdle))
	if slices.Contains(st.Deleted(), sb) {
		t.Fatalf("the session in use was DELETEd too: %q", st.Deleted())
	}

	_, err := c.CallTool(testkit.Context(t), []byte(`{"name":"recall","arguments":{}}`), CallHooks{Agent: a})
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonCancelled || c.AgentSessions() != 1 {
		t.Fatalf("a call for an ended agent session: %v, %d agent sessions; want %s and no new upstream session", err, c.AgentSessions(), ReasonCancelled)
	}

	c.Close() // the server left the bridge's scope
	testkit.Eventually(t, "the last agent's upstream session DELETEd with the Conn", deleted(sb))
	if c.AgentSessions() != 0 {
		t.Fatalf("a retired Conn holds %d agent sessions", c.AgentSessions())
	}
}

// Every upstream session of a Conn rides on its one pool of HTTP
// connections: calls one after the other in 8 agent sessions reuse a
// connection instead of dialling one per session.
func TestAgentSessionsShareOnePool(t *testing.T) {
	st := bridgetest.NewStateful(t, false)
	c := newTestConn(t, st.URL)
	as := newAgents(t)
	for range 8 {
		_, agent := as.open(t)
		callTool(t, c, `{"name":"recall","arguments":{}}`, CallHooks{Agent: agent})
	}
	if c.AgentSessions() != 8 {
		t.Fatalf("%d agent sessions, want 8", c.AgentSessions())
	}
	// Sequential requests need one connection; a second can open when a
	// request is sent just before the previous one's connection is back
	// in the pool. One per session would be 9.
	if n := st.Conns(); n > 3 {
		t.Fatalf("the server accepted %d TCP connections for 8 agent sessions' sequential calls; want the pool's few", n)
	}
}

// When an agent's session cannot be opened (initialize fails while the
// shared connection works), a server that speaks both eras serves the call
// statelessly (and session dials pause for sessionsRetry); a session-only
// server's call fails rather than run in the shared session, where other
// agents' state is. The failing initialize is a fake in front of the real
// server: a real one cannot be made to refuse only some sessions.
func TestFailedAgentSessionDial(t *testing.T) {
	for _, sessionOnly := range []bool{false, true} {
		name := map[bool]string{false: "both eras", true: "session era only"}[sessionOnly]
		t.Run(name, func(t *testing.T) {
			st := bridgetest.NewStateful(t, sessionOnly)
			var initializes atomic.Int32
			url := faultyFront(t, st.URL, func(w http.ResponseWriter, _ *http.Request, body []byte) bool {
				// The shared connection's initialize (session-only) passes;
				// every agent's is refused.
				if !bytes.Contains(body, []byte(`"method":"initialize"`)) || (sessionOnly && initializes.Add(1) == 1) {
					return false
				}
				http.Error(w, "too many sessions", http.StatusServiceUnavailable)
				return true
			})
			c := newTestConn(t, url)
			if _, err := c.Client(testkit.Context(t)); err != nil {
				t.Fatal(err)
			}
			st.Calls()
			_, agent := newAgents(t).open(t)
			res, err := c.CallTool(testkit.Context(t), []byte(`{"name":"recall","arguments":{}}`), CallHooks{Agent: agent})
			seen := st.Calls()
			if sessionOnly {
				var e *Error
				if !errors.As(err, &e) || e.Reason != ReasonUnavailable || len(seen) != 0 {
					t.Fatalf("session-only server, the agent's session refused: %s, %v, server saw calls %q; want %s and no call on the shared session", res, err, seen, ReasonUnavailable)
				}
				return
			}
			if err != nil || len(seen) != 1 || seen[0] != "" || c.sessionsRetryAt.Load() <= time.Now().UnixNano() {
				t.Fatalf("dual-era server, the agent's session refused: %s, %v, server saw calls %q; want the call served statelessly and session dials paused", res, err, seen)
			}
		})
	}
}

// An agent session forgotten at the per-caller cap (another replica's
// session adopted here in its place) ends its upstream session too.
func TestUpstreamSessionEndsWhenTheCapForgetsTheAgent(t *testing.T) {
	st := bridgetest.NewStateful(t, false)
	c := newTestConn(t, st.URL)
	sealer, err := signed.New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	here := session.NewManager(sealer, session.Options{MaxPerSubject: 1})
	elsewhere := session.NewManager(sealer, session.Options{}) // another replica, same key
	claims := session.Claims{Subject: "system:serviceaccount:agents:a", Version: client.LatestLegacy}
	s, err := here.Open(claims)
	if err != nil {
		t.Fatal(err)
	}
	agent := &Agent{ID: s.ID, AtEnd: s.AtEnd}
	callTool(t, c, `{"name":"recall","arguments":{}}`, CallHooks{Agent: agent})
	upstreamSession := agentSession(c, agent)
	other, err := elsewhere.Open(claims)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := here.Resume(other.Token, other.Subject, other.Endpoint); err != nil {
		t.Fatalf("adopting a session at the cap: %v", err)
	}
	testkit.Eventually(t, "the forgotten agent session's upstream session DELETEd", func() bool { return slices.Contains(st.Deleted(), upstreamSession) })
}

// A drained Conn (rotated credentials) closes its agents' sessions once
// its calls end; a call that still reaches it gets a new session, closed
// again when that call ends.
func TestDrainedConnClosesAgentSessions(t *testing.T) {
	st := bridgetest.NewStateful(t, false)
	c := newTestConn(t, st.URL)
	_, agent := newAgents(t).open(t)
	callTool(t, c, `{"name":"recall","arguments":{}}`, CallHooks{Agent: agent})
	first := agentSession(c, agent)
	c.Drain()
	testkit.Eventually(t, "the agent's session DELETEd by the drain", func() bool { return slices.Contains(st.Deleted(), first) })
	callTool(t, c, `{"name":"recall","arguments":{}}`, CallHooks{Agent: agent})
	seen := st.Calls()
	late := seen[len(seen)-1]
	if late == "" || late == first {
		t.Fatalf("the late call came in session %q; want a new session of the agent's (the first was %q)", late, first)
	}
	testkit.Eventually(t, "the late call's session DELETEd when it ended", func() bool { return slices.Contains(st.Deleted(), late) })
}

// refusingFront is a fake in front of the real server at url that, while
// refuse is set, refuses every initialize with 503 (too many sessions), and
// 404s every POST in a session of gone: a real server cannot be made to
// refuse only new sessions, nor to forget one session on demand.
func refusingFront(t *testing.T, url string) (front string, refuse *atomic.Bool, gone *sync.Map) {
	refuse, gone = &atomic.Bool{}, &sync.Map{}
	front = faultyFront(t, url, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if _, forgotten := gone.Load(r.Header.Get("Mcp-Session-Id")); forgotten && r.Method == http.MethodPost {
			http.Error(w, "session not found", http.StatusNotFound)
			return true
		}
		if refuse.Load() && bytes.Contains(body, []byte(`"method":"initialize"`)) {
			http.Error(w, "too many sessions", http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	return front, refuse, gone
}

// One agent's refused session dial (a dual-era server at its session limit)
// serves that agent statelessly for a while, but an agent with a session of
// its own keeps using it, and its state: not every agent goes stateless for
// sessionsRetry.
func TestFailedDialLeavesOtherAgentsOnTheirSessions(t *testing.T) {
	st := bridgetest.NewStateful(t, false)
	url, refuse, _ := refusingFront(t, st.URL)
	c := newTestConn(t, url)
	as := newAgents(t)
	_, a := as.open(t)
	_, b := as.open(t)
	callTool(t, c, `{"name":"remember","arguments":{"value":"apple"}}`, CallHooks{Agent: a})
	refuse.Store(true)
	callTool(t, c, `{"name":"recall","arguments":{}}`, CallHooks{Agent: b})
	if c.sessionsRetryAt.Load() <= time.Now().UnixNano() {
		t.Fatal("b's refused session dial did not pause session dials")
	}
	if res := callTool(t, c, `{"name":"recall","arguments":{}}`, CallHooks{Agent: a}); !strings.Contains(res, "recalled apple") {
		t.Fatalf("agent a recalls %s after b's session dial failed; want its own state, apple", res)
	}
}

// An agent with a session of its own on a session-only server is served in it
// while the shared session is gone and cannot be opened again (the server at
// its session limit): an agent call does not need the shared connection first,
// so it does not fail with mcp_server_unavailable.
func TestAgentSessionOutlivesTheSharedSession(t *testing.T) {
	st := bridgetest.NewStateful(t, true)
	url, refuse, gone := refusingFront(t, st.URL)
	c := newTestConn(t, url)
	_, a := newAgents(t).open(t)
	callTool(t, c, `{"name":"remember","arguments":{"value":"apple"}}`, CallHooks{Agent: a})
	shared, err := c.Client(testkit.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	gone.Store(shared.Conn().(*streamhttp.Conn).SessionID(), true)
	refuse.Store(true)
	if _, err := c.Call(testkit.Context(t), "tools/list", nil); err == nil {
		t.Fatal("a listing in the forgotten shared session succeeded")
	}
	if _, err := c.Client(testkit.Context(t)); err == nil {
		t.Fatal("the shared session was dialled again although the server refuses sessions")
	}
	if res := callTool(t, c, `{"name":"recall","arguments":{}}`, CallHooks{Agent: a}); !strings.Contains(res, "recalled apple") {
		t.Fatalf("agent a recalls %s; want its own state, apple", res)
	}
}

// A session-only server that answers an agent session's initialize without a
// session id fails that agent's call (mcp_server_unavailable) and tells the
// Conn nothing: every agent sharing the shared session would run in one
// another's state; the Conn does not go stateless for good, so later agent
// calls do not take the shared session. The missing id is a fake in front of
// the real server (which always gives one).
func TestSessionOnlyServerAnsweringWithoutSessionID(t *testing.T) {
	st := bridgetest.NewStateful(t, true)
	var initializes atomic.Int32
	url := faultyFront(t, st.URL, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		// The shared connection's initialize passes; the agents' are
		// answered without their session id, and their confirmation
		// without one is taken, as by a server that keeps no session.
		if bytes.Contains(body, []byte(`"method":"notifications/initialized"`)) && r.Header.Get("Mcp-Session-Id") == "" {
			w.WriteHeader(http.StatusAccepted)
			return true
		}
		if !bytes.Contains(body, []byte(`"method":"initialize"`)) || initializes.Add(1) == 1 {
			return false
		}
		relay(w, r, st.URL, body, "Mcp-Session-Id")
		return true
	})
	c := newTestConn(t, url)
	as := newAgents(t)
	for _, name := range []string{"a", "b"} {
		_, agent := as.open(t)
		_, err := c.CallTool(testkit.Context(t), []byte(`{"name":"recall","arguments":{}}`), CallHooks{Agent: agent})
		var e *Error
		if !errors.As(err, &e) || e.Reason != ReasonUnavailable {
			t.Fatalf("agent %s's call: %v; want %s", name, err, ReasonUnavailable)
		}
	}
	if seen := st.Calls(); len(seen) != 0 || c.mode.Load() != modeSessionOnly {
		t.Fatalf("the server saw calls in sessions %q, the Conn's mode is %d; want no call (none in the shared session) and the server still known to keep sessions", seen, c.mode.Load())
	}
}

// newCappedConn is a Conn to url that holds at most limit agent sessions.
func newCappedConn(t *testing.T, url string, limit int) *Conn {
	c := New(Target{Namespace: "ns", Name: "s", URL: url}, Options{MaxAgentSessions: limit})
	t.Cleanup(c.Close)
	return c
}

// At its cap of agent sessions a Conn closes the least recently used idle one
// to open a new one; the agent whose session was closed gets a new, empty one
// when it calls again.
func TestAgentSessionCapClosesTheLeastRecentlyUsed(t *testing.T) {
	st := bridgetest.NewStateful(t, true)
	c := newCappedConn(t, st.URL, 2)
	as := newAgents(t)
	_, a := as.open(t)
	_, b := as.open(t)
	_, third := as.open(t)
	callTool(t, c, `{"name":"remember","arguments":{"value":"apple"}}`, CallHooks{Agent: a})
	callTool(t, c, `{"name":"remember","arguments":{"value":"banana"}}`, CallHooks{Agent: b})
	sa, sb := agentSession(c, a), agentSession(c, b)
	deleted := func(id string) func() bool { return func() bool { return slices.Contains(st.Deleted(), id) } }

	callTool(t, c, `{"name":"recall","arguments":{}}`, CallHooks{Agent: third})
	testkit.Eventually(t, "a's session (least recently used) DELETEd at the cap", deleted(sa))
	if n := c.AgentSessions(); n != 2 || slices.Contains(st.Deleted(), sb) || agentSession(c, third) == "" {
		t.Fatalf("at the cap: %d agent sessions, DELETEd %q; want 2, b's kept and the third agent's opened", n, st.Deleted())
	}

	if res := callTool(t, c, `{"name":"recall","arguments":{}}`, CallHooks{Agent: a}); strings.Contains(res, "apple") {
		t.Fatalf("agent a recalls %s in a new session; want it empty", res)
	}
	if s := agentSession(c, a); s == "" || s == sa {
		t.Fatalf("agent a's session is %q; want a new one (the old was %q)", s, sa)
	}
	testkit.Eventually(t, "b's session (now least recently used) DELETEd", deleted(sb))
}

// At the cap, a caller opening sessions closes its own idle ones, never
// another caller's (a stateful server would lose that caller's state); a
// caller holding fewer than another gets room from the one holding the most.
// Each is counted by its reason.
func TestAgentSessionCapClosesTheCallersOwnFirst(t *testing.T) {
	st := bridgetest.NewStateful(t, true)
	var mu sync.Mutex
	reasons := map[string]int{}
	c := New(Target{Namespace: "ns", Name: "s", URL: st.URL}, Options{MaxAgentSessions: 3, SessionClosed: func(_, reason string) {
		mu.Lock()
		reasons[reason]++
		mu.Unlock()
	}})
	t.Cleanup(c.Close)
	as := newAgents(t)
	agentOf := func(caller string) *Agent {
		_, a := as.open(t)
		a.Caller = caller
		return a
	}
	deleted := func(id string) func() bool { return func() bool { return slices.Contains(st.Deleted(), id) } }
	bob := agentOf("bob")
	callTool(t, c, `{"name":"remember","arguments":{"value":"bob's"}}`, CallHooks{Agent: bob})
	bobs := agentSession(c, bob)
	var alices []*Agent
	var alicesSessions []string
	for i := range 4 {
		a := agentOf("alice")
		alices = append(alices, a)
		callTool(t, c, `{"name":"remember","arguments":{"value":"alice's"}}`, CallHooks{Agent: a})
		alicesSessions = append(alicesSessions, agentSession(c, a))
		if i >= 2 { // at the cap: alice's least recently used goes
			testkit.Eventually(t, "alice's own least recently used session DELETEd", deleted(alicesSessions[i-2]))
		}
	}
	if n := c.AgentSessions(); n != 3 || slices.Contains(st.Deleted(), bobs) {
		t.Fatalf("%d agent sessions; bob's DELETEd: %v; want 3, bob's kept", n, slices.Contains(st.Deleted(), bobs))
	}
	if res := callTool(t, c, `{"name":"recall","arguments":{}}`, CallHooks{Agent: bob}); !strings.Contains(res, "bob's") {
		t.Fatalf("bob recalls %s after alice opened sessions at the cap; want bob's", res)
	}
	// Carol holds none, alice two: alice's least recently used makes room.
	alice2 := agentSession(c, alices[2])
	carol := agentOf("carol")
	callTool(t, c, `{"name":"remember","arguments":{"value":"carol's"}}`, CallHooks{Agent: carol})
	testkit.Eventually(t, "alice's least recently used session DELETEd for carol", deleted(alice2))
	if slices.Contains(st.Deleted(), bobs) || agentSession(c, carol) == "" {
		t.Fatalf("for carol's session: bob's DELETEd %v, carol's %q; want bob's kept, carol's open", slices.Contains(st.Deleted(), bobs), agentSession(c, carol))
	}
	mu.Lock()
	defer mu.Unlock()
	if reasons[ClosedCap] != 2 || reasons[ClosedCapFairShare] != 1 {
		t.Fatalf("sessions closed by reason %v; want 2 %s (alice's own) and 1 %s (alice's for carol)", reasons, ClosedCap, ClosedCapFairShare)
	}
}

// At its cap with every agent session in use by a call, a new agent's call
// is refused (mcp_server_busy) by a session-only server's Conn, and served
// statelessly by a dual-era server's. The call in flight is held by a fake
// in front of the real server (a real one answers at once).
func TestAgentSessionCapWithEverySessionBusy(t *testing.T) {
	for _, sessionOnly := range []bool{false, true} {
		name := map[bool]string{false: "both eras", true: "session era only"}[sessionOnly]
		t.Run(name, func(t *testing.T) {
			st := bridgetest.NewStateful(t, sessionOnly)
			arrived, hold := make(chan struct{}, 1), make(chan struct{})
			url := faultyFront(t, st.URL, func(_ http.ResponseWriter, r *http.Request, body []byte) bool {
				if r.Header.Get("Mcp-Session-Id") != "" && bytes.Contains(body, []byte(`"method":"tools/call"`)) {
					select {
					case arrived <- struct{}{}:
					default:
					}
					select {
					case <-hold:
					case <-r.Context().Done():
					}
				}
				return false
			})
			c := newCappedConn(t, url, 1)
			as := newAgents(t)
			_, a := as.open(t)
			_, b := as.open(t)
			done := make(chan error, 1)
			go func() {
				_, err := c.CallTool(testkit.Context(t), []byte(`{"name":"recall","arguments":{}}`), CallHooks{Agent: a})
				done <- err
			}()
			within(t, "the first agent's call reaches the server", arrived)
			res, err := c.CallTool(testkit.Context(t), []byte(`{"name":"recall","arguments":{}}`), CallHooks{Agent: b})
			close(hold)
			if err := within(t, "the held call ends once let go", done); err != nil {
				t.Fatalf("the held call: %v", err)
			}
			seen := st.Calls()
			if sessionOnly {
				var e *Error
				if !errors.As(err, &e) || e.Reason != ReasonBusy || len(seen) != 1 {
					t.Fatalf("a call past the cap: %s, %v, the server saw calls in %q; want %s and only the held call", res, err, seen, ReasonBusy)
				}
				// The refusal says what frees a session: not only calls
				// ending (fair sharing may keep others' idle sessions).
				if !strings.Contains(err.Error(), "none it may close") || !strings.Contains(err.Error(), "idles out") {
					t.Errorf("the refusal %q does not say why no session could be closed and when to retry", err)
				}
				return
			}
			if err != nil || len(seen) != 2 || seen[0] != "" {
				t.Fatalf("a call past the cap: %s, %v, the server saw calls in %q; want it served statelessly, then the held call", res, err, seen)
			}
		})
	}
}

// A Conn retired because its server's process ended (a crash, a restart) sends
// no DELETE: the sessions went with the old process.
func TestRetiredForANewPodSendsNoDelete(t *testing.T) {
	for _, reason := range []string{ReasonRestarted, ReasonUnstable} {
		t.Run(reason, func(t *testing.T) {
			st := bridgetest.NewStateful(t, false)
			c := newTestConn(t, st.URL)
			callingAgents(t, c, newAgents(t), 3)
			c.Retire(reason, true)
			if err := c.WaitClosed(testkit.Context(t)); err != nil {
				t.Fatal(err)
			}
			if d := st.Deleted(); len(d) != 0 || c.AgentSessions() != 0 {
				t.Fatalf("retired (%s): DELETEd %q, %d agent sessions held; want no DELETE and none held", reason, d, c.AgentSessions())
			}
		})
	}
}

// A Conn retired while its old server may still be serving (a new pod in a
// rollout, a remote server's new URL) DELETEs its agents' sessions there:
// they would hold the server's per-session state until it expired them.
func TestRetiredWithTheServerAliveDeletesSessions(t *testing.T) {
	st := bridgetest.NewStateful(t, false)
	c := newTestConn(t, st.URL)
	callingAgents(t, c, newAgents(t), 3)
	c.Retire(ReasonRestarted, false)
	if err := c.WaitClosed(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}
	if d := st.Deleted(); len(d) < 3 || c.AgentSessions() != 0 {
		t.Fatalf("retired with the server alive: DELETEd %q, %d agent sessions held; want the 3 agents' sessions DELETEd", d, c.AgentSessions())
	}
}

// callingAgents opens n agent sessions that have each called c once, and
// so hold an upstream session each.
func callingAgents(t *testing.T, c *Conn, as *agents, n int) []*session.Session {
	t.Helper()
	var ss []*session.Session
	for range n {
		s, agent := as.open(t)
		callTool(t, c, `{"name":"recall","arguments":{}}`, CallHooks{Agent: agent})
		ss = append(ss, s)
	}
	return ss
}

// deleteBoundFront is a fake in front of the real server at url that
// counts the DELETEs in flight at once (most reads the highest count) and
// holds each until more than closeParallel are in flight, or for at most
// 300 ms: the bound is what is tested, the wait only lets a burst build
// up (a real server answers a DELETE at once).
func deleteBoundFront(t *testing.T, url string) (front string, most func() int) {
	var mu sync.Mutex
	inFlight, highest := 0, 0
	burst, bursting := make(chan struct{}), false
	front = faultyFront(t, url, func(_ http.ResponseWriter, r *http.Request, _ []byte) bool {
		if r.Method != http.MethodDelete {
			return false
		}
		mu.Lock()
		inFlight++
		if highest = max(highest, inFlight); highest > closeParallel && !bursting {
			bursting = true
			close(burst)
		}
		mu.Unlock()
		select {
		case <-burst:
		case <-time.After(300 * time.Millisecond):
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		return false
	})
	return front, func() int {
		mu.Lock()
		defer mu.Unlock()
		return highest
	}
}

// Closing a Conn DELETEs its agents' sessions at most closeParallel at a time,
// not all at once.
func TestCloseSendsBoundedDeletes(t *testing.T) {
	st := bridgetest.NewStateful(t, false)
	url, most := deleteBoundFront(t, st.URL)
	c := newTestConn(t, url)
	sessions := 2*closeParallel + 2
	callingAgents(t, c, newAgents(t), sessions)
	c.Close()
	if err := c.WaitClosed(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}
	if d := st.Deleted(); len(d) != sessions || most() > closeParallel {
		t.Fatalf("closing %d agent sessions: %d DELETEd, at most %d at once; want all, at most %d at once", sessions, len(d), most(), closeParallel)
	}
}

// Every DELETE of a Conn shares one bound, whatever sends it: agent sessions
// ending all at once (an idle sweep) while the Conn is closed send at most
// closeParallel at a time: an ending agent session does not send its DELETE
// outside the bound.
func TestEveryDeleteOfAConnSharesOneBound(t *testing.T) {
	st := bridgetest.NewStateful(t, false)
	url, most := deleteBoundFront(t, st.URL)
	c := newTestConn(t, url)
	as := newAgents(t)
	sessions := 3*closeParallel + 2
	ss := callingAgents(t, c, as, sessions)
	for _, s := range ss[:2*closeParallel] {
		as.End(s)
	}
	testkit.Eventually(t, "the ended agent sessions' upstream sessions closing", func() bool { return c.AgentSessions() == sessions-2*closeParallel })
	c.Close()
	testkit.Eventually(t, "every agent session DELETEd", func() bool { return len(st.Deleted()) == sessions })
	if most() > closeParallel {
		t.Fatalf("%d agent sessions ended and the Conn closed: at most %d DELETEs at once; want at most %d", sessions, most(), closeParallel)
	}
}

// closeLog records what a Conn tells of the sessions it closes: the
// reasons given to Options.SessionClosed and its log lines.
type closeLog struct {
	mu      sync.Mutex
	reasons []string
	lines   []string
}

func (l *closeLog) options(limit int) Options {
	return Options{
		MaxAgentSessions: limit,
		SessionClosed: func(server, reason string) {
			l.mu.Lock()
			l.reasons = append(l.reasons, server+":"+reason)
			l.mu.Unlock()
		},
		Log: funcr.New(func(_, args string) {
			l.mu.Lock()
			l.lines = append(l.lines, args)
			l.mu.Unlock()
		}, funcr.Options{}),
	}
}

func (l *closeLog) get() (reasons, lines []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reasons), slices.Clone(l.lines)
}

// At its cap, a Conn closes the least recently used idle agent session only
// once the new agent's session opened: a new session the server refuses closes
// nobody's. The session closed at the cap is counted (reason cap) and logged.
// The refusal is a fake in front of the real server (a real one cannot be made
// to refuse only new sessions).
func TestCapClosesASessionOnlyOnceTheNewOneOpened(t *testing.T) {
	st := bridgetest.NewStateful(t, true)
	url, refuse, _ := refusingFront(t, st.URL)
	var log closeLog
	c := New(Target{Namespace: "ns", Name: "s", URL: url}, log.options(1))
	t.Cleanup(c.Close)
	as := newAgents(t)
	_, a := as.open(t)
	_, b := as.open(t)
	callTool(t, c, `{"name":"remember","arguments":{"value":"apple"}}`, CallHooks{Agent: a})
	sa := agentSession(c, a)

	refuse.Store(true)
	_, err := c.CallTool(testkit.Context(t), []byte(`{"name":"recall","arguments":{}}`), CallHooks{Agent: b})
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonUnavailable {
		t.Fatalf("b's call with its session refused: %v; want %s", err, ReasonUnavailable)
	}
	if err := c.WaitClosed(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}
	if d := st.Deleted(); len(d) != 0 || c.AgentSessions() != 1 {
		t.Fatalf("after b's session was refused at the cap: DELETEd %q, %d agent sessions; want a's kept and b's line gone", d, c.AgentSessions())
	}
	refuse.Store(false)
	if res := callTool(t, c, `{"name":"recall","arguments":{}}`, CallHooks{Agent: a}); !strings.Contains(res, "recalled apple") {
		t.Fatalf("agent a recalls %s; want its own state, apple", res)
	}
	if reasons, _ := log.get(); len(reasons) != 0 {
		t.Fatalf("sessions counted closed: %q; want none", reasons)
	}

	callTool(t, c, `{"name":"recall","arguments":{}}`, CallHooks{Agent: b})
	testkit.Eventually(t, "a's session DELETEd once b's opened", func() bool { return slices.Contains(st.Deleted(), sa) })
	reasons, lines := log.get()
	if !slices.Equal(reasons, []string{"s:" + ClosedCap}) || len(lines) != 1 || !strings.Contains(lines[0], "max-upstream-sessions") || !strings.Contains(lines[0], `"server"="ns/s"`) {
		t.Fatalf("a's session closed at the cap: counted %q, logged %q; want one %s, and one line naming the server and the flag", reasons, lines, ClosedCap)
	}
}

// Calls that wait on an agent session's failed session dial get its failure;
// they do not each dial the server again. The refusal, held until the calls
// wait, is a fake in front of the real server.
func TestWaitersShareAFailedDial(t *testing.T) {
	st := bridgetest.NewStateful(t, true)
	var initializes atomic.Int32
	arrived, release := make(chan struct{}), make(chan struct{})
	url := faultyFront(t, st.URL, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if !bytes.Contains(body, []byte(`"method":"initialize"`)) || initializes.Add(1) == 1 {
			return false // the shared connection's
		}
		if initializes.Load() == 2 {
			close(arrived)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		http.Error(w, "too many sessions", http.StatusServiceUnavailable)
		return true
	})
	c := newTestConn(t, url)
	if _, err := c.Client(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}
	_, agent := newAgents(t).open(t)
	const calls = 3
	errs := make(chan error, calls)
	for range calls {
		go func() {
			_, err := c.CallTool(testkit.Context(t), []byte(`{"name":"recall","arguments":{}}`), CallHooks{Agent: agent})
			errs <- err
		}()
	}
	within(t, "the agent's session dial reaches the server", arrived)
	testkit.Eventually(t, "the other calls waiting on the dial", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		l := c.agents[agent.ID]
		return l != nil && l.dialing != nil && l.dialing.waiters == calls-1
	})
	close(release)
	for range calls {
		var e *Error
		if err := within(t, "each call on the refused dial ends", errs); !errors.As(err, &e) || e.Reason != ReasonUnavailable {
			t.Fatalf("a call on the refused session: %v; want %s", err, ReasonUnavailable)
		}
	}
	if n := initializes.Load(); n != 2 {
		t.Fatalf("the server was sent %d initializes; want 2 (the shared connection's, and the agent's one dial)", n)
	}
}

// countingAgent is s as a Conn sees it, counting the clean-ups the Conn
// has registered with s and not forgotten.
func countingAgent(s *session.Session) (*Agent, *atomic.Int32) {
	var live atomic.Int32
	return &Agent{ID: s.ID, AtEnd: func(f func()) (func(), bool) {
		forget, ok := s.AtEnd(f)
		if ok {
			live.Add(1)
		}
		return func() { live.Add(-1); forget() }, ok
	}}, &live
}

// A Conn that closes an agent's line before the agent session ends (the cap, a
// retired Conn) forgets the clean-up it registered with the agent session:
// they do not pile up, nor keep old Conns reachable, for as long as the agent
// session lives.
func TestClosedLinesForgetTheirAgentsCleanUp(t *testing.T) {
	st := bridgetest.NewStateful(t, false)
	as := newAgents(t)
	sa, _ := as.open(t)
	sb, _ := as.open(t)
	a, liveA := countingAgent(sa)
	b, _ := countingAgent(sb)

	c := newCappedConn(t, st.URL, 1)
	for range 3 { // a and b take the one session in turn
		callTool(t, c, `{"name":"recall","arguments":{}}`, CallHooks{Agent: a})
		callTool(t, c, `{"name":"recall","arguments":{}}`, CallHooks{Agent: b})
	}
	if n := liveA.Load(); n != 0 {
		t.Fatalf("after its line was closed at the cap 3 times, agent a holds %d of the Conn's clean-ups; want 0", n)
	}

	retired := newTestConn(t, st.URL)
	callTool(t, retired, `{"name":"recall","arguments":{}}`, CallHooks{Agent: a})
	if n := liveA.Load(); n != 1 {
		t.Fatalf("agent a holds %d clean-ups with a line open; want 1", n)
	}
	retired.Retire(ReasonRestarted, true)
	if n := liveA.Load(); n != 0 {
		t.Fatalf("agent a holds %d of a retired Conn's clean-ups; want 0", n)
	}
}

// A session dial that ends after its agent session did closes what it opened
// (a DELETE) within the Conn's clean-ups: a stopping replica's WaitClosed
// waits for it, and it counts against the bound on DELETEs at once.
func TestDialEndingAfterItsAgentSessionIsCleanedUp(t *testing.T) {
	url, _ := dualEraServer(t)
	initSeen, initGo := make(chan struct{}), make(chan struct{})
	deleteSeen, deleteGo := make(chan string, 1), make(chan struct{})
	var once sync.Once
	front := faultyFront(t, url, func(_ http.ResponseWriter, r *http.Request, body []byte) bool {
		wait := func(ch chan struct{}) {
			select {
			case <-ch:
			case <-r.Context().Done():
			}
		}
		switch {
		case bytes.Contains(body, []byte(`"method":"initialize"`)):
			close(initSeen) // the one agent's dial
			wait(initGo)
		case r.Method == http.MethodDelete:
			select {
			case deleteSeen <- r.Header.Get("Mcp-Session-Id"):
			default: // not the late dial's: none other is waited for
			}
			wait(deleteGo)
		}
		return false
	})
	t.Cleanup(func() { once.Do(func() { close(deleteGo) }) }) // before the front closes
	c := newTestConn(t, front)
	as := newAgents(t)
	s, agent := as.open(t)
	called := make(chan error, 1)
	go func() {
		_, err := c.CallTool(testkit.Context(t), []byte(`{"name":"echo","arguments":{"text":"x"}}`), CallHooks{Agent: agent})
		called <- err
	}()
	within(t, "the agent's session dial reaches the server", initSeen)
	as.End(s)
	close(initGo)
	var e *Error
	if err := within(t, "the call of the ended agent session ends", called); !errors.As(err, &e) || e.Reason != ReasonCancelled {
		t.Fatalf("the call of an agent session that ended during its dial: %v; want %s", err, ReasonCancelled)
	}
	if sid := within(t, "the late dial's session is DELETEd", deleteSeen); sid == "" {
		t.Fatal("the session the dial opened was DELETEd without its id")
	}
	select {
	case <-c.closing.idle():
		t.Fatal("the Conn's clean-ups are done while the DELETE of the late dial's session runs")
	default:
	}
	once.Do(func() { close(deleteGo) })
	if err := c.WaitClosed(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}
}
