// Package console_test drives the console in a real headless Chromium:
// the console, the development identity provider and a real API server
// (envtest, with the admission policies) run in this process; the browser
// signs people in at the provider's own login page. The same steps run on
// the dev cluster in test/e2e (label console).
package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/chromedp/chromedp"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/console"
	"github.com/mcp-operator/mcp-operator/internal/devidp"
	"github.com/mcp-operator/mcp-operator/internal/identity"
	"github.com/mcp-operator/mcp-operator/internal/testbrowser"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

const (
	ns        = "team"
	aliceUser = "oidc:alice@example.com"
	bobUser   = "oidc:bob@example.com"
	// evil is what a hostile agent or server puts in names, descriptions
	// and arguments.
	evil = `<script>alert("xss")</script><a href="javascript:alert('link')">click me</a> &amp; &#60;b&#62; <img src=x onerror=alert(3)>`
)

// world is the running system: API server, identity provider, console.
type world struct {
	t          *testing.T
	admin      client.Client
	consoleURL string
	shots      string
}

func start(t *testing.T) *world {
	t.Helper()
	cfg := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := testenv.InstallAdmissionPolicies(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, admin: admin}
	w.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	// Both may decide ToolApprovals here as far as RBAC goes; the
	// admission policy still refuses bob his own requests.
	for _, user := range []string{aliceUser, bobUser} {
		name := "approver-" + strings.NewReplacer(":", "-", "@", "-", ".", "-").Replace(user)
		w.create(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"toolapprovals", "mcpservers", "toolpolicies"}, Verbs: []string{"get", "list", "watch", "update"}},
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list"}},
		}})
		w.create(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}})
	}

	idpSrv := httptest.NewUnstartedServer(nil)
	issuer := "http://" + idpSrv.Listener.Addr().String()
	idp, err := devidp.New(devidp.Config{Issuer: issuer})
	if err != nil {
		t.Fatal(err)
	}
	idpSrv.Config.Handler = idp
	idpSrv.Start()
	t.Cleanup(idpSrv.Close)
	ic, err := identity.IssuerConfig(issuer)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := identity.NewMapper(ic.JWT[0])
	if err != nil {
		t.Fatal(err)
	}
	consoleSrv := httptest.NewUnstartedServer(nil)
	w.consoleURL = "http://" + consoleSrv.Listener.Addr().String()
	c, err := console.New(ctx, console.Options{Rest: cfg, Scheme: testenv.Scheme(), PublicURL: w.consoleURL, Mapper: mapper,
		SignIn:   console.SignInOptions{IssuerURL: issuer, ClientID: devidp.ConsoleClientID, ClientSecret: devidp.ConsoleSecret, Scopes: []string{"profile", "email", "groups"}},
		Activity: console.NewActivity(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	consoleSrv.Config.Handler = c.Handler()
	consoleSrv.Start()
	t.Cleanup(consoleSrv.Close)

	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	w.shots = filepath.Join(root, "test", "e2e", "artifacts", "console", "in-process")
	return w
}

func (w *world) create(obj client.Object) {
	w.t.Helper()
	if err := w.admin.Create(context.Background(), obj); err != nil {
		w.t.Fatalf("while creating %T: %v", obj, err)
	}
}

// approval is what the bridge writes for bob's call that a rule asks about.
func (w *world) approval(name string) {
	w.t.Helper()
	w.create(&v1alpha1.ToolApproval{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1alpha1.ToolApprovalSpec{Request: v1alpha1.ApprovalRequest{
		Requester: v1alpha1.ApprovalRequester{Username: bobUser, Session: "s-1"}, Method: "tools/call", Server: "fs",
		Target: "mcp.fs.write_file", ArgumentsPreview: `{"path":"/data/notes.txt","content":` + fmt.Sprintf("%q", evil) + `}`,
		Risk: v1alpha1.RiskDestructive, Rules: []string{"policy:team/planner#rules[1]"}, Reason: "writes need a person",
		Modes: []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowOnce}, ExpiresAt: metav1.NewTime(time.Now().Add(10 * time.Minute)),
	}}})
}

func (w *world) decision(name string) *v1alpha1.ApprovalDecision {
	w.t.Helper()
	var a v1alpha1.ToolApproval
	if err := w.admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &a); err != nil {
		w.t.Fatal(err)
	}
	return a.Spec.Decision
}

func (w *world) server() {
	w.t.Helper()
	s := &v1alpha1.MCPServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fs"}, Spec: v1alpha1.MCPServerSpec{
		Transport: v1alpha1.TransportStreamableHTTP, Remote: &v1alpha1.Remote{URL: "https://fs.example.com/mcp"}}}
	w.create(s)
	s.Status = v1alpha1.MCPServerStatus{
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", Message: evil, LastTransitionTime: metav1.Now()}},
		Tools: []v1alpha1.ToolStatus{
			{Name: "mcp.fs.read_file", UpstreamName: "read_file", Description: "reads a file", Risk: v1alpha1.RiskRead, SchemaDigest: "sha256:" + strings.Repeat("b", 64)},
			{Name: "mcp.fs.write_file", UpstreamName: "write_file", Title: evil, Description: evil, Risk: v1alpha1.RiskDestructive, SchemaDigest: "sha256:" + strings.Repeat("c", 64)},
		},
		ToolCount: 2, CatalogDigest: "sha256:" + strings.Repeat("d", 64),
	}
	if err := w.admin.Status().Update(context.Background(), s); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) browser() *testbrowser.Browser {
	w.t.Helper()
	b, err := testbrowser.New()
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(b.Close)
	return b
}

// inert checks that nothing from agents or servers became markup: no
// dialog opened, the console's one script is the only one, no link or
// image the page did not make.
func inert(t *testing.T, b *testbrowser.Browser, where string) {
	t.Helper()
	if d := b.Dialogs(); len(d) > 0 {
		t.Errorf("%s: script from page data ran (dialogs %q)", where, d)
	}
	for sel, want := range map[string]int{"script": 1, `a[href^="javascript"]`: 0, "img": 0, "[onerror]": 0} {
		if n, err := b.Count(sel); err != nil || n != want {
			t.Errorf("%s: %d elements %s (want %d), %v", where, n, sel, want, err)
		}
	}
}

func TestConsoleInABrowser(t *testing.T) {
	w := start(t)
	w.server()
	alice := w.browser()
	if err := alice.SignIn(w.consoleURL, "alice", devidp.Alice.Password); err != nil {
		t.Fatalf("alice could not sign in at the identity provider's login page: %v", err)
	}
	if who, _ := alice.Text("#whoami"); who != aliceUser {
		t.Fatalf("signed in as %q, want %s", who, aliceUser)
	}
	shot := func(b *testbrowser.Browser, name string) {
		t.Helper()
		if err := b.Screenshot(w.shots, name); err != nil {
			t.Errorf("screenshot %s: %v", name, err)
		}
	}
	// The page is open when the agent's call creates the approval: it
	// appears without a reload, pushed over the event stream.
	w.approval("write-1")
	if err := alice.Do(chromedp.WaitVisible(chromedp.ID("approve-team-write-1"))); err != nil {
		t.Fatalf("the new approval did not appear on the open page: %v", err)
	}
	inert(t, alice, "approvals")
	if text, _ := alice.Text("pre.args"); !strings.Contains(text, `<script>alert(\"xss\")</script>`) {
		t.Errorf("the arguments are not shown as text: %q", text)
	}
	shot(alice, "approvals-pending")
	if err := alice.Do(chromedp.Click(chromedp.ID("approve-team-write-1"))); err != nil {
		t.Fatal(err)
	}
	if text, err := alice.Text("p.flash"); err != nil || !strings.Contains(text, "Approved once") {
		html, _ := alice.HTML()
		t.Fatalf("no confirmation after approving: %q %v\n%s", text, err, html)
	}
	if d := w.decision("write-1"); d == nil || d.Decider != aliceUser || d.Verdict != v1alpha1.VerdictAllowOnce {
		t.Fatalf("recorded decision %+v", d)
	}
	shot(alice, "approvals-decided")

	for _, page := range []struct{ path, name string }{
		{"/servers", "servers"}, {"/servers/team/fs", "server"},
		{"/policies?namespace=team&tool=mcp.fs.read_file&as=" + bobUser, "policies"}, {"/activity", "activity"},
	} {
		if err := alice.Do(chromedp.Navigate(w.consoleURL+page.path), chromedp.WaitVisible(chromedp.ID("main"))); err != nil {
			t.Fatal(err)
		}
		inert(t, alice, page.name)
		shot(alice, page.name)
		if page.name == "server" {
			if text, _ := alice.Text("tbody tr:nth-of-type(2) td.description"); !strings.Contains(text, "javascript:alert") {
				t.Errorf("a server's description is not shown as text: %q", text)
			}
		}
	}

	// The agent's own identity signed in cannot approve its request, and
	// sees why.
	w.approval("write-2")
	bob := w.browser()
	if err := bob.SignIn(w.consoleURL, "bob", devidp.Bob.Password); err != nil {
		t.Fatal(err)
	}
	if err := bob.Do(chromedp.Navigate(w.consoleURL+"/approvals"), chromedp.WaitVisible(chromedp.ID("approve-team-write-2")), chromedp.Click(chromedp.ID("approve-team-write-2"))); err != nil {
		t.Fatal(err)
	}
	if text, err := bob.Text("p.flash.error"); err != nil || !strings.Contains(text, "nobody decides their own request") {
		t.Fatalf("the requester is not told why: %q %v", text, err)
	}
	if d := w.decision("write-2"); d != nil {
		t.Fatalf("the requester decided its own request: %+v", d)
	}
	shot(bob, "own-request-refused")

	// A page of another site posts a decision with alice's browser:
	// nothing changes.
	attacker := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(rw, `<!doctype html><body onload="document.forms[0].submit()"><form method="post" action="%s/approvals/team/write-2">
<input name="verdict" value="AllowOnce"><input name="csrf" value="guessed"></form></body>`, w.consoleURL)
	}))
	defer attacker.Close()
	// localhost is another site than 127.0.0.1.
	attackURL := strings.Replace(attacker.URL, "127.0.0.1", "localhost", 1)
	if err := alice.Do(chromedp.Navigate(attackURL), chromedp.WaitVisible(chromedp.ID("why"))); err != nil {
		t.Fatalf("the forged post did not reach the console's refusal: %v", err)
	}
	if text, _ := alice.Text("#why"); !strings.Contains(text, "Nothing was changed") {
		t.Errorf("the refusal says %q", text)
	}
	shot(alice, "csrf-refused")
	if d := w.decision("write-2"); d != nil {
		t.Fatalf("a post from another site decided: %+v", d)
	}
	if _, err := os.Stat(filepath.Join(w.shots, "approvals-pending.png")); err != nil {
		t.Errorf("no screenshot kept: %v", err)
	}
}
