package mcpbridge

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

const watched = "test://watched-resource"

// tap sits in front of a real server and records the requests the bridge
// sends it ("method uri"). It only observes: the server behind it answers.
type tap struct {
	mu    sync.Mutex
	calls []string
	gets  int // GET streams open now (a session's stream of notifications)
}

func newTap(t *testing.T, upstreamURL string) (string, *tap) {
	t.Helper()
	u, err := url.Parse(upstreamURL)
	if err != nil {
		t.Fatal(err)
	}
	tp := &tap{}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	proxy.FlushInterval = -1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				Method string `json:"method"`
				Params struct {
					URI string `json:"uri"`
					Ref struct {
						URI string `json:"uri"`
					} `json:"ref"` // completion/complete's
				} `json:"params"`
			}
			if json.Unmarshal(body, &m) == nil && m.Method != "" {
				tp.mu.Lock()
				tp.calls = append(tp.calls, m.Method+" "+cmp.Or(m.Params.URI, m.Params.Ref.URI))
				tp.mu.Unlock()
			}
		}
		if r.Method == http.MethodGet {
			tp.mu.Lock()
			tp.gets++
			tp.mu.Unlock()
			defer func() {
				tp.mu.Lock()
				tp.gets--
				tp.mu.Unlock()
			}()
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + u.Path, tp
}

func (tp *tap) openStreams() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.gets
}

func (tp *tap) count(call string) int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	n := 0
	for _, c := range tp.calls {
		if c == call {
			n++
		}
	}
	return n
}

// updates opens the session's GET stream with our own client and returns
// the URIs of the resource updates that arrive on it.
func updates(t *testing.T, c *client.Client) <-chan string {
	t.Helper()
	ch := make(chan string, 100)
	c.SetNotificationHandler(func(m *jsonrpc.Message) {
		if m.Method == "notifications/resources/updated" {
			uri, _ := rawjson.String(rawjson.Get(m.Params, "uri"))
			ch <- uri
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	opened := make(chan struct{})
	var once sync.Once
	go func() { _ = c.Conn().(*streamhttp.Conn).Listen(ctx, func() { once.Do(func() { close(opened) }) }) }()
	select {
	case <-opened:
	case <-time.After(5 * time.Second):
		t.Fatal("the GET stream did not open")
	}
	return ch
}

// next waits for the next update (the go-sdk everything-server sends one
// every 3s per subscribed session).
func next(t *testing.T, ch <-chan string, who string) string {
	t.Helper()
	select {
	case u := <-ch:
		return u
	case <-time.After(8 * time.Second):
		t.Fatalf("%s got no resource update", who)
		return ""
	}
}

func drain(ch <-chan string) (n int) {
	for {
		select {
		case <-ch:
			n++
		default:
			return n
		}
	}
}

func subscribePolicies() []v1alpha1.ToolPolicy {
	alice := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.*"))
	alice.Spec.Resources = []v1alpha1.ResourceRule{{Servers: []string{"everything"}, Decision: "allow"}}
	bob := toolPolicy("tools", "bob", []v1alpha1.Subject{sa("agents", "bob")}, rule("allow", "mcp.everything.*"))
	bob.Spec.Resources = []v1alpha1.ResourceRule{{Servers: []string{"everything"}, URIs: []string{"test://static*"}, Decision: "allow"}}
	return []v1alpha1.ToolPolicy{alice, bob}
}

// TestResourceSubscriptions: agents in sessions subscribe through the
// bridge to the go-sdk everything-server's watched resource, which it
// updates every 3 s for subscribed sessions.
func TestResourceSubscriptions(t *testing.T) {
	up := testpeers.GoEverything(t, false)
	tapURL, tp := newTap(t, up.URL)
	server := bridgetest.Published(t, "tools", "everything", tapURL, v1alpha1.ToolsSpec{})
	h := newHarness(t, []v1alpha1.MCPServer{server}, subscribePolicies(), nil)
	agentURI := BridgeURI("everything", watched)
	sub := json.RawMessage(`{"uri":"` + agentURI + `"}`)

	a, b, idle := h.connect(t, "alice-token", "/mcp", client.EraSession), h.connect(t, "alice-token", "/mcp", client.EraSession), h.connect(t, "alice-token", "/mcp", client.EraSession)
	var init struct {
		Resources struct {
			Subscribe bool `json:"subscribe"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(a.Capabilities().Raw, &init); err != nil || !init.Resources.Subscribe {
		t.Fatalf("initialize must offer resources.subscribe: %s", a.Capabilities().Raw)
	}
	ua, ub, uidle := updates(t, a), updates(t, b), updates(t, idle)
	for _, c := range []*client.Client{a, b} {
		if _, err := c.Call(testkit.Context(t), "resources/subscribe", sub); err != nil {
			t.Fatalf("resources/subscribe: %v", err)
		}
	}
	if n := tp.count("resources/subscribe " + watched); n != 1 {
		t.Fatalf("the server got %d subscriptions for two agent sessions, want 1", n)
	}
	if got := next(t, ua, "session a"); got != agentURI {
		t.Fatalf("session a got an update for %q, want the URI in its view %q", got, agentURI)
	}
	if got := next(t, ub, "session b"); got != agentURI {
		t.Fatalf("session b got an update for %q, want %q", got, agentURI)
	}
	if n := drain(uidle); n != 0 {
		t.Fatalf("a session that did not subscribe got %d updates", n)
	}

	// Policy: bob may read only test://static*, so he may not subscribe to
	// the watched resource, on either endpoint.
	bobMCP := h.connect(t, "bob-token", "/mcp", client.EraSession)
	if _, err := bobMCP.Call(testkit.Context(t), "resources/subscribe", sub); rpcCode(err) != CodeDenied {
		t.Fatalf("a subscription the policy denies must be refused with %d, got %v", CodeDenied, err)
	}
	bobServer := h.connect(t, "bob-token", "/servers/everything/mcp", client.EraSession)
	if _, err := bobServer.Call(testkit.Context(t), "resources/subscribe", json.RawMessage(`{"uri":"`+watched+`"}`)); rpcCode(err) != CodeDenied {
		t.Fatalf("a subscription the policy denies must be refused on the server's endpoint too, got %v", err)
	}

	// a leaves: b still holds the upstream subscription.
	if _, err := a.Call(testkit.Context(t), "resources/unsubscribe", sub); err != nil {
		t.Fatalf("resources/unsubscribe: %v", err)
	}
	// An update the server sent before a left may still be on its way to
	// a, on a's own stream: b's copies say nothing of it. Two updates to b
	// (the server sends one every 3 s) give it that long to land.
	next(t, ub, "session b after a left")
	next(t, ub, "session b after a left")
	drain(ua)
	next(t, ub, "session b after a left")
	if n := drain(ua); n != 0 {
		t.Fatalf("session a got %d updates after it unsubscribed", n)
	}
	if n := tp.count("resources/unsubscribe " + watched); n != 0 {
		t.Fatalf("the server was unsubscribed while session b still wants updates")
	}
	// b ends its session (DELETE): nobody is left, the server is told.
	b.Close()
	testkit.Eventually(t, "the server is unsubscribed when the last session ends", func() bool {
		return tp.count("resources/unsubscribe "+watched) == 1
	})

	// The server's own endpoint shows upstream URIs.
	d := h.connect(t, "alice-token", "/servers/everything/mcp", client.EraSession)
	ud := updates(t, d)
	if _, err := d.Call(testkit.Context(t), "resources/subscribe", json.RawMessage(`{"uri":"`+watched+`"}`)); err != nil {
		t.Fatalf("resources/subscribe on the server's endpoint: %v", err)
	}
	if got := next(t, ud, "session d"); got != watched {
		t.Fatalf("on /servers/everything/mcp the update must name the upstream URI, got %q", got)
	}

	// A new pod: the connection is retired, and the subscription is made
	// again on the next one without any agent asking.
	moved := server.DeepCopy()
	moved.Status.Endpoint.PodName = "pod-2"
	h.reg.Update(routes.Build([]v1alpha1.MCPServer{*moved}), target)
	testkit.Eventually(t, "the subscription is made again on the new connection", func() bool {
		return tp.count("resources/subscribe "+watched) == 3
	})
	drain(ud)
	if got := next(t, ud, "session d after the new pod"); got != watched {
		t.Fatalf("after the new pod, got %q", got)
	}

	var subscribed int
	for _, ev := range h.events(t) {
		if ev["type"] == "mcp.resource.requested" && ev["method"] == "resources/subscribe" && ev["uri"] == watched {
			subscribed++
		}
	}
	if subscribed != 3 {
		t.Errorf("audit: %d subscriptions recorded as mcp.resource.requested, want 3 (a, b, d)", subscribed)
	}
}

// TestTypeScriptAgentSubscribes: the official TypeScript SDK client, as the
// agent, subscribes through the bridge; its SDK opens the session's GET
// stream itself. Another agent's session, and a caller whose policy denies
// the resource, get nothing.
func TestTypeScriptAgentSubscribes(t *testing.T) {
	up := testpeers.GoEverything(t, false)
	tapURL, tp := newTap(t, up.URL)
	server := bridgetest.Published(t, "tools", "everything", tapURL, v1alpha1.ToolsSpec{})
	h := newHarness(t, []v1alpha1.MCPServer{server}, subscribePolicies(), nil)
	agentURI := BridgeURI("everything", watched)

	other := startTSAgent(t, h.url+"/mcp", "alice-token", tsPlan{Steps: []tsStep{{Op: "wait", WaitMs: 9000}}})
	denied := startTSAgent(t, h.url+"/mcp", "bob-token", tsPlan{Steps: []tsStep{{Op: "subscribe", Name: agentURI}, {Op: "wait", WaitMs: 7000}}})
	res := runTSAgent(t, h.url+"/mcp", "alice-token", tsPlan{Steps: []tsStep{
		{Op: "subscribe", Name: agentURI},
		{Op: "wait", WaitMs: 7000},
		{Op: "unsubscribe", Name: agentURI},
		{Op: "wait", WaitMs: 500},
		{Op: "wait", WaitMs: 4000},
	}})
	if s := res.Steps[0]; !s.OK {
		t.Fatalf("subscribe: %s", s.Error.Message)
	}
	if u := res.Steps[1].Updates; len(u) < 1 || u[0] != agentURI {
		t.Errorf("the subscribed agent must get updates naming %q, got %q", agentURI, u)
	}
	if s := res.Steps[2]; !s.OK {
		t.Fatalf("unsubscribe: %s", s.Error.Message)
	}
	if u := res.Steps[4].Updates; len(u) != 0 {
		t.Errorf("updates after unsubscribe: %q", u)
	}
	if u := other().Steps[0].Updates; len(u) != 0 {
		t.Errorf("an agent that did not subscribe got updates: %q", u)
	}
	d := denied()
	if s := d.Steps[0]; s.OK || s.Error.Code != CodeDenied {
		t.Errorf("a subscription the policy denies must be refused with %d, got %+v", CodeDenied, s)
	}
	if u := d.Steps[1].Updates; len(u) != 0 {
		t.Errorf("the refused agent got updates: %q", u)
	}
	testkit.Eventually(t, "the agent's unsubscribe reaches the server", func() bool {
		return tp.count("resources/subscribe "+watched) == 1 && tp.count("resources/unsubscribe "+watched) == 1
	})
}

// TestStatelessSubscriptions: the 2026-07-28 revision has no
// resources/subscribe and no GET stream. Agents send subscriptions/listen
// and get the acknowledgement and the updates on its response stream; a
// stateless server is subscribed to the same way. Both directions here: a
// stateless agent, and a session agent whose server is stateless.
func TestStatelessSubscriptions(t *testing.T) {
	up := testpeers.GoEverything(t, true)
	tapURL, tp := newTap(t, up.URL)
	server := bridgetest.Published(t, "tools", "everything", tapURL, v1alpha1.ToolsSpec{})
	h := newHarness(t, []v1alpha1.MCPServer{server}, subscribePolicies(), nil)
	agentURI := BridgeURI("everything", watched)

	// A session-era agent; the bridge holds the subscription upstream with
	// a subscriptions/listen stream.
	a := h.connect(t, "alice-token", "/mcp", client.EraSession)
	ua := updates(t, a)
	if _, err := a.Call(testkit.Context(t), "resources/subscribe", json.RawMessage(`{"uri":"`+agentURI+`"}`)); err != nil {
		t.Fatalf("resources/subscribe with a stateless server: %v", err)
	}
	if got := next(t, ua, "session a"); got != agentURI {
		t.Fatalf("got an update for %q, want %q", got, agentURI)
	}
	if n := tp.count("subscriptions/listen "); n != 1 {
		t.Fatalf("the server got %d subscriptions/listen requests, want 1", n)
	}

	// A stateless agent listens for the watched resource and for one its
	// policy does not allow (it is left out of the acknowledgement).
	s := h.connect(t, "alice-token", "/mcp", client.EraStateless)
	if _, err := s.Call(testkit.Context(t), "resources/subscribe", json.RawMessage(`{"uri":"`+agentURI+`"}`)); rpcCode(err) != jsonrpc.CodeMethodNotFound {
		t.Fatalf("resources/subscribe does not exist in 2026-07-28: got %v", err)
	}
	bob := h.connect(t, "bob-token", "/mcp", client.EraStateless)
	type note struct{ method, params string }
	listen := func(c *client.Client, uris ...string) (<-chan note, context.CancelFunc) {
		ch := make(chan note, 100)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		ctx = streamhttp.WithCallNotifications(ctx, func(m *jsonrpc.Message) { ch <- note{m.Method, string(m.Params)} })
		params, _ := json.Marshal(map[string]any{"notifications": map[string]any{"resourceSubscriptions": uris, "toolsListChanged": true}})
		go func() { _, _ = c.Call(ctx, "subscriptions/listen", params) }()
		t.Cleanup(cancel)
		return ch, cancel
	}
	wait := func(ch <-chan note, who string) note {
		t.Helper()
		select {
		case n := <-ch:
			return n
		case <-time.After(8 * time.Second):
			t.Fatalf("%s got nothing", who)
			return note{}
		}
	}
	ls, stop := listen(s, agentURI, BridgeURI("elsewhere", "x://y"))
	ack := wait(ls, "the stateless agent")
	subID := regexp.MustCompile(`"_meta":\{"io.modelcontextprotocol/subscriptionId":(\d+)\}`).FindStringSubmatch(ack.params)
	if ack.method != "notifications/subscriptions/acknowledged" || subID == nil ||
		ack.params != `{"notifications":{"resourceSubscriptions":["`+agentURI+`"]},`+subID[0]+`}` {
		t.Fatalf("the first message must acknowledge what was accepted (the watched resource only; no list changes) with the subscription id, got %s %s", ack.method, ack.params)
	}
	if u := wait(ls, "the stateless agent"); u.method != "notifications/resources/updated" || u.params != `{"uri":"`+agentURI+`",`+subID[0]+`}` {
		t.Fatalf("updates carry the agent's URI and the subscription id, got %s %s", u.method, u.params)
	}
	lb, _ := listen(bob, agentURI)
	if ack := wait(lb, "bob"); !strings.HasPrefix(ack.params, `{"notifications":{"resourceSubscriptions":[]},`) {
		t.Fatalf("a URI the policy denies is not acknowledged, got %s", ack.params)
	}
	// Two agents, one upstream listen; closing the stream ends the
	// stateless agent's subscription.
	if n := tp.count("subscriptions/listen "); n != 1 {
		t.Fatalf("the server got %d subscriptions/listen requests for one URI, want 1", n)
	}
	stop()
	next(t, ua, "session a")
	select {
	case n := <-lb:
		t.Fatalf("bob got %s %s", n.method, n.params)
	default:
	}
	// The last subscriber leaves: the upstream listen stream is closed
	// (a new one would name no URI, so none is opened).
	if _, err := a.Call(testkit.Context(t), "resources/unsubscribe", json.RawMessage(`{"uri":"`+agentURI+`"}`)); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the bridge holds no subscription upstream", func() bool { return len(h.b.subs.URIs("everything")) == 0 })
	drain(ua)
	select {
	case u := <-ua:
		t.Fatalf("an update after the last unsubscribe: %s", u)
	case <-time.After(4 * time.Second):
	}
}

// TestRotationMovesSubscriptions: when a server's credentials rotate, the
// drained connection gives its resource subscription up at once and the new
// one holds it: the server is subscribed once per connection, and the agent
// does not get each update twice. (The drained connection used to
// re-establish it with the old credentials, forever.)
func TestRotationMovesSubscriptions(t *testing.T) {
	up := testpeers.GoEverything(t, false)
	tapURL, tp := newTap(t, up.URL)
	server := bridgetest.Published(t, "tools", "everything", tapURL, v1alpha1.ToolsSpec{})
	h := newHarness(t, []v1alpha1.MCPServer{server}, subscribePolicies(), nil)
	a := h.connect(t, "alice-token", "/mcp", client.EraSession)
	ua := updates(t, a)
	if _, err := a.Call(testkit.Context(t), "resources/subscribe", json.RawMessage(`{"uri":"`+BridgeURI("everything", watched)+`"}`)); err != nil {
		t.Fatal(err)
	}
	next(t, ua, "alice")
	_, before, _ := h.reg.Server("everything")
	h.reg.Update(routes.Build([]v1alpha1.MCPServer{server}), func(s *routes.Server) (upstream.Target, error) {
		return upstream.Target{Namespace: s.Namespace, Name: s.Name, URL: s.URL, Pod: s.Pod, Credentials: "rotated"}, nil
	})
	if _, after, _ := h.reg.Server("everything"); after == before {
		t.Fatal("the rotation kept the connection")
	}
	testkit.Eventually(t, "the new connection subscribes", func() bool { return tp.count("resources/subscribe "+watched) == 2 })
	// The drained connection's stream ends when it closes (it used to
	// subscribe again right away, and forever): one stream is left, the
	// new connection's.
	testkit.Eventually(t, "the drained connection's stream ends", func() bool { return tp.openStreams() == 1 })
	// Updates go on through the new connection's subscription alone.
	drain(ua)
	next(t, ua, "alice after the rotation")
	next(t, ua, "alice after the rotation")
	if n, streams := tp.count("resources/subscribe "+watched), tp.openStreams(); n != 2 || streams != 1 {
		t.Fatalf("resources/subscribe reached the server %d times with %d streams open, want 2 (the first connection, then its replacement) and 1", n, streams)
	}
}

// TestUpdatedInServerSpelling: a server may name the resource in its
// update otherwise than the agent subscribed to it (upper-case scheme and
// host here); the subscription is stored under the canonical URI, so the
// update is looked up under it too. The five updates are handed to the hub
// as the upstream connection would; the server's own, every 3 s, add at
// most one in the window.
func TestUpdatedInServerSpelling(t *testing.T) {
	up := testpeers.GoEverything(t, false)
	server := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	h := newHarness(t, []v1alpha1.MCPServer{server}, subscribePolicies(), nil)
	agentURI := BridgeURI("everything", watched)
	a := h.connect(t, "alice-token", "/mcp", client.EraSession)
	ua := updates(t, a)
	if _, err := a.Call(testkit.Context(t), "resources/subscribe", json.RawMessage(`{"uri":"`+agentURI+`"}`)); err != nil {
		t.Fatalf("resources/subscribe: %v", err)
	}
	drain(ua)
	for range 5 {
		h.b.subs.Updated("everything", json.RawMessage(`{"uri":"TEST://Watched-Resource"}`))
	}
	for i := range 5 {
		select {
		case got := <-ua:
			if got != agentURI {
				t.Fatalf("update %d names %q, want the agent's view %q", i, got, agentURI)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("got %d of 5 updates the server sent in its own spelling", i)
		}
	}
}

// TestListenThatAcceptedNothingEnds: a subscriptions/listen whose
// subscriptions were all refused has nothing to wait for: it acknowledges none
// and ends at once, giving back its request slots rather than holding them
// until the client goes away. Raw HTTP: the stream's end is what is checked.
func TestListenThatAcceptedNothingEnds(t *testing.T) {
	up := testpeers.GoEverything(t, false)
	server := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	h := newHarness(t, []v1alpha1.MCPServer{server}, subscribePolicies(), nil)
	// bob may read test://static* only: the watched resource is refused.
	body := `{"jsonrpc":"2.0","id":5,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["` + BridgeURI("everything", watched) + `"]},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	req, _ := http.NewRequest(http.MethodPost, h.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer bob-token")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	stream, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("a listen that accepted nothing did not end: %v (read so far: %q)", err, stream)
	}
	if !strings.Contains(string(stream), `"resourceSubscriptions":[]`) || !strings.Contains(string(stream), `"id":5,"result"`) {
		t.Fatalf("want an empty acknowledgement, then the answer: %q", stream)
	}
	testkit.Eventually(t, "the listen's slots are given back", func() bool {
		requests, _ := h.b.limits.requests.Used("")
		_, bob := h.b.limits.callers.Used("system:serviceaccount:agents:bob")
		return requests == 0 && bob == 0
	})
}
