package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/signed"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// seenCall is what a server was sent with one tools/call.
type seenCall struct{ version, session string }

// dualEraServer is a real MCP server that speaks both eras (mcp-go's, with
// its defaults), with a tool that echoes and one that asks the client to
// confirm mid-call (in the multi round-trip style: an input_required result
// in the stateless era, an elicitation/create on the call's stream in a
// session). It records the protocol version and session of each tools/call.
func dualEraServer(t *testing.T) (url string, calls func() []seenCall) {
	s := mcpgoserver.NewMCPServer("dual", "1", mcpgoserver.WithElicitation())
	s.AddTool(mcpgo.NewTool("echo", mcpgo.WithString("text")), func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText(req.GetString("text", "")), nil
	})
	s.AddTool(mcpgo.NewTool("confirm"), func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		if answer := mcpgoserver.ElicitationResponse(req.Params.InputResponses, "ok"); answer != nil {
			return mcpgo.NewToolResultText("answered " + string(answer.Action)), nil
		}
		return mcpgoserver.NewInputRequestBuilder("").Elicit("ok", mcpgo.ElicitationParams{
			Message: "Go ahead?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}},
		}).ToolResult(), nil
	})
	var mu sync.Mutex
	var seen []seenCall
	h := mcpgoserver.NewStreamableHTTPServer(s)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct{ Method string }
		if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" {
			mu.Lock()
			seen = append(seen, seenCall{r.Header.Get("MCP-Protocol-Version"), r.Header.Get("Mcp-Session-Id")})
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", func() []seenCall {
		mu.Lock()
		defer mu.Unlock()
		out := seen
		seen = nil
		return out
	}
}

func newTestConn(t *testing.T, url string) *Conn {
	c := New(Target{Namespace: "ns", Name: "s", URL: url}, Options{ClientCapabilities: map[string]any{"elicitation": map[string]any{}}})
	t.Cleanup(c.Close)
	return c
}

// agents is the bridge's real session manager, whose sessions stand for
// the agents calling through a Conn.
type agents struct {
	*session.Manager
	clock *clocktesting.FakeClock
}

func newAgents(t *testing.T) *agents {
	sealer, err := signed.New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	a := &agents{clock: clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0))}
	a.Manager = session.NewManager(sealer, session.Options{IdleTimeout: time.Minute, Now: a.clock.Now})
	return a
}

// open starts an agent session and returns it as a Conn sees it.
func (a *agents) open(t *testing.T) (*session.Session, *Agent) {
	t.Helper()
	s, err := a.Open(session.Claims{Subject: "system:serviceaccount:agents:a", Version: client.LatestLegacy})
	if err != nil {
		t.Fatal(err)
	}
	return s, &Agent{ID: s.ID, AtEnd: s.AtEnd}
}

// agentSession is the upstream session id of agent's line, "" for none.
func agentSession(c *Conn, agent *Agent) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.agents[agent.ID]; l != nil && l.cli != nil {
		return l.cli.Conn().(*streamhttp.Conn).SessionID()
	}
	return ""
}

func callTool(t *testing.T, c *Conn, params string, hooks CallHooks) string {
	t.Helper()
	ctx := testkit.Context(t)
	res, err := c.CallTool(ctx, json.RawMessage(params), hooks)
	if err != nil {
		t.Fatalf("tools/call %s: %v", params, err)
	}
	return string(res)
}

// A server that speaks both eras is called in the agent's era: a session
// for a session-era agent's call, the stateless era for the rest.
func TestDualEraServerIsCalledInTheAgentsEra(t *testing.T) {
	url, calls := dualEraServer(t)
	c := newTestConn(t, url)
	_, agent := newAgents(t).open(t)

	for i := range 2 {
		if res := callTool(t, c, `{"name":"echo","arguments":{"text":"s"}}`, CallHooks{Agent: agent}); !strings.Contains(res, `"s"`) {
			t.Fatalf("session-era agent's call %d answered %s", i, res)
		}
	}
	seen := calls()
	if len(seen) != 2 || seen[0].version != client.LatestLegacy || seen[0].session == "" || seen[1].session != seen[0].session {
		t.Fatalf("a session-era agent's calls reached the server as %+v; want two calls in one %s session", seen, client.LatestLegacy)
	}

	if res := callTool(t, c, `{"name":"echo","arguments":{"text":"x"}}`, CallHooks{}); !strings.Contains(res, `"x"`) {
		t.Fatalf("stateless agent's call answered %s", res)
	}
	if seen := calls(); len(seen) != 1 || seen[0].version != client.StatelessVersion || seen[0].session != "" {
		t.Fatalf("a stateless agent's call reached the server as %+v; want the %s era without a session", seen, client.StatelessVersion)
	}
}

// Asked mid-call, a dual-era server reaches each agent the way its era
// allows: on the call's stream in a session (answered by the Request hook),
// as an input_required result in the stateless era (for the bridge to pass
// on).
func TestDualEraServerAsksMidCallInEitherEra(t *testing.T) {
	url, calls := dualEraServer(t)
	c := newTestConn(t, url)

	_, agent := newAgents(t).open(t)
	var asked []string
	hooks := CallHooks{Agent: agent, Request: func(_ context.Context, req *jsonrpc.Message) *jsonrpc.Message {
		asked = append(asked, req.Method)
		return jsonrpc.NewResult(req.ID, json.RawMessage(`{"action":"accept","content":{}}`))
	}}
	if res := callTool(t, c, `{"name":"confirm","arguments":{}}`, hooks); !strings.Contains(res, "answered accept") {
		t.Fatalf("session-era call answered %s; want the server to have had the agent's answer", res)
	}
	if len(asked) != 1 || asked[0] != "elicitation/create" {
		t.Fatalf("the server's questions on the session call: %v; want one elicitation/create", asked)
	}
	if seen := calls(); len(seen) != 1 || seen[0].session == "" || seen[0].session != agentSession(c, agent) {
		t.Fatalf("the call reached the server as %+v; want it in the agent's own session %q, asked on its stream", seen, agentSession(c, agent))
	}

	if res := callTool(t, c, `{"name":"confirm","arguments":{}}`, CallHooks{}); !strings.Contains(res, `"input_required"`) {
		t.Fatalf("stateless call answered %s; want an input_required result", res)
	}
}

// A server that speaks only the session era (the go-sdk everything-server)
// gives each session-era agent session a session of its own; a stateless
// agent's calls take the shared session.
func TestSessionOnlyServerGivesEachAgentASession(t *testing.T) {
	srv := testpeers.GoEverything(t, false)
	c := newTestConn(t, srv.URL)
	as := newAgents(t)
	_, a := as.open(t)
	_, b := as.open(t)
	for _, agent := range []*Agent{a, b, nil} {
		if res := callTool(t, c, `{"name":"test_simple_text","arguments":{}}`, CallHooks{Agent: agent}); !strings.Contains(res, "text") {
			t.Fatalf("call (agent %v) answered %s", agent, res)
		}
	}
	shared, err := c.Client(testkit.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	sharedID := shared.Conn().(*streamhttp.Conn).SessionID()
	sa, sb := agentSession(c, a), agentSession(c, b)
	if shared.Era() != client.EraSession || sharedID == "" || sa == "" || sb == "" || sa == sb || sa == sharedID || sb == sharedID {
		t.Fatalf("sessions to a session-only server: shared %q (%s), agents %q and %q; want three distinct sessions", sharedID, shared.Era(), sa, sb)
	}
	if n := c.AgentSessions(); n != 2 {
		t.Fatalf("the Conn holds %d agent sessions, want 2 (the stateless agent has none)", n)
	}
}

// A server that lists session-era versions but keeps no session (the
// go-sdk's stateless mode answers initialize without a session id, and can
// ask nothing on a call's stream) is left in the stateless era: no agent
// session is dialled for sessionsRetry after one was answered without a
// session id.
func TestServerWithoutSessionsStaysStateless(t *testing.T) {
	srv := testpeers.GoEverything(t, true)
	c := newTestConn(t, srv.URL)
	_, agent := newAgents(t).open(t)
	for range 2 {
		if res := callTool(t, c, `{"name":"test_simple_text","arguments":{}}`, CallHooks{Agent: agent}); !strings.Contains(res, "text") {
			t.Fatalf("call answered %s", res)
		}
	}
	shared, err := c.Client(testkit.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if keeps, err := c.keepsSessions(testkit.Context(t)); shared.Era() != client.EraStateless || c.AgentSessions() != 0 || keeps || err != nil {
		t.Fatalf("connections to a stateless-only server: shared %s, %d agent sessions, sessions dialled: %v (%v); want the shared stateless connection alone", shared.Era(), c.AgentSessions(), keeps, err)
	}
}

// The session a session-era agent's call takes can end under it (the server
// expired or forgot it); the server refuses the call unrun (404), and a new
// session carries it, once: the agent does not get mcp_server_unstable. The
// 404 is a fake in front of the real server: mcp-go's server keeps a session
// it was asked to end, so the expiry cannot be produced on demand.
func TestEndedSessionCarriesTheCallOnANewOne(t *testing.T) {
	url, calls := dualEraServer(t)
	var forget sync.Map // session ids the fake says it no longer knows
	front := faultyFront(t, url, func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && r.Method == http.MethodPost {
			if _, gone := forget.Load(sid); gone {
				http.Error(w, "session not found", http.StatusNotFound)
				return true
			}
		}
		return false
	})
	c := newTestConn(t, front)
	_, agent := newAgents(t).open(t)
	callTool(t, c, `{"name":"echo","arguments":{"text":"one"}}`, CallHooks{Agent: agent})
	first := calls()
	if len(first) != 1 || first[0].session == "" {
		t.Fatalf("the first call reached the server as %+v, want it in a session", first)
	}
	forget.Store(first[0].session, true)
	if res := callTool(t, c, `{"name":"echo","arguments":{"text":"two"}}`, CallHooks{Agent: agent}); !strings.Contains(res, `"two"`) {
		t.Fatalf("the call after its session ended answered %s", res)
	}
	if seen := calls(); len(seen) != 1 || seen[0].session == "" || seen[0].session == first[0].session || seen[0].session != agentSession(c, agent) {
		t.Fatalf("the call reached the server as %+v; want it once, in a new session of the agent's own (%q)", seen, agentSession(c, agent))
	}
}

// faultyFront is a fake in front of a real server at url, for faults the
// real one cannot produce on demand: fault answers a request itself (true)
// or lets it through (false). It returns the front's MCP URL.
func faultyFront(t *testing.T, url string, fault func(w http.ResponseWriter, r *http.Request, body []byte) bool) string {
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !fault(w, r, body) {
			relay(w, r, url, body)
		}
	}))
	t.Cleanup(front.Close)
	return front.URL + "/mcp"
}

// relay passes the request r (its body read into body) to the server at
// url and its answer back to w, but for the answer's headers named in
// strip.
func relay(w http.ResponseWriter, r *http.Request, url string, body []byte, strip ...string) {
	proxy, _ := http.NewRequestWithContext(r.Context(), r.Method, url, bytes.NewReader(body))
	proxy.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(proxy)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		if !slices.Contains(strip, k) {
			w.Header()[k] = v
		}
	}
	w.WriteHeader(resp.StatusCode)
	// The headers go at once: a GET stream's client waits for them before
	// any event.
	_ = http.NewResponseController(w).Flush()
	_, _ = io.Copy(w, resp.Body)
}

// switchingFront is a load balancer in front of the real server at before
// that sends everything to the one at after once switched is set: a
// remote server upgraded or replaced behind its URL. It records the
// session of each tools/call it passes on. With forgetSessions, once
// switched, a request in a session is refused as unknown (404): the
// go-sdk's stateless mode serves it regardless, so the refusal a server
// that keeps no sessions may give is a fake.
func switchingFront(t *testing.T, before, after string, forgetSessions bool) (front string, switched *atomic.Bool, calls func() []string) {
	switched = &atomic.Bool{}
	var mu sync.Mutex
	var seen []string
	front = faultyFront(t, before, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if bytes.Contains(body, []byte(`"method":"tools/call"`)) {
			mu.Lock()
			seen = append(seen, r.Header.Get("Mcp-Session-Id"))
			mu.Unlock()
		}
		if !switched.Load() {
			return false
		}
		if forgetSessions && r.Header.Get("Mcp-Session-Id") != "" {
			http.Error(w, "session not found", http.StatusNotFound)
			return true
		}
		relay(w, r, after, body)
		return true
	})
	return front, switched, func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := seen
		seen = nil
		return out
	}
}

// A server replaced behind its URL by one of the other era (the go-sdk
// everything-server, stateless and session-only) is learned again on the
// refusal that shows it, and the refused call is sent again, once: from
// stateless to session-only, calls refused with -32022 (unsupported protocol
// version) go on in sessions, a session-era agent's in its own; from
// session-only to stateless, the agent session with a live upstream session
// has its call refused unrun on it (404), its new session's initialize is
// answered without a session id, the Conn learns the server again and the call
// goes on the shared connection; no agent holds a session then, nor dials one
// for sessionsRetry. A Conn that kept what its first dial learned would fail
// every call (or every new agent session's) until the MCPServer changed.
func TestServerChangedBehindItsURLIsLearnedAgain(t *testing.T) {
	for _, tc := range []struct {
		name            string
		statelessBefore bool
		want            int32
	}{
		{"stateless to session-only", true, modeSessionOnly},
		// The go-sdk's stateless mode lists session-era versions (both
		// eras), and answers an agent's initialize without a session id.
		{"session-only to stateless", false, modeDualEra},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, after := testpeers.GoEverything(t, tc.statelessBefore), testpeers.GoEverything(t, !tc.statelessBefore)
			front, switched, calls := switchingFront(t, before.URL, after.URL, !tc.statelessBefore)
			c := newTestConn(t, front)
			as := newAgents(t)
			c.clock = as.clock.Now
			_, a := as.open(t)
			_, b := as.open(t)
			const call = `{"name":"test_simple_text","arguments":{}}`
			callTool(t, c, call, CallHooks{Agent: a})
			callTool(t, c, call, CallHooks{})
			calls()

			// Past the interval in which a relearn (or an agent's session
			// dial) would not be tried again.
			as.clock.Step(sessionsRetry)
			switched.Store(true)
			// a first: an agent with a live line (to a session-only server
			// before) has its call refused unrun on it.
			for _, agent := range []*Agent{a, b, nil} {
				if res := callTool(t, c, call, CallHooks{Agent: agent}); !strings.Contains(res, "simple text") {
					t.Fatalf("a call after the server changed answered %s", res)
				}
			}
			if m := c.mode.Load(); m != tc.want {
				t.Fatalf("the Conn's mode is %s; want %s", modeNames[m], modeNames[tc.want])
			}
			if keeps, _ := c.keepsSessions(testkit.Context(t)); tc.want == modeDualEra && (keeps || agentSession(c, a) != "" || agentSession(c, b) != "") {
				t.Fatalf("agents hold upstream sessions %q and %q (new ones dialled: %v) to a server that keeps none now; want none", agentSession(c, a), agentSession(c, b), keeps)
			}
			seen := calls()
			if tc.want == modeSessionOnly {
				// a's and b's calls went each in its own session; the
				// stateless agent's was refused on the shared stateless
				// connection, then sent again in the new shared session.
				shared, err := c.Client(testkit.Context(t))
				if err != nil {
					t.Fatal(err)
				}
				sa, sb, sharedID := agentSession(c, a), agentSession(c, b), shared.Conn().(*streamhttp.Conn).SessionID()
				if want := []string{sa, sb, "", sharedID}; !slices.Equal(seen, want) || sa == "" || sb == "" || sharedID == "" {
					t.Fatalf("the server was sent calls in sessions %q; want %q: a's and b's each in its own, the stateless agent's refused without one, then sent in the shared one", seen, want)
				}
			}
		})
	}
}
