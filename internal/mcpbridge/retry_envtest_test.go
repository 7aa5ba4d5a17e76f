package mcpbridge

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/k8s/apiretry"
	mcpclient "github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// apiPath passes TCP connections to envtest's API server and can be cut
// and restored on the same address: to the bridge behind it the API server
// is gone (connections closed, new ones refused), as while it restarts.
// The API server itself keeps running, so the test reads and decides
// through its own direct client meanwhile.
type apiPath struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]struct{}
}

// openAPIPath starts a path to the API server of cfg and returns it with
// a copy of cfg that goes through it.
func openAPIPath(t *testing.T, cfg *rest.Config) (*apiPath, *rest.Config) {
	t.Helper()
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Host == "" {
		t.Fatalf("the API server's address %q: %v", cfg.Host, err)
	}
	p := &apiPath{target: u.Host, conns: map[net.Conn]struct{}{}}
	p.restore(t)
	t.Cleanup(p.cut)
	through := rest.CopyConfig(cfg)
	through.Host = "https://" + p.addr
	return p, through
}

// restore listens again (on the first call, on a free port).
func (p *apiPath) restore(t *testing.T) {
	t.Helper()
	addr := p.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("while opening the path to the API server: %v", err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pass(in)
		}
	}()
}

func (p *apiPath) pass(in net.Conn) {
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		in.Close()
		return
	}
	p.mu.Lock()
	p.conns[in], p.conns[out] = struct{}{}, struct{}{}
	p.mu.Unlock()
	go func() { _, _ = io.Copy(out, in); out.Close() }()
	_, _ = io.Copy(in, out)
	in.Close()
}

// cut closes the listener and every connection through it.
func (p *apiPath) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// TestAnswersWhileTheAPIServerIsAway: the whole bridge reaches the API
// server over a path the test cuts. While it is cut, an asked call whose
// ToolApproval cannot be created, and an allow_once retry whose single use
// cannot be recorded, are refused saying the call did not run and may be
// sent again after the API server's usual time back; neither reaches the
// server. Once the path is back, each, sent again as it was, runs once.
func TestAnswersWhileTheAPIServerIsAway(t *testing.T) {
	ns := freshNamespace("api-away")
	direct, _ := startAPIServer(t)
	path, through := openAPIPath(t, direct)
	rt, bridgeURL, k, _ := startRuntimeWith(t, func(o *Options) {
		o.Rest, o.ToolApprovals, o.OnceNamespace = through, true, ns
	}, ns)
	fwd := peer(t)
	closeUpstreams(t, rt)
	apply(t, k, bridgetest.Published(t, ns, "everything", fwd.URL, v1alpha1.ToolsSpec{}))
	people := toolPolicy(ns, "people-decide", []v1alpha1.Subject{sa("agents", "alice")}, rule("ask", "mcp.everything.test_image_content"))
	people.Spec.Approval = approveOnce(time.Minute, v1alpha1.ChannelToolApproval)
	createPolicy(t, k, people)
	agentDecides := toolPolicy(ns, "agent-decides", []v1alpha1.Subject{sa("agents", "alice")}, rule("ask", "mcp.everything.test_simple_text"))
	agentDecides.Spec.Approval = approveOnce(time.Minute, v1alpha1.ChannelElicitation)
	createPolicy(t, k, agentDecides)

	// Our session-era client declares no elicitation: a person is asked.
	c := connectTo(t, bridgeURL, "alice-token", mcpclient.EraSession)
	testkit.Eventually(t, "the bridge lists the asked tools", func() bool {
		names := strings.Join(listNames(t, c), ",")
		return strings.Contains(names, "mcp.everything.test_image_content") && strings.Contains(names, "mcp.everything.test_simple_text")
	})
	// A 2026-07-28 agent is asked itself; its retry carries allow_once.
	params := `"name":"mcp.everything.test_simple_text"`
	state := resultString(statelessPost(t, bridgeURL, "alice-token", "tools/call", params), "requestState")
	if state == "" {
		t.Fatal("the 2026-07-28 call must be answered input_required")
	}
	allowOnce := params + `,"requestState":` + string(mustJSON(state)) + `,"inputResponses":{"approval":{"action":"accept","content":{"decision":"allow_once"}}}`

	// A bridge that reviews tokens with the API server behind the path.
	reviews, err := kubernetes.NewForConfig(through)
	if err != nil {
		t.Fatal(err)
	}
	reviewing := newHarness(t, nil, nil, func(c *Config) {
		c.Auth = &authn.TokenReview{Reviews: reviews.AuthenticationV1().TokenReviews(), MaxReviews: 2}
	})

	path.cut()
	waitMs := apiretry.Wait.Milliseconds()

	status, body, hdr := postBody(t, reviewing.url+"/mcp", "a-token-never-reviewed", "", initBody, nil)
	if d, ok := retryDataOf(answerError(body)); status != http.StatusServiceUnavailable || hdr.Get("Retry-After") != "1" || !ok ||
		d.Reason != reasonAuthUnavailable || !d.says(true, 1000, 1000) {
		t.Errorf("a token that could not be reviewed while the API server is away: HTTP %d (Retry-After %q) %s; want 503, authentication_unavailable, retryable, retryAfterMs 1000",
			status, hdr.Get("Retry-After"), body)
	}

	_, err = c.CallTool(testkit.Context(t), "mcp.everything.test_image_content", nil)
	if d, ok := retryDataOf(err); rpcCode(err) != CodeDenied || !ok || d.Reason != reasonApprovalUnavailable || !d.says(true, waitMs, waitMs) ||
		!strings.Contains(err.Error(), "it was not run") {
		t.Errorf("an asked call while the API server is away: %v; want -32010 approval_unavailable, retryable, retryAfterMs %d", err, waitMs)
	}
	err = answerError(statelessPost(t, bridgeURL, "alice-token", "tools/call", allowOnce))
	if d, ok := retryDataOf(err); rpcCode(err) != jsonrpc.CodeInvalidParams || !ok || d.Reason != reasonStateUnrecorded || !d.says(true, waitMs, waitMs) ||
		!strings.Contains(err.Error(), "the request was not run") {
		t.Errorf("an allow_once retry while the API server is away: %v; want -32602 request_state_unrecorded, retryable, retryAfterMs %d", err, waitMs)
	}
	if n := fwd.Calls(); n != 0 {
		t.Fatalf("%d calls reached the server while the API server was away, want none", n)
	}

	path.restore(t)

	// The same requests, sent again: a person is asked and approves, and
	// the allow_once (whose use was never recorded) runs, once.
	done := callAsync(c, "mcp.everything.test_image_content", `{}`)
	testenv.DecideApproval(t, k, waitingApproval(t, k, ns, "mcp.everything.test_image_content"), v1alpha1.VerdictAllowOnce, "carol", "")
	if r := <-done; r.err != nil {
		t.Errorf("the asked call sent again once the API server is back: %v, want it run", r.err)
	}
	var ran []byte
	testkit.Eventually(t, "the allow_once retry runs once the API server is back", func() bool {
		ran = statelessPost(t, bridgeURL, "alice-token", "tools/call", allowOnce)
		return strings.Contains(string(ran), "simple text response")
	})
	if again := statelessPost(t, bridgeURL, "alice-token", "tools/call", allowOnce); !strings.Contains(string(again), "used already") {
		t.Errorf("the allow_once retry sent a second time: %s, want it refused as used already", again)
	}
	if n := fwd.Calls(); n != 2 {
		t.Errorf("%d calls reached the server, want 2 (each refused request run once when sent again)", n)
	}
}
