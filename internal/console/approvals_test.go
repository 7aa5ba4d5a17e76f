package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

func TestApproveOnceRecordsThePersonAsDecider(t *testing.T) {
	e := newEnv(t)
	e.approver(aliceUser)
	e.approval("write-1", bobUser, `{"path":"/data/a.txt"}`)
	b := e.browser()
	b.signIn(alice)
	testkit.Eventually(t, "the approval shows", func() bool {
		_, body := b.get("/approvals")
		return strings.Contains(body, "write-1") && strings.Contains(body, "Waiting for a decision (1)")
	})
	_, body := b.get("/approvals")
	for _, want := range []string{bobUser, "mcp.fs.write_file", "destructive", "/data/a.txt", "policy:" + e.ns + "/planner#rules[1]", "writes need a person", "Allow once", "Deny"} {
		if !strings.Contains(body, htmlText(want)) {
			t.Errorf("the approvals page lacks %q", want)
		}
	}
	if strings.Contains(body, "Allow for this session") {
		t.Error("the page offers Allow for this session, which the request does not offer")
	}
	page := b.decide("write-1", v1alpha1.VerdictAllowOnce, "looks right")
	if !strings.Contains(page, "Approved once") {
		t.Errorf("no confirmation after approving: %s", page)
	}
	d := e.get("write-1").Spec.Decision
	if d == nil || d.Verdict != v1alpha1.VerdictAllowOnce || d.Decider != aliceUser || d.Comment != "looks right" {
		t.Fatalf("decision recorded: %+v, want AllowOnce by %s", d, aliceUser)
	}
}

// htmlText is s as html/template writes it in text.
func htmlText(s string) string {
	return strings.NewReplacer(`"`, "&#34;", "'", "&#39;", "<", "&lt;", ">", "&gt;", "&", "&amp;").Replace(s)
}

func TestAllowSessionWarnsAndIsRecorded(t *testing.T) {
	e := newEnv(t)
	e.approver(aliceUser)
	e.approval("read-1", bobUser, `{}`, v1alpha1.ApprovalAllowOnce, v1alpha1.ApprovalAllowSession)
	b := e.browser()
	b.signIn(alice)
	testkit.Eventually(t, "the approval shows", func() bool { _, body := b.get("/approvals"); return strings.Contains(body, "read-1") })
	_, body := b.get("/approvals")
	if !strings.Contains(body, "Allow for this session") || !strings.Contains(body, "<strong>any arguments</strong>") {
		t.Fatalf("the session approval is offered without its warning: %s", body)
	}
	page := b.decide("read-1", v1alpha1.VerdictAllowSession, "")
	if !strings.Contains(page, "ANY arguments") {
		t.Errorf("the confirmation does not repeat the warning: %s", page)
	}
	if d := e.get("read-1").Spec.Decision; d == nil || d.Verdict != v1alpha1.VerdictAllowSession {
		t.Fatalf("decision recorded: %+v", d)
	}
}

func TestDenyWithComment(t *testing.T) {
	e := newEnv(t)
	e.approver(aliceUser)
	e.approval("write-2", bobUser, `{}`)
	b := e.browser()
	b.signIn(alice)
	page := b.decide("write-2", v1alpha1.VerdictDeny, "not on a Friday")
	if !strings.Contains(page, "Denied tools/call mcp.fs.write_file") {
		t.Errorf("no confirmation after denying: %s", page)
	}
	if d := e.get("write-2").Spec.Decision; d == nil || d.Verdict != v1alpha1.VerdictDeny || d.Comment != "not on a Friday" {
		t.Fatalf("decision recorded: %+v", d)
	}
}

// The requester signed in cannot decide its own request: RBAC lets it
// update, the admission policy refuses, and the console shows why.
func TestOwnRequestIsRefusedWithThePolicysMessage(t *testing.T) {
	e := newEnv(t)
	e.approver(bobUser)
	e.approval("own-1", bobUser, `{}`)
	b := e.browser()
	b.signIn(bob)
	page := b.decide("own-1", v1alpha1.VerdictAllowOnce, "")
	if !strings.Contains(page, "nobody decides their own request") || !strings.Contains(page, `role="alert"`) {
		t.Fatalf("the refusal does not show the admission policy's message: %s", page)
	}
	if d := e.get("own-1").Spec.Decision; d != nil {
		t.Fatalf("a decision was recorded: %+v", d)
	}
}

// Every way a decision is refused changes nothing and says why.
func TestDecisionRefusals(t *testing.T) {
	e := newEnv(t)
	e.approver(aliceUser)
	e.approval("r-1", bobUser, `{}`)
	done := e.approval("r-done", bobUser, `{}`)
	done.Status.Phase = v1alpha1.ApprovalExpired
	done.Status.FinishedAt = &metav1.Time{Time: done.CreationTimestamp.Time}
	if err := e.admin.Status().Update(context.Background(), done); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signIn(alice)
	csrf := b.csrf()
	path := "/approvals/" + e.ns + "/r-1"
	form := func(verdict, comment, token string) url.Values {
		return url.Values{"csrf": {token}, "verdict": {verdict}, "comment": {comment}}
	}
	// Refused before anything is read: wrong origin, no origin, wrong or
	// missing CSRF token, no session.
	for name, tc := range map[string]struct {
		b      *browser
		form   url.Values
		origin string
		status int
	}{
		"another site":       {b, form("AllowOnce", "", csrf), "https://evil.example", http.StatusForbidden},
		"no Origin":          {b, form("AllowOnce", "", csrf), "-", http.StatusForbidden},
		"wrong CSRF token":   {b, form("AllowOnce", "", "x"+csrf), "", http.StatusForbidden},
		"missing CSRF token": {b, form("AllowOnce", "", ""), "", http.StatusForbidden},
		"not signed in":      {e.browser(), form("AllowOnce", "", csrf), "", http.StatusForbidden},
	} {
		resp := tc.b.submit(path, tc.form, tc.origin)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", name, resp.StatusCode, tc.status)
		}
	}
	// Refused with a message on the approvals page.
	for name, tc := range map[string]struct {
		name, verdict, comment, want string
	}{
		"not a verdict":     {"r-1", "Maybe", "", `"Maybe" is not a decision`},
		"comment too long":  {"r-1", "Deny", strings.Repeat("x", maxComment+1), "longer than 1024"},
		"mode not offered":  {"r-1", "AllowSession", "", "does not offer AllowSession"},
		"no such approval":  {"r-none", "AllowOnce", "", "could not be read as " + aliceUser},
		"no longer waiting": {"r-done", "AllowOnce", "", "is Expired"},
	} {
		resp := b.submit("/approvals/"+e.ns+"/"+tc.name, form(tc.verdict, tc.comment, csrf), "")
		if resp.StatusCode != http.StatusSeeOther {
			t.Errorf("%s: status %d, want 303", name, resp.StatusCode)
			continue
		}
		if _, page := b.get("/approvals"); !strings.Contains(page, htmlText(tc.want)) {
			t.Errorf("%s: the page does not say %q", name, tc.want)
		}
	}
	if d := e.get("r-1").Spec.Decision; d != nil {
		t.Fatalf("a refused decision was recorded: %+v", d)
	}
	// Decided once: a second decision is refused.
	b.decide("r-1", v1alpha1.VerdictDeny, "")
	if page := b.decide("r-1", v1alpha1.VerdictAllowOnce, ""); !strings.Contains(page, "was decided already: Deny by "+aliceUser) {
		t.Errorf("a second decision is not refused: %s", page)
	}
}

// A person RBAC does not let read a namespace's ToolApprovals sees none
// of them, and cannot decide one by posting its name.
func TestNoAccessSeesNothingAndDecidesNothing(t *testing.T) {
	e := newEnv(t)
	e.approval("hidden-1", aliceUser, `{"secret":"no"}`)
	b := e.browser()
	b.signIn(carol) // RBAC grants carol nothing, in any test
	_, body := b.get("/approvals")
	if strings.Contains(body, "hidden-1") || !strings.Contains(body, "may not list ToolApprovals") {
		t.Fatalf("a person without access sees the approval: %s", body)
	}
	resp := b.submit("/approvals/"+e.ns+"/hidden-1", url.Values{"csrf": {b.csrf()}, "verdict": {"AllowOnce"}}, "")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if _, page := b.get("/approvals"); !strings.Contains(page, "is forbidden") {
		t.Errorf("the refusal does not say RBAC's answer: %s", page)
	}
	if d := e.get("hidden-1").Spec.Decision; d != nil {
		t.Fatalf("a decision was recorded: %+v", d)
	}
}

// Strings from agents and servers are text: markup, script and javascript:
// links in a request arrive escaped, never as elements or attributes.
func TestAgentStringsRenderInert(t *testing.T) {
	e := newEnv(t)
	e.approver(aliceUser)
	evil := `<script>alert(1)</script><a href="javascript:alert(2)">x</a> &amp; &lt;b&gt;`
	e.approval("xss-1", bobUser, evil)
	b := e.browser()
	b.signIn(alice)
	_, body := b.get("/approvals")
	if strings.Contains(body, "<script>alert") || strings.Contains(body, `href="javascript:`) || strings.Contains(body, "&lt;b&gt;</pre>") && !strings.Contains(body, "&amp;lt;b&amp;gt;") {
		t.Fatalf("agent-supplied markup reached the page: %s", body)
	}
	if !strings.Contains(body, htmlText(evil)) {
		t.Fatalf("the preview is not shown as text: %s", body)
	}
}
