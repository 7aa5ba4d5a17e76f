package policy

import (
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

func TestSessionGrants(t *testing.T) {
	e := mustEngine(t,
		newPolicy("team", "p", forSA("team", "agent"), ask("mcp.fs.*"), deny("mcp.fs.secret"), allow("mcp.git.*")),
		newPolicy("team", "once-only", forSA("team", "agent"), ask("mcp.web.*"), withModes(v1alpha1.ApprovalAllowOnce)),
	)
	write := call("fs", "write", v1alpha1.RiskWrite, nil)
	g := NewSessionGrants()

	if got := g.Apply(e.DecideTool(agent, write)); got.Decision != dAsk {
		t.Fatalf("without a grant: %s, want ask", got.Decision)
	}

	g.AllowOnce(write.Name)
	got := g.Apply(e.DecideTool(agent, write))
	checkResult(t, got, dAllow, SourceSessionAllowOnce, nil, "allowed once")
	if got.Approval != nil {
		t.Errorf("an allowed result carries approval %+v", got.Approval)
	}
	if got := g.Apply(e.DecideTool(agent, write)); got.Decision != dAsk {
		t.Errorf("an allow-once grant was used twice: %s", got.Decision)
	}

	// Another tool is not covered by a grant for write.
	g.AllowSession(write.Name)
	if got := g.Apply(e.DecideTool(agent, call("fs", "move", v1alpha1.RiskWrite, nil))); got.Decision != dAsk {
		t.Errorf("a grant for %s covered mcp.fs.move: %s", write.Name, got.Decision)
	}
	for range 3 {
		checkResult(t, g.Apply(e.DecideTool(agent, write)), dAllow, SourceSessionAllow, nil, "for this session")
	}

	// A grant never turns deny into allow, nor touches an allow.
	secret := call("fs", "secret", v1alpha1.RiskRead, nil)
	g.AllowSession(secret.Name)
	g.AllowOnce(secret.Name)
	checkResult(t, g.Apply(e.DecideTool(agent, secret)), dDeny, "policy:team/p#rules[1]", nil, "")
	gitRead := call("git", "log", v1alpha1.RiskRead, nil)
	checkResult(t, g.Apply(e.DecideTool(agent, gitRead)), dAllow, "policy:team/p#rules[2]", nil, "")
	checkResult(t, g.Apply(e.DecideTool(agent, ToolCall{Name: "mcp.fs.write", Server: "fs", Namespace: "other"})), dDeny, SourceDefault, nil, "")

	// The policy's modes bound the grants: only allow-once here.
	fetch := call("web", "fetch", v1alpha1.RiskNetwork, nil)
	g.AllowSession(fetch.Name)
	checkResult(t, g.Apply(e.DecideTool(agent, fetch)), dAsk, "", nil, "")
	g.AllowOnce(fetch.Name)
	checkResult(t, g.Apply(e.DecideTool(agent, fetch)), dAllow, SourceSessionAllowOnce, nil, "")

	// The session ends: every grant goes, and none can be added.
	g.Close()
	checkResult(t, g.Apply(e.DecideTool(agent, write)), dAsk, "", nil, "")
	g.AllowSession(write.Name)
	checkResult(t, g.Apply(e.DecideTool(agent, write)), dAsk, "", nil, "")

	// A session that never had grants (nil) changes nothing.
	var none *SessionGrants
	checkResult(t, none.Apply(e.DecideTool(agent, write)), dAsk, "", nil, "")
}

func TestSessionGrantsDestructive(t *testing.T) {
	e := mustEngine(t, newPolicy("team", "p", forSA("team", "agent"), allow("mcp.fs.*")))
	rm := call("fs", "rm", v1alpha1.RiskDestructive, nil)
	g := NewSessionGrants()
	g.AllowSession(rm.Name)
	if got := g.Apply(e.DecideTool(agent, rm)); got.Decision != dAsk {
		t.Fatalf("a session grant allowed a destructive tool: %+v", got)
	}
	g.AllowOnce(rm.Name)
	checkResult(t, g.Apply(e.DecideTool(agent, rm)), dAllow, SourceSessionAllowOnce, nil, "")
	checkResult(t, g.Apply(e.DecideTool(agent, rm)), dAsk, "", nil, "")
}

func TestRateLimiter(t *testing.T) {
	e := mustEngine(t,
		newPolicy("team", "limited", forGroup("system:serviceaccounts"), allow("mcp.fs.*"), deny("mcp.fs.secret"), withRateLimit(60, 3)),
		newPolicy("team", "free", forGroup("system:serviceaccounts"), allow("mcp.git.*")),
	)
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := NewRateLimiter(clock.Now)
	read := call("fs", "read", v1alpha1.RiskRead, nil)
	decide := func(s Subject, c ToolCall) Result { return l.Apply(s, e.DecideTool(s, c)) }

	for i := range 3 {
		if got := decide(agent, read); got.Decision != dAllow {
			t.Fatalf("call %d within the burst: %s (%s)", i+1, got.Decision, got.Reason)
		}
	}
	got := decide(agent, read)
	checkResult(t, got, dDeny, "policy:team/limited#rateLimit", []string{"policy:team/limited#rateLimit"},
		"rate limit exceeded: policy team/limited allows 60 calls per minute (burst 3)")

	// Each subject has its own bucket.
	if got := decide(ServiceAccount("team", "other"), read); got.Decision != dAllow {
		t.Errorf("another subject was limited: %s", got.Reason)
	}
	// A policy without a limit is not limited.
	for range 10 {
		if got := decide(agent, call("git", "log", v1alpha1.RiskRead, nil)); got.Decision != dAllow {
			t.Fatalf("a call under a policy without rateLimit was limited: %s", got.Reason)
		}
	}
	// Denied calls cost nothing and stay denied for their own reason.
	checkResult(t, decide(agent, call("fs", "secret", v1alpha1.RiskRead, nil)), dDeny, "policy:team/limited#rules[1]", nil, "")

	// The denial says when the bucket holds a call again: a second.
	if got.RetryAfter != time.Second {
		t.Errorf("RetryAfter %s of an empty bucket refilled at one a second, want 1s", got.RetryAfter)
	}
	// 60 per minute: one token a second.
	clock.Step(999 * time.Millisecond)
	if got := decide(agent, read); got.Decision != dDeny || got.RetryAfter != time.Millisecond {
		t.Errorf("a token came back early, or RetryAfter %s 1 ms before it, want 1ms", got.RetryAfter)
	}
	clock.Step(time.Millisecond)
	if got := decide(agent, read); got.Decision != dAllow {
		t.Errorf("no token after a second: %s", got.Reason)
	}
	// A long pause refills up to the burst, not beyond.
	clock.Step(time.Hour)
	allowed := 0
	for range 10 {
		if decide(agent, read).Decision == dAllow {
			allowed++
		}
	}
	if allowed != 3 {
		t.Errorf("after an hour %d calls passed, want the burst of 3", allowed)
	}
}

func TestRateLimiterBurstDefaultsAndAskingCalls(t *testing.T) {
	e := mustEngine(t, newPolicy("team", "p", forSA("team", "agent"), ask("mcp.fs.*"), withRateLimit(2, 0)))
	clock := clocktesting.NewFakeClock(time.Unix(0, 0))
	l := NewRateLimiter(clock.Now)
	write := call("fs", "write", v1alpha1.RiskWrite, nil)
	for i := range 2 {
		if got := l.Apply(agent, e.DecideTool(agent, write)); got.Decision != dAsk {
			t.Fatalf("call %d: %s, want ask (asking calls count against the limit but pass)", i+1, got.Decision)
		}
	}
	got := l.Apply(agent, e.DecideTool(agent, write))
	if got.Decision != dDeny || !strings.Contains(got.Reason, "burst 2") || got.Approval != nil {
		t.Errorf("third call: %+v, want deny by the limit with the default burst of 2", got)
	}
}

// Prompts and resources are granted like tools, each kind apart: a grant
// for a prompt never covers the tool of the same name (both are
// mcp.<server>.<x>), a resource grant covers that exact URI of that server
// only.
func TestSessionGrantsForPromptsAndResources(t *testing.T) {
	e := mustEngine(t, newPolicy("team", "p", forSA("team", "agent"),
		ask("mcp.fs.*"),
		withPrompt(v1alpha1.PromptRule{Prompts: []string{"mcp.fs.*"}, Decision: dAsk}),
		withResource(v1alpha1.ResourceRule{Servers: []string{"fs", "fs-v2"}, Decision: dAsk}),
	))
	g := NewSessionGrants()
	prompt := PromptGet{Name: "mcp.fs.summarize", Server: "fs", Namespace: "team"}
	tool := call("fs", "summarize", v1alpha1.RiskRead, nil)
	read := ResourceRead{Server: "fs", Namespace: "team", URI: "file:///a.txt"}

	g.AllowSessionFor(e.DecidePrompt(agent, prompt))
	checkResult(t, g.Apply(e.DecidePrompt(agent, prompt)), dAllow, SourceSessionAllow, nil, "for this session")
	if got := g.Apply(e.DecideTool(agent, tool)); got.Decision != dAsk {
		t.Errorf("a prompt grant covered the tool of the same name: %s", got.Decision)
	}
	if got := g.Apply(e.DecidePrompt(agent, PromptGet{Name: "mcp.fs.other", Server: "fs", Namespace: "team"})); got.Decision != dAsk {
		t.Errorf("a prompt grant covered another prompt: %s", got.Decision)
	}

	g.AllowSession(tool.Name)
	if got := g.Apply(e.DecidePrompt(agent, PromptGet{Name: "mcp.fs.summarize", Server: "fs", Namespace: "team"})); got.Decision != dAllow {
		t.Errorf("the prompt grant was lost: %s", got.Decision)
	}
	g2 := NewSessionGrants()
	g2.AllowSession(tool.Name)
	if got := g2.Apply(e.DecidePrompt(agent, prompt)); got.Decision != dAsk {
		t.Errorf("a tool grant covered the prompt of the same name: %s", got.Decision)
	}

	g.AllowSessionFor(e.DecideResource(agent, read))
	checkResult(t, g.Apply(e.DecideResource(agent, read)), dAllow, SourceSessionAllow, nil, "")
	for _, other := range []ResourceRead{
		{Server: "fs", Namespace: "team", URI: "file:///b.txt"},
		{Server: "fs-v2", Namespace: "team", URI: "file:///a.txt"},
		{Server: "fs", Namespace: "team", URI: "file:///a.txt/"},
	} {
		if got := g.Apply(e.DecideResource(agent, other)); got.Decision != dAsk {
			t.Errorf("a grant for %s covered %+v: %s", read.URI, other, got.Decision)
		}
	}
	// A denied resource stays denied whatever was granted.
	g.AllowSessionFor(e.DecideResource(agent, ResourceRead{Server: "fs", Namespace: "team", URI: "file:///../etc/passwd"}))
	checkResult(t, g.Apply(e.DecideResource(agent, ResourceRead{Server: "fs", Namespace: "team", URI: "file:///../etc/passwd"})), dDeny, SourceDefault, nil, "")
}

// TestRateLimiterWaitsForEveryBucket: a call that two policies' limits
// cover passes once both buckets hold a token: an agent told when the
// first one does would be denied again then. The denial names the bucket
// that takes longest, and its wait.
func TestRateLimiterWaitsForEveryBucket(t *testing.T) {
	e := mustEngine(t,
		newPolicy("team", "a-fast", forGroup("system:serviceaccounts"), allow("mcp.fs.*"), withRateLimit(60, 1)),
		newPolicy("team", "b-slow", forGroup("system:serviceaccounts"), allow("mcp.fs.*"), withRateLimit(6, 1)),
	)
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := NewRateLimiter(clock.Now)
	read := call("fs", "read", v1alpha1.RiskRead, nil)
	decide := func() Result { return l.Apply(agent, e.DecideTool(agent, read)) }
	if got := decide(); got.Decision != dAllow {
		t.Fatalf("the first call: %s (%s)", got.Decision, got.Reason)
	}
	got := decide()
	checkResult(t, got, dDeny, "policy:team/b-slow#rateLimit", []string{"policy:team/b-slow#rateLimit"},
		"rate limit exceeded: policy team/b-slow allows 6 calls per minute (burst 1)")
	if got.RetryAfter != 10*time.Second {
		t.Errorf("RetryAfter %s, want 10s: the slower bucket's wait", got.RetryAfter)
	}
	clock.Step(got.RetryAfter)
	if got := decide(); got.Decision != dAllow {
		t.Errorf("the call after RetryAfter: %s (%s), want it allowed", got.Decision, got.Reason)
	}
}
