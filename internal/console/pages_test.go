package console

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

const evilText = `<script>alert(1)</script> <a href="javascript:alert(2)">click</a> &amp; &#60;b&#62;`

// server creates MCPServer fs with a catalog (one tool's description holds
// markup) and the status a crashing, pinned server has.
func (e *env) server(name string) *v1alpha1.MCPServer {
	e.t.Helper()
	s := &v1alpha1.MCPServer{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}, Spec: v1alpha1.MCPServerSpec{
		Transport: v1alpha1.TransportStreamableHTTP,
		Workload:  &v1alpha1.Workload{Image: "example.com/fs:1", Port: 8080},
		Tools:     v1alpha1.ToolsSpec{CatalogPinning: v1alpha1.CatalogPinningLocked, ApprovedDigest: "sha256:" + strings.Repeat("a", 64)},
	}}
	e.create(s)
	s.Status = v1alpha1.MCPServerStatus{
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Crashing", Message: "the server exited (OOMKilled)", LastTransitionTime: metav1.Now()}},
		Tools: []v1alpha1.ToolStatus{
			{Name: "mcp." + name + ".read_file", UpstreamName: "read_file", Description: "reads a file", Risk: v1alpha1.RiskRead, SchemaDigest: "sha256:" + strings.Repeat("b", 64)},
			{Name: "mcp." + name + ".write_file", UpstreamName: "write_file", Title: evilText, Description: evilText, Risk: v1alpha1.RiskDestructive, SchemaDigest: "sha256:" + strings.Repeat("c", 64)},
		},
		ToolCount:     2,
		CatalogDigest: "sha256:" + strings.Repeat("d", 64),
		Restarts:      v1alpha1.RestartStatus{Consecutive: 2, Total: 3, LastExitReason: "OOMKilled"},
	}
	if err := e.admin.Status().Update(context.Background(), s); err != nil {
		e.t.Fatal(err)
	}
	return s
}

func TestServersPages(t *testing.T) {
	e := newEnv(t)
	e.approver(aliceUser)
	e.server("fs")
	e.create(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "fs.1", Namespace: e.ns},
		InvolvedObject: corev1.ObjectReference{Kind: "MCPServer", Name: "fs", Namespace: e.ns, APIVersion: v1alpha1.GroupVersion.String()},
		Type:           "Warning", Reason: "Crashed", Message: "exited: " + evilText, Count: 1, LastTimestamp: metav1.Now()})
	b := e.browser()
	b.signIn(alice)
	testkit.Eventually(t, "the server shows", func() bool { _, body := b.get("/servers"); return strings.Contains(body, e.ns+"/fs") })
	_, list := b.get("/servers")
	for _, want := range []string{"Crashing", "the server exited (OOMKilled)", "3 (last: OOMKilled)", "NOT the approved one"} {
		if !strings.Contains(list, htmlText(want)) {
			t.Errorf("the servers page lacks %q", want)
		}
	}
	status, detail := b.get("/servers/" + e.ns + "/fs")
	if status != http.StatusOK {
		t.Fatalf("server page: %d", status)
	}
	for _, want := range []string{"mcp.fs.read_file", "destructive", "3 in all, 2 in a row", "Crashed", htmlText("exited: " + evilText)} {
		if !strings.Contains(detail, want) {
			t.Errorf("the server page lacks %q", want)
		}
	}
	if strings.Contains(detail, "<script>alert") || strings.Contains(detail, `href="javascript:`) {
		t.Fatalf("server-supplied markup reached the page: %s", detail)
	}

	c := e.browser()
	c.signIn(carol)
	if _, body := c.get("/servers"); strings.Contains(body, e.ns+"/fs") {
		t.Error("a person without access sees the server")
	}
	if status, _ := c.get("/servers/" + e.ns + "/fs"); status != http.StatusNotFound {
		t.Errorf("a person without access gets %d for the server page", status)
	}
}

// The server page reads Events as the person: without the right to list
// them it says so, and still shows the server.
func TestServerPageEventsAsThePerson(t *testing.T) {
	e := newEnv(t)
	e.server("fs")
	e.grant(aliceUser, "servers-only", rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"mcpservers"}, Verbs: []string{"get", "list"}})
	b := e.browser()
	b.signIn(alice)
	testkit.Eventually(t, "the server shows", func() bool { status, _ := b.get("/servers/" + e.ns + "/fs"); return status == http.StatusOK })
	_, detail := b.get("/servers/" + e.ns + "/fs")
	if !strings.Contains(detail, "could not be read as "+aliceUser) || !strings.Contains(detail, "mcp.fs.read_file") {
		t.Fatalf("the page does not say the Events could not be read: %s", detail)
	}
}

func (e *env) policy() {
	e.t.Helper()
	e.create(&v1alpha1.ToolPolicy{ObjectMeta: metav1.ObjectMeta{Name: "planner", Namespace: e.ns}, Spec: v1alpha1.ToolPolicySpec{
		Subjects: []v1alpha1.Subject{{Kind: v1alpha1.SubjectUser, Name: bobUser}},
		Rules: []v1alpha1.ToolRule{
			{Tools: []string{"mcp.fs.read_file"}, Decision: v1alpha1.DecisionAllow},
			{Tools: []string{"mcp.fs.write_file"}, Decision: v1alpha1.DecisionAsk, Reason: "writes need a person"},
		},
		Approval: v1alpha1.ApprovalSpec{Channels: []v1alpha1.ApprovalChannel{v1alpha1.ChannelToolApproval}, Modes: []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowOnce}},
	}})
}

func TestPoliciesPageAndCanI(t *testing.T) {
	e := newEnv(t)
	e.approver(aliceUser)
	e.server("fs")
	e.policy()
	b := e.browser()
	b.signIn(alice)
	testkit.Eventually(t, "the policy shows", func() bool { _, body := b.get("/policies"); return strings.Contains(body, e.ns+"/planner") })
	ask := func(tool, as, args, risk string) string {
		q := url.Values{"namespace": {e.ns}, "tool": {tool}, "as": {as}, "args": {args}, "risk": {risk}}
		_, body := b.get("/policies?" + q.Encode())
		return body
	}
	for name, tc := range map[string]struct {
		tool, as, args, risk string
		want                 []string
	}{
		"allowed":          {"mcp.fs.read_file", bobUser, "{}", "", []string{"<strong>yes</strong>", "policy:" + e.ns + "/planner#rules[0]"}},
		"asked":            {"mcp.fs.write_file", bobUser, "{}", "", []string{"<strong>ask</strong>", "policy:" + e.ns + "/planner#rules[1]", "writes need a person", "through ToolApproval"}},
		"another subject":  {"mcp.fs.read_file", aliceUser, "{}", "", []string{"<strong>no</strong>"}},
		"risk given":       {"mcp.fs.other", bobUser, "{}", "read", []string{"<strong>no</strong>"}},
		"unpublished tool": {"mcp.fs.other", bobUser, "{}", "", []string{"does not publish mcp.fs.other"}},
		"not a tool name":  {"fs.read", bobUser, "{}", "", []string{"is not a namespaced tool name"}},
		"bad arguments":    {"mcp.fs.read_file", bobUser, "[1]", "", []string{"must be a JSON object"}},
		"no subject":       {"mcp.fs.read_file", "", "{}", "", []string{"Give the subject"}},
	} {
		body := ask(tc.tool, tc.as, tc.args, tc.risk)
		for _, want := range tc.want {
			if !strings.Contains(body, htmlText(want)) && !strings.Contains(body, want) {
				t.Errorf("%s: the answer lacks %q", name, want)
			}
		}
	}
	// The session may end while its request is answered (sign-out in
	// another tab, the idle time): the answer is still the request's
	// person's, and nothing looks the session up again.
	var x *session
	e.console.sessions.mu.Lock()
	for _, y := range e.console.sessions.byID {
		x = y
	}
	e.console.sessions.mu.Unlock()
	e.console.sessions.end(x.id)
	q := url.Values{"namespace": {e.ns}, "tool": {"mcp.fs.read_file"}, "as": {bobUser}}
	_, p, err := e.console.policiesPage(httptest.NewRequest(http.MethodGet, "/policies?"+q.Encode(), nil), x)
	if f := p.Data.(policiesView).CanI; err != nil || f.Answer != "yes" {
		t.Errorf("can-i for a session that ended meanwhile: %v, %+v", err, f)
	}
	c := e.browser()
	c.signIn(carol)
	if _, body := c.get("/policies?" + q.Encode()); !strings.Contains(body, "may not list the ToolPolicies") || strings.Contains(body, "planner") {
		t.Errorf("a person without access is answered from the namespace's policies: %s", body)
	}
}

// auditStream is what a bridge replica writes for an allowed, completed
// call and a denied one, by the bridge's own audit writer.
func auditStream(t *testing.T, server, traceID string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := audit.New(audit.Options{Sink: &buf})
	write := func(subject string, tr audit.Trace, p audit.Payload) {
		if _, err := w.WriteTraced("s-1", subject, tr, p); err != nil {
			t.Fatal(err)
		}
	}
	tool := "mcp." + server + ".write_file"
	tr := audit.Trace{TraceID: traceID, SpanID: "00f067aa0ba902b7"}
	write(bobUser, tr, audit.PermissionRequested{Tool: tool, Args: json.RawMessage(`{"path":"/data/a"}`), RiskAtDecision: "destructive", SourcedFrom: "mcp", ToolCallID: "c-1"})
	write(bobUser, tr, audit.PermissionResolved{Decision: "allow", Actor: "user", SourcedFrom: "approval:once", ToolCallID: "c-1", Tool: tool})
	write(bobUser, tr, audit.MCPCallStarted{Server: server, ToolCallID: "c-1", Method: "tools/call"})
	write(bobUser, tr, audit.MCPCallCompleted{Server: server, ToolCallID: "c-1", DurationMs: 12.5})
	write(bobUser, audit.Trace{}, audit.PermissionRequested{Tool: tool, RiskAtDecision: "destructive", SourcedFrom: "mcp", ToolCallID: "c-2"})
	write(bobUser, audit.Trace{}, audit.PermissionResolved{Decision: "deny", Actor: "policy", SourcedFrom: "default", ToolCallID: "c-2", Tool: tool, Reason: "no rule allows it"})
	write(bobUser, audit.Trace{}, audit.PermissionRequested{Tool: "mcp.elsewhere.x", RiskAtDecision: "read", SourcedFrom: "mcp", ToolCallID: "c-3"})
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The replica's own logs share its output: they are skipped.
	return append([]byte("2026-07-28T10:00:00Z INFO starting bridge\n"), buf.Bytes()...)
}

func TestActivityPage(t *testing.T) {
	activity := NewActivity(100, time.Hour)
	e := newEnv(t, func(o *Options) { o.Activity = activity; o.TraceURL = "http://jaeger.example/trace/{traceId}" })
	e.approver(aliceUser)
	// A server name no other test uses: a name found in several
	// namespaces shows its calls only to who may see all of them.
	e.server("act")
	traceID := "4bf92f3577b34da6a3ce929d0e0e4736"
	b := e.browser()
	b.signIn(alice)
	testkit.Eventually(t, "the server is watched", func() bool { _, body := b.get("/servers"); return strings.Contains(body, e.ns+"/act") })
	if err := activity.Read("bridge-0", bytes.NewReader(auditStream(t, "act", traceID))); err != nil {
		t.Fatal(err)
	}
	_, body := b.get("/activity")
	for _, want := range []string{bobUser, "mcp.act.write_file", "approval:once", "completed", "12.5 ms", `href="http://jaeger.example/trace/` + traceID + `"`, "no rule allows it", "denied", "last 1h0m0s"} {
		if !strings.Contains(body, want) && !strings.Contains(body, htmlText(want)) {
			t.Errorf("the activity page lacks %q", want)
		}
	}
	if strings.Contains(body, "mcp.elsewhere.x") {
		t.Error("a call to a server of no namespace the console knows is shown")
	}
	c := e.browser()
	c.signIn(carol)
	if _, body := c.get("/activity"); strings.Contains(body, "mcp.act.write_file") {
		t.Error("a person without access sees the calls")
	}
}

func TestActivityKeepsTheNewestWithinItsBounds(t *testing.T) {
	a := NewActivity(2, time.Hour)
	now := time.Now()
	a.now = func() time.Time { return now }
	line := func(id string, at time.Time) []byte {
		b, _ := json.Marshal(map[string]any{"seq": 1, "time": at, "type": "permission.requested", "subject": "x", "tool": "mcp.fs.a", "toolCallId": id})
		return b
	}
	a.add("r", line("old", now.Add(-2*time.Hour)))
	for _, id := range []string{"c1", "c2", "c3"} {
		a.add("r", line(id, now))
	}
	got := a.recent(func(*Call) bool { return true }, 10)
	if len(got) != 2 || got[0].key != "r\x00c3" || got[1].key != "r\x00c2" {
		t.Fatalf("kept %+v, want c3 and c2", got)
	}
	now = now.Add(2 * time.Hour)
	if got := a.recent(func(*Call) bool { return true }, 10); len(got) != 0 {
		t.Fatalf("calls older than the window are kept: %+v", got)
	}
}

func TestConsoleWithoutActivitySaysSo(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.signIn(alice)
	if _, body := b.get("/activity"); !strings.Contains(body, "No audit stream is configured") {
		t.Fatalf("activity page: %s", body)
	}
}
