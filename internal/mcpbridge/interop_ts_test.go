package mcpbridge

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	mcpclient "github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

type tsStep struct {
	Op          string         `json:"op"`
	Name        string         `json:"name,omitempty"`
	Args        map[string]any `json:"args,omitempty"`
	Progress    bool           `json:"progress,omitempty"`
	CancelAfter int            `json:"cancelAfterMs,omitempty"`
	WaitMs      int            `json:"waitMs,omitempty"`
}

type tsPlan struct {
	Steps         []tsStep `json:"steps"`
	Elicit        []string `json:"elicit,omitempty"`
	NoElicitation bool     `json:"noElicitation,omitempty"`
	// RelayAnswer is the answer to a server's own elicitation (decline
	// when nil); Sampling, the text the agent's "model" answers a server's
	// sampling request with (no sampling capability when empty).
	RelayAnswer map[string]any `json:"relayAnswer,omitempty"`
	Sampling    string         `json:"sampling,omitempty"`
}

type tsResult struct {
	Steps []struct {
		Op     string          `json:"op"`
		Name   string          `json:"name"`
		OK     bool            `json:"ok"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Progress int      `json:"progress"`
		Updates  []string `json:"updates"`
	} `json:"steps"`
	Asked   []string `json:"asked"`
	Relayed []struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	} `json:"relayed"`
	Fatal string `json:"fatal"`
}

// runTSAgent runs test/bridge/agent.mjs (the official TypeScript SDK client)
// with plan against the bridge endpoint url.
func runTSAgent(t *testing.T, url, token string, plan tsPlan) tsResult {
	t.Helper()
	return startTSAgent(t, url, token, plan)()
}

// startTSAgent starts the agent and returns what waits for its results
// (call it from the test's goroutine).
func startTSAgent(t *testing.T, url, token string, plan tsPlan) func() tsResult {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	sdk, err := testpeers.NPMPackageDir("@modelcontextprotocol/sdk")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(plan)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	cmd := exec.CommandContext(ctx, "node", filepath.Join(root, "test", "bridge", "agent.mjs"), string(data))
	cmd.Env = append(os.Environ(), "MCP_SDK_DIR="+sdk, "BRIDGE_URL="+url, "BRIDGE_TOKEN="+token)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("the TypeScript agent did not start: %v", err)
	}
	return func() tsResult {
		t.Helper()
		defer cancel()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("the TypeScript agent failed: %v\n%s", err, stderr.String())
		}
		var res tsResult
		if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
			t.Fatalf("the TypeScript agent printed %q: %v\n%s", stdout.String(), err, stderr.String())
		}
		if res.Fatal != "" {
			t.Fatalf("the TypeScript agent could not run: %s", res.Fatal)
		}
		return res
	}
}

// tsChecks are what a test reads an agent's steps with: step(i) is step
// i's result (or "error <message>"), check(i, ok, what) reports step i
// when ok is false.
func tsChecks(t *testing.T, res tsResult) (step func(int) string, check func(int, bool, string)) {
	step = func(i int) string {
		s := res.Steps[i]
		if !s.OK {
			return "error " + s.Error.Message
		}
		return string(s.Result)
	}
	check = func(i int, ok bool, what string) {
		t.Helper()
		if !ok {
			t.Errorf("step %d (%s %s): %s; got %s", i, res.Steps[i].Op, res.Steps[i].Name, what, step(i))
		}
	}
	return step, check
}

const secretValue = "hunter2-correct-horse-battery-staple"

// TestTypeScriptAgent: the official TypeScript SDK client through the
// bridge (run from envtest) to server-everything and two
// server-filesystem instances with the same tool names.
func TestTypeScriptAgent(t *testing.T) {
	rt, url, k, _ := startRuntime(t, "interop")
	ctx := context.Background()

	// server-everything, given a Secret (via a header) whose value its
	// environment also holds: get-env prints it, the bridge redacts it.
	up := testpeers.NodeEverything(t, "MY_SECRET="+secretValue, "OPENAI_API_KEY=sk-proj-"+strings.Repeat("Ab3", 16))
	if err := k.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "interop", Name: "everything-creds"}, StringData: map[string]string{"key": secretValue}}); err != nil {
		t.Fatal(err)
	}
	ev := bridgetest.Published(t, "interop", "everything", up.URL, v1alpha1.ToolsSpec{})
	ev.Spec.Remote.HeadersFrom = []v1alpha1.HeaderFromSecret{{Name: "X-Api-Key", SecretKeyRef: v1alpha1.SecretKeySelector{Name: "everything-creds", Key: "key"}}}
	apply(t, k, ev)

	// Two filesystem servers with the same tools over different roots, each
	// behind the stdio adapter as in its pod.
	fsBin, err := testpeers.NPMBin("mcp-server-filesystem")
	if err != nil {
		t.Fatal(err)
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	_ = os.WriteFile(filepath.Join(dirA, "a-only.txt"), []byte("from A"), 0o600)
	_ = os.WriteFile(filepath.Join(dirB, "b-only.txt"), []byte("from B"), 0o600)
	apply(t, k, bridgetest.Published(t, "interop", "fs", bridgetest.ServeStdio(t, fsBin, dirA), v1alpha1.ToolsSpec{}))
	apply(t, k, bridgetest.Published(t, "interop", "fs-v2", bridgetest.ServeStdio(t, fsBin, dirB), v1alpha1.ToolsSpec{}))

	pol := toolPolicy("interop", "agents", []v1alpha1.Subject{sa("agents", "alice")},
		rule("allow", "mcp.everything.*", "mcp.fs.*", "mcp.fs-v2.*"),
		rule("ask", "mcp.everything.get-sum"),
		rule("deny", "mcp.everything.get-tiny-image"),
	)
	pol.Spec.Resources = []v1alpha1.ResourceRule{{Servers: []string{"everything"}, Decision: "allow"}}
	pol.Spec.Prompts = []v1alpha1.PromptRule{{Prompts: []string{"mcp.everything.*"}, Decision: "allow"}}
	createPolicy(t, k, pol)
	testkit.Eventually(t, "three servers are served", func() bool { return len(rt.Registry.Names()) == 3 })

	res := runTSAgent(t, url+"/mcp", "alice-token", tsPlan{
		Elicit: []string{"allow_session", "deny"},
		Steps: []tsStep{
			{Op: "listTools"},
			{Op: "call", Name: "mcp.everything.echo", Args: map[string]any{"message": "hi"}},
			{Op: "call", Name: "mcp.everything.get-env"},
			{Op: "call", Name: "mcp.everything.get-sum", Args: map[string]any{"a": 1, "b": 2}},
			{Op: "call", Name: "mcp.everything.get-sum", Args: map[string]any{"a": 3, "b": 4}},
			{Op: "call", Name: "mcp.everything.get-tiny-image"},
			{Op: "call", Name: "mcp.everything.trigger-long-running-operation", Args: map[string]any{"duration": 2, "steps": 4}, Progress: true},
			{Op: "call", Name: "mcp.everything.trigger-long-running-operation", Args: map[string]any{"duration": 30, "steps": 30}, Progress: true, CancelAfter: 1500},
			{Op: "listResources"},
			{Op: "read", Name: "mcp://everything/demo://resource/static/document/architecture.md"},
			{Op: "listPrompts"},
			{Op: "getPrompt", Name: "mcp.everything.args-prompt", Args: map[string]any{"city": "Paris", "bogus": "x"}},
			{Op: "getPrompt", Name: "mcp.everything.args-prompt", Args: map[string]any{}},
			{Op: "getPrompt", Name: "mcp.everything.args-prompt", Args: map[string]any{"city": "Paris"}},
			{Op: "call", Name: "mcp.fs.list_directory", Args: map[string]any{"path": dirA}},
			{Op: "call", Name: "mcp.fs-v2.list_directory", Args: map[string]any{"path": dirB}},
			{Op: "call", Name: "mcp.fs.list_directory", Args: map[string]any{"path": dirB}},
			{Op: "call", Name: "list_directory", Args: map[string]any{"path": dirA}},
			{Op: "call", Name: "mcp.fs.write_file", Args: map[string]any{"path": filepath.Join(dirA, "new.txt"), "content": "x"}},
		},
	})
	step, check := tsChecks(t, res)
	check(0, strings.Contains(step(0), `"mcp.everything.echo"`) && strings.Contains(step(0), `"mcp.fs.read_text_file"`) &&
		strings.Contains(step(0), `"mcp.fs-v2.read_text_file"`) && !strings.Contains(step(0), "get-tiny-image"), "lists the allowed and asked tools, not the denied one")
	check(1, strings.Contains(step(1), "[mcp:everything:echo] Echo: hi"), "echo answers with the prefix")
	check(2, res.Steps[2].OK && !strings.Contains(step(2), secretValue) && strings.Contains(step(2), "[REDACTED:secret]") &&
		!strings.Contains(step(2), "sk-proj-Ab3"), "get-env output has the Secret value and the API key redacted")
	check(3, res.Steps[3].OK && strings.Contains(step(3), "3"), "ask, allowed for the session by the user")
	check(4, res.Steps[4].OK && strings.Contains(step(4), "7"), "the session grant allows the next call unasked")
	check(5, !res.Steps[5].OK && res.Steps[5].Error.Code == CodeDenied, "a denied tool is refused")
	check(6, res.Steps[6].OK && res.Steps[6].Progress >= 3, "progress is forwarded")
	check(7, !res.Steps[7].OK, "a cancelled call ends with an error")
	check(8, strings.Count(step(8), `"uri":"mcp://everything/`) >= 5 && !strings.Contains(step(8), `"uri":"demo:`), "resources are listed with URIs that name their server")
	check(9, res.Steps[9].OK && strings.Contains(step(9), `"uri":"mcp://everything/demo://resource/static/document/architecture.md"`), "a resource is read")
	check(10, strings.Contains(step(10), `"mcp.everything.args-prompt"`), "prompts are listed namespaced")
	check(11, !res.Steps[11].OK && res.Steps[11].Error.Code == jsonrpc.CodeInvalidParams && strings.Contains(res.Steps[11].Error.Message, "bogus"), "an unknown prompt argument is rejected")
	check(12, !res.Steps[12].OK && res.Steps[12].Error.Code == jsonrpc.CodeInvalidParams && strings.Contains(res.Steps[12].Error.Message, "city"), "a missing required argument is rejected")
	check(13, res.Steps[13].OK && strings.Contains(step(13), "Paris"), "the prompt expands")
	check(14, strings.Contains(step(14), "a-only.txt") && !strings.Contains(step(14), "b-only.txt"), "fs lists its own root")
	check(15, strings.Contains(step(15), "b-only.txt") && !strings.Contains(step(15), "a-only.txt"), "fs-v2 lists its own root")
	check(16, !strings.Contains(step(16), "b-only.txt"), "fs never reaches fs-v2's root")
	check(17, !res.Steps[17].OK && strings.Contains(res.Steps[17].Error.Message, "ambiguous"), "a bare name shared by two servers is ambiguous")
	check(18, !res.Steps[18].OK && res.Steps[18].Error.Code == CodeDenied, "a destructive tool is asked, and the user's deny holds")
	if len(res.Asked) != 2 {
		t.Errorf("the user was asked %d times, want 2 (get-sum once, write_file once): %q", len(res.Asked), res.Asked)
	}
	if _, err := os.Stat(filepath.Join(dirA, "new.txt")); err == nil {
		t.Error("the denied write_file ran")
	}

	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = rt.Audit.Flush(fctx)
	events := (&harness{audit: rt.Audit, sink: nil}).eventsFrom(t, rt)
	var fetched, cancelled, ambiguous int
	for _, ev := range events {
		switch {
		case ev["type"] == "mcp.resource.fetched":
			fetched++
		case ev["type"] == "tool.failed" && ev["reason"] == "cancelled":
			cancelled++
		case ev["type"] == "tool.ambiguous_call":
			ambiguous++
		}
	}
	if fetched != 1 || cancelled != 1 || ambiguous != 1 {
		t.Errorf("audit: %d resources fetched (want 1: only the one read), %d calls cancelled (want 1), %d ambiguous calls (want 1)", fetched, cancelled, ambiguous)
	}

	// The TypeScript SDK drops _meta from prompt messages; the raw answer
	// shows the mark.
	c := connectTo(t, url, "alice-token", mcpclient.EraSession)
	raw, err := c.Call(testkit.Context(t), "prompts/get", json.RawMessage(`{"name":"mcp.everything.args-prompt","arguments":{"city":"Paris"}}`))
	if err != nil || !strings.Contains(string(raw), `"_meta":{"source":{"mcp":{"server":"everything","prompt":"args-prompt"}}}`) {
		t.Errorf("expanded messages must be marked with _meta.source: %s, %v", raw, err)
	}

	noAsk := runTSAgent(t, url+"/mcp", "alice-token", tsPlan{NoElicitation: true, Steps: []tsStep{{Op: "call", Name: "mcp.everything.get-sum", Args: map[string]any{"a": 1, "b": 2}}}})
	if s := noAsk.Steps[0]; s.OK || !strings.Contains(s.Error.Message, "approval_unavailable") {
		t.Errorf("a client without elicitation must be denied with approval_unavailable, got %+v", s)
	}
}
