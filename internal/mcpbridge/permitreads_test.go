package mcpbridge

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/signed"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

const (
	textURI    = "mcp://everything/test://static-text"
	binaryURI  = "mcp://everything/test://static-binary"
	argsPrompt = "mcp.everything.test_prompt_with_arguments"
	simplePmt  = "mcp.everything.test_simple_prompt"
)

// askingPolicy asks alice about every read and prompt of everything, and
// allows its tools.
func askingPolicy(timeout time.Duration) v1alpha1.ToolPolicy {
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice"), sa("agents", "bob")}, rule("allow", "mcp.everything.*"))
	pol.Spec.Resources = []v1alpha1.ResourceRule{{Servers: []string{"everything"}, Decision: "ask"}}
	pol.Spec.Prompts = []v1alpha1.PromptRule{{Prompts: []string{"mcp.everything.*"}, Decision: "ask"}}
	pol.Spec.Approval.Timeout = metav1.Duration{Duration: timeout}
	pol.Spec.Approval.Modes = []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowOnce, v1alpha1.ApprovalAllowSession}
	return pol
}

func askingHarness(t *testing.T, timeout time.Duration) *harness {
	up := testpeers.GoEverything(t, false)
	server := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	return newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{askingPolicy(timeout)}, nil)
}

// byID groups events by toolCallId, in order.
func byID(events []map[string]any) map[string][]map[string]any {
	out := map[string][]map[string]any{}
	for _, ev := range events {
		if id, _ := ev["toolCallId"].(string); id != "" {
			out[id] = append(out[id], ev)
		}
	}
	return out
}

// decisions are the permission.resolved events about target (a resource
// or a prompt), each with the types of its request's whole chain.
func decisions(events []map[string]any, field, target string) []decided {
	chains := byID(events)
	var out []decided
	for _, ev := range events {
		if ev["type"] != "permission.resolved" || ev[field] != target {
			continue
		}
		id := ev["toolCallId"].(string)
		d := decided{resolved: ev}
		for _, e := range chains[id] {
			d.chain = append(d.chain, e["type"].(string))
		}
		out = append(out, d)
	}
	return out
}

type decided struct {
	resolved map[string]any
	chain    []string
}

func (d decided) String() string {
	return d.resolved["decision"].(string) + " by " + d.resolved["actor"].(string) + " (" + d.resolved["sourcedFrom"].(string) + "): " + strings.Join(d.chain, " ")
}

func checkDecisions(t *testing.T, events []map[string]any, field, target string, want ...string) {
	t.Helper()
	got := decisions(events, field, target)
	var lines []string
	for _, d := range got {
		lines = append(lines, d.String())
	}
	if !slices.Equal(lines, want) {
		t.Errorf("decisions about %s:\n got %q\nwant %q", target, lines, want)
	}
}

// TestAskOnReadsAndPrompts: with the official TypeScript SDK client as the
// agent (session era) and the go-sdk everything-server upstream, a policy
// that asks about reads and prompts has the user asked; allow once, deny and
// allow for the session each do what they say, and the decisions are
// recorded with who made them before anything goes upstream.
func TestAskOnReadsAndPrompts(t *testing.T) {
	h := askingHarness(t, time.Minute)
	args := map[string]any{"arg1": "alpha", "arg2": "beta"}
	res := runTSAgent(t, h.url+"/mcp", "alice-token", tsPlan{
		Elicit: []string{"allow_once", "deny", "allow_session", "deny", "allow_once", "deny", "allow_session"},
		Steps: []tsStep{
			{Op: "read", Name: textURI},                                            // 0 asked: allow once
			{Op: "read", Name: textURI},                                            // 1 asked: deny
			{Op: "read", Name: binaryURI},                                          // 2 asked: allow for the session
			{Op: "read", Name: binaryURI},                                          // 3 not asked
			{Op: "read", Name: textURI},                                            // 4 asked (the grant is for the other URI): deny
			{Op: "getPrompt", Name: argsPrompt, Args: args},                        // 5 asked: allow once
			{Op: "getPrompt", Name: argsPrompt, Args: args},                        // 6 asked: deny
			{Op: "getPrompt", Name: argsPrompt, Args: map[string]any{"arg1": "x"}}, // 7 bad arguments: not asked
			{Op: "getPrompt", Name: simplePmt},                                     // 8 asked: allow for the session
			{Op: "getPrompt", Name: simplePmt},                                     // 9 not asked
			{Op: "call", Name: "mcp.everything.test_simple_text"},                  // 10 a tool the policy allows
		},
	})
	ok := func(i int, what, contains string) {
		t.Helper()
		s := res.Steps[i]
		if !s.OK || !strings.Contains(string(s.Result), contains) {
			t.Errorf("step %d (%s %s) %s: want a result with %q, got ok=%v %s %+v", i, s.Op, s.Name, what, contains, s.OK, s.Result, s.Error)
		}
	}
	refused := func(i int, what string, code int, contains string) {
		t.Helper()
		s := res.Steps[i]
		if s.OK || s.Error == nil || s.Error.Code != code || !strings.Contains(s.Error.Message, contains) {
			t.Errorf("step %d (%s %s) %s: want error %d with %q, got ok=%v %s %+v", i, s.Op, s.Name, what, code, contains, s.OK, s.Result, s.Error)
		}
	}
	ok(0, "allowed once", `"uri":"`+textURI+`"`)
	refused(1, "denied by the user", CodeDenied, "the user denied the read")
	ok(2, "allowed for the session", `"uri":"`+binaryURI+`"`)
	ok(3, "allowed by the session grant", `"uri":"`+binaryURI+`"`)
	refused(4, "a grant for another URI does not cover it", CodeDenied, "denied")
	ok(5, "allowed once", "alpha")
	refused(6, "denied by the user", CodeDenied, "the user denied the prompt")
	refused(7, "arguments are checked before anyone is asked", jsonrpc.CodeInvalidParams, "arg2")
	ok(8, "allowed for the session", "messages")
	ok(9, "allowed by the session grant", "messages")
	ok(10, "a tool call is not asked", "[mcp:everything:test_simple_text]")

	if len(res.Asked) != 7 {
		t.Fatalf("the user was asked %d times, want 7: %q", len(res.Asked), res.Asked)
	}
	if q := res.Asked[0]; !strings.Contains(q, "read the resource "+textURI) {
		t.Errorf("the question about a read names the URI the agent sees: %q", q)
	}
	if q := res.Asked[4]; !strings.Contains(q, "get the prompt "+argsPrompt) || !strings.Contains(q, `"arg1":"alpha"`) {
		t.Errorf("the question about a prompt names it and previews its arguments: %q", q)
	}

	events := h.events(t)
	readOK := "permission.requested permission.resolved mcp.resource.requested mcp.resource.fetched"
	// A refused read or prompt closes its chain as a refused call does.
	refusedChain := "permission.requested permission.resolved tool.failed"
	checkDecisions(t, events, "resource", textURI,
		"allow by user (approval:once): "+readOK,
		"deny by user (approval:deny): "+refusedChain,
		"deny by user (approval:deny): "+refusedChain)
	checkDecisions(t, events, "resource", binaryURI,
		"allow by user (approval:session): "+readOK,
		"allow by policy (session-grant): "+readOK)
	promptOK := "permission.requested permission.resolved mcp.prompt.invoked mcp.prompt.expanded"
	checkDecisions(t, events, "prompt", argsPrompt,
		"allow by user (approval:once): "+promptOK,
		"deny by user (approval:deny): "+refusedChain)
	checkDecisions(t, events, "prompt", simplePmt,
		"allow by user (approval:session): "+promptOK,
		"allow by policy (session-grant): "+promptOK)
	for _, ev := range events {
		if ev["type"] == "permission.requested" && ev["resource"] == textURI && ev["riskAtDecision"] != "read" {
			t.Errorf("a read is decided at risk read: %v", ev)
		}
		if ev["type"] == "mcp.resource.requested" && ev["uri"] != "test://static-text" && ev["uri"] != "test://static-binary" {
			t.Errorf("mcp.resource.requested names the upstream URI: %v", ev)
		}
	}
}

// TestAskOnReadsWithoutElicitation: a client that offers no form
// elicitation is not asked: the read and the prompt are denied with
// approval_unavailable, and the bridge is recorded as the decider.
func TestAskOnReadsWithoutElicitation(t *testing.T) {
	h := askingHarness(t, time.Minute)
	res := runTSAgent(t, h.url+"/mcp", "alice-token", tsPlan{NoElicitation: true, Steps: []tsStep{
		{Op: "read", Name: textURI},
		{Op: "getPrompt", Name: simplePmt},
	}})
	for _, s := range res.Steps {
		if s.OK || s.Error.Code != CodeDenied || !strings.Contains(s.Error.Message, "approval_unavailable") {
			t.Errorf("%s %s: want a -32010 approval_unavailable refusal, got ok=%v %+v", s.Op, s.Name, s.OK, s.Error)
		}
	}
	events := h.events(t)
	checkDecisions(t, events, "resource", textURI, "deny by bridge (policy:tools/alice#resources[0]): permission.requested permission.resolved tool.failed")
	checkDecisions(t, events, "prompt", simplePmt, "deny by bridge (policy:tools/alice#prompts[0]): permission.requested permission.resolved tool.failed")
}

// TestAskOnReadsTimesOut: a client that takes the question and never
// answers in time is denied with approval_timeout.
func TestAskOnReadsTimesOut(t *testing.T) {
	h := askingHarness(t, time.Second)
	release := make(chan struct{})
	c := mcp.NewClient(&mcp.Implementation{Name: "slow-agent", Version: "1.0.0"}, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "allow_once"}}, nil
		},
	})
	tr := &mcp.StreamableClientTransport{Endpoint: h.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{"alice-token", http.DefaultTransport}}, DisableStandaloneSSE: true}
	cs, err := c.Connect(testkit.Context(t), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	start := time.Now()
	_, err = cs.ReadResource(testkit.Context(t), &mcp.ReadResourceParams{URI: textURI})
	// The late answer goes out now (and is dropped by the bridge); Close
	// waits for the handler.
	close(release)
	if err == nil || !strings.Contains(err.Error(), "approval_timeout") {
		t.Fatalf("an unanswered question: %v, want approval_timeout", err)
	}
	if took := time.Since(start); took < time.Second || took > 10*time.Second {
		t.Errorf("the bridge waited %s for an answer, want the policy's 1s", took)
	}
	checkDecisions(t, h.events(t), "resource", textURI, "deny by bridge (approval:timeout): permission.requested permission.resolved tool.failed")
}

// TestAskOnReadsStateless: the 2026-07-28 era. The official Go SDK client
// answers the input_required result and retries, for a read and a prompt;
// a requestState that was tampered with, or issued for another request or
// caller, is refused.
func TestAskOnReadsStateless(t *testing.T) {
	h := askingHarness(t, time.Minute)

	answers, asked := []string{"allow_once", "deny"}, []string{}
	cs := goSDKAgent(t, h.url+"/mcp", "alice-token", "", &answers, &asked)
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %s", v)
	}
	read, err := cs.ReadResource(testkit.Context(t), &mcp.ReadResourceParams{URI: textURI})
	if err != nil || len(read.Contents) != 1 || read.Contents[0].URI != textURI {
		t.Fatalf("a read the user allowed once: %v %+v", err, read)
	}
	_, err = cs.GetPrompt(testkit.Context(t), &mcp.GetPromptParams{Name: argsPrompt, Arguments: map[string]string{"arg1": "a", "arg2": "b"}})
	if err == nil || !strings.Contains(err.Error(), "the user denied the prompt") {
		t.Fatalf("a prompt the user denied: %v", err)
	}
	if len(asked) != 2 || !strings.Contains(asked[0], textURI) || !strings.Contains(asked[1], argsPrompt) {
		t.Fatalf("the user was asked %q", asked)
	}
	events := h.events(t)
	checkDecisions(t, events, "resource", textURI, "allow by user (approval:once): permission.requested permission.resolved mcp.resource.requested mcp.resource.fetched")
	checkDecisions(t, events, "prompt", argsPrompt, "deny by user (approval:deny): permission.requested permission.resolved tool.failed")

	// The round trip by hand, and what a retry may not do.
	readParams := `"uri":"` + textURI + `"`
	first := statelessPost(t, h.url, "alice-token", "resources/read", readParams)
	state := resultString(first, "requestState")
	if resultString(first, "resultType") != "input_required" || state == "" ||
		!strings.Contains(string(first), `"method":"elicitation/create"`) || !strings.Contains(string(first), "read the resource "+textURI) {
		t.Fatalf("the first read must be answered input_required with a question and a requestState: %s", first)
	}
	allowOnce := `"inputResponses":{"approval":{"action":"accept","content":{"decision":"allow_once"}}}`
	withState := func(s string) string { return `,"requestState":` + string(mustJSON(s)) + `,` + allowOnce }

	promptParams := `"name":"` + argsPrompt + `","arguments":{"arg1":"a","arg2":"b"}`
	promptFirst := statelessPost(t, h.url, "alice-token", "prompts/get", promptParams)
	promptState := resultString(promptFirst, "requestState")
	if promptState == "" {
		t.Fatalf("the first prompts/get must be answered input_required: %s", promptFirst)
	}
	tampered := []byte(state)
	tampered[len(tampered)/2] ^= 1
	// A prompt and a tool may share a name (mcp.<server>.<x>); the state
	// binds the method too. No prompt of the upstream shares a tool's
	// name, so the bridge's own sealer issues one as it would.
	sealer, _ := signed.New(testKey)
	sameName, err := sealer.Seal(statePurpose, requestState{
		Kind: resumeApproval, ToolCallID: "call-x", Method: methodPrompt, Target: "mcp.everything.test_simple_text", Subject: "system:serviceaccount:agents:alice",
		Era: eraStateless, ArgsDigest: argsDigest(nil), Expires: time.Now().Add(time.Minute).UnixMilli(), Answers: []string{answerAllowOnce, answerDeny},
	})
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, token, method, params, want string
	}{
		{"tampered", "alice-token", "resources/read", readParams + withState(string(tampered)), "not issued by this bridge"},
		{"another caller", "bob-token", "resources/read", readParams + withState(state), "another caller or request"},
		{"another resource", "alice-token", "resources/read", `"uri":"` + binaryURI + `"` + withState(state), "another caller or request"},
		{"a read's state on a prompt", "alice-token", "prompts/get", promptParams + withState(state), "another caller or request"},
		{"a prompt's state on a tool call", "alice-token", "tools/call", `"name":"mcp.everything.test_simple_text","arguments":{"arg1":"a","arg2":"b"}` + withState(promptState), "another caller or request"},
		{"a prompt's state on the tool of the same name", "alice-token", "tools/call", `"name":"mcp.everything.test_simple_text"` + withState(sameName), "another caller or request"},
		{"the prompt's arguments changed", "alice-token", "prompts/get", `"name":"` + argsPrompt + `","arguments":{"arg1":"a","arg2":"c"}` + withState(promptState), "arguments changed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := statelessPost(t, h.url, tc.token, tc.method, tc.params)
			var m jsonrpc.Message
			_ = json.Unmarshal(got, &m)
			if m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(m.Error.Message, tc.want) {
				t.Fatalf("want a -32602 error with %q, got %s", tc.want, got)
			}
		})
	}
	fetchedBefore := count(h.events(t), "mcp.resource.fetched")
	got := statelessPost(t, h.url, "alice-token", "resources/read", readParams+withState(state))
	if !strings.Contains(string(got), `"contents"`) || strings.Contains(string(got), "input_required") {
		t.Fatalf("the retry with the answer and the requestState: %s", got)
	}
	got = statelessPost(t, h.url, "alice-token", "prompts/get", promptParams+withState(promptState))
	if !strings.Contains(string(got), `"messages"`) {
		t.Fatalf("the prompt's retry: %s", got)
	}
	events = h.events(t)
	if n := count(events, "mcp.resource.fetched"); n != fetchedBefore+1 {
		t.Errorf("refused retries must not read: %d reads after, %d before", n, fetchedBefore)
	}
	// The retry continues the first request's chain: one id for both legs.
	firstID := ""
	for _, ev := range events {
		if ev["type"] == "permission.requested" && ev["resource"] == textURI {
			firstID = ev["toolCallId"].(string)
		}
	}
	var chain []string
	for _, ev := range byID(events)[firstID] {
		chain = append(chain, ev["type"].(string)+"/"+str(ev["sourcedFrom"]))
	}
	if want := []string{"permission.requested/mcp", "permission.resolved/approval:once", "mcp.resource.requested/", "mcp.resource.fetched/"}; !slices.Equal(chain, want) {
		t.Errorf("the chain of the round trip is %q, want %q", chain, want)
	}
}

func str(v any) string { s, _ := v.(string); return s }

func count(events []map[string]any, typ string) int {
	n := 0
	for _, ev := range events {
		if ev["type"] == typ {
			n++
		}
	}
	return n
}

func mustJSON(v any) []byte {
	data, _ := json.Marshal(v)
	return data
}

// resultString is a string member of a JSON-RPC answer's result.
func resultString(msg []byte, key string) string {
	var m jsonrpc.Message
	if json.Unmarshal(msg, &m) != nil || m.Result == nil {
		return ""
	}
	var r map[string]any
	_ = json.Unmarshal(m.Result, &r)
	return str(r[key])
}

// statelessPost sends one 2026-07-28 request whose params are the given
// members (and the era's _meta) and returns the JSON-RPC answer.
// TestARetryIsCheckedAgainstTheCurrentPolicy: the answer a 2026-07-28
// agent brings back counts only if today's policy still lets the client be
// asked, and only within the modes it offers today (the state, sealed when
// the question was asked, may offer more).
func TestARetryIsCheckedAgainstTheCurrentPolicy(t *testing.T) {
	sealer, _ := signed.New(testKey)
	state, err := sealer.Seal(statePurpose, requestState{
		Kind: resumeApproval, ToolCallID: "call-old", Method: methodRead, Target: textURI, Subject: "system:serviceaccount:agents:alice",
		Era: eraStateless, ArgsDigest: argsDigest(nil), Expires: time.Now().Add(time.Minute).UnixMilli(), Answers: []string{answerAllowOnce, answerDeny},
	})
	if err != nil {
		t.Fatal(err)
	}
	retry := `"uri":"` + textURI + `","requestState":` + string(mustJSON(state)) +
		`,"inputResponses":{"approval":{"action":"accept","content":{"decision":"allow_once"}}}`
	for _, tc := range []struct {
		name     string
		approval v1alpha1.ApprovalSpec
		want     string
		// retry: made again (without the answer), it may be answered
		// otherwise.
		retry bool
	}{
		{"the policy now asks a person only", v1alpha1.ApprovalSpec{
			Channels: []v1alpha1.ApprovalChannel{v1alpha1.ChannelToolApproval}, Modes: []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowOnce},
		}, "no longer lets the client answer", true},
		{"the policy no longer offers the mode answered", v1alpha1.ApprovalSpec{
			Channels: []v1alpha1.ApprovalChannel{v1alpha1.ChannelElicitation}, Modes: []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowSession},
		}, "the user denied", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := askingPolicy(time.Minute)
			tc.approval.Timeout = metav1.Duration{Duration: time.Minute}
			pol.Spec.Approval = tc.approval
			up := testpeers.GoEverything(t, false)
			server := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
			h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, nil)
			got := statelessPost(t, h.url, "alice-token", "resources/read", retry)
			if strings.Contains(string(got), `"contents"`) || !strings.Contains(string(got), tc.want) {
				t.Fatalf("a retry the current policy does not accept: %s, want a denial saying %q", got, tc.want)
			}
			if d, ok := retryDataOf(answerError(got)); !ok || !d.says(tc.retry, -1, -1) {
				t.Errorf("a retry the current policy does not accept: %s, want retryable %v without retryAfterMs", got, tc.retry)
			}
			if n := count(h.events(t), "mcp.resource.fetched"); n != 0 {
				t.Errorf("%d reads made for a refused answer", n)
			}
		})
	}
}

func statelessPost(t *testing.T, url, token, method, members string) []byte {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + members +
		`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}}}`
	req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d: %s", method, resp.StatusCode, data)
	}
	return data
}
