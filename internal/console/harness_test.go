package console

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/identity"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

// apiserver is a real API server (envtest) with the project's CRDs and
// admission policies, started once per test binary.
var apiserver = testenv.Shared{Setup: func(_ *envtest.Environment, cfg *rest.Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return testenv.InstallAdmissionPolicies(ctx, cfg)
}}

func TestMain(m *testing.M) {
	code := m.Run()
	apiserver.Stop()
	os.Exit(code)
}

var nsSeq atomic.Int64

// People of the tests, as the identity provider names them and as the
// console (like the bridge) maps them.
var (
	alice = map[string]any{"sub": "u-alice", "email": "alice@example.com", "email_verified": true, "groups": []any{"approvers"}}
	bob   = map[string]any{"sub": "u-bob", "email": "bob@example.com", "email_verified": true, "groups": []any{"agents"}}
	carol = map[string]any{"sub": "u-carol", "email": "carol@example.com", "email_verified": true}
)

const (
	aliceUser = "oidc:alice@example.com"
	bobUser   = "oidc:bob@example.com"
)

// env is one test's world: an admin client, a fresh namespace, the
// identity provider and a running console.
type env struct {
	t       *testing.T
	admin   client.Client
	ns      string
	idp     *testIDP
	console *Server
	url     string
	clock   *clock
}

type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }

type envOption func(*Options)

func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	cfg, err := apiserver.Start()
	if err != nil {
		t.Fatalf("while starting envtest: %v", err)
	}
	admin, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, admin: admin, ns: fmt.Sprintf("console-%d", nsSeq.Add(1)), idp: newTestIDP(t), clock: &clock{}}
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}})
	mapper, err := identity.NewMapper(identity.JWTAuthenticator{
		Issuer: identity.Issuer{URL: e.idp.srv.URL},
		ClaimMappings: identity.ClaimMappings{
			Username: identity.PrefixedClaimOrExpression{Claim: "email", Prefix: "oidc:"},
			Groups:   identity.PrefixedClaimOrExpression{Claim: "groups", Prefix: "oidc:"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	e.url = "http://" + srv.Listener.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	o := Options{
		Rest: cfg, PublicURL: e.url, Mapper: mapper, Now: e.clock.now,
		SignIn: SignInOptions{IssuerURL: e.idp.srv.URL, ClientID: e.idp.clientID, ClientSecret: e.idp.secret},
	}
	for _, opt := range opts {
		opt(&o)
	}
	if e.console, err = New(ctx, o); err != nil {
		t.Fatal(err)
	}
	if err := e.console.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = e.console.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	return e
}

func (e *env) create(obj client.Object) {
	e.t.Helper()
	if err := e.admin.Create(context.Background(), obj); err != nil {
		e.t.Fatalf("while creating %T: %v", obj, err)
	}
}

// approver lets user decide ToolApprovals in the test's namespace (RBAC).
func (e *env) approver(user string) {
	e.t.Helper()
	e.grant(user, "approver",
		rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"toolapprovals", "mcpservers", "toolpolicies"}, Verbs: []string{"get", "list", "watch", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list"}})
}

// grant gives user the rules in the test's namespace (a Role and its
// RoleBinding named role-user).
func (e *env) grant(user, role string, rules ...rbacv1.PolicyRule) {
	e.t.Helper()
	name := role + "-" + strings.NewReplacer(":", "-", "@", "-", ".", "-").Replace(user)
	e.create(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}, Rules: rules})
	e.create(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}})
}

// approval creates a pending ToolApproval asked by requester, as the
// bridge would.
func (e *env) approval(name, requester, preview string, modes ...v1alpha1.ApprovalMode) *v1alpha1.ToolApproval {
	e.t.Helper()
	if len(modes) == 0 {
		modes = []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowOnce}
	}
	a := &v1alpha1.ToolApproval{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}, Spec: v1alpha1.ToolApprovalSpec{Request: v1alpha1.ApprovalRequest{
		Requester: v1alpha1.ApprovalRequester{Username: requester, Session: "s-1"}, Method: "tools/call", Server: "fs",
		Target: "mcp.fs.write_file", ArgumentsPreview: preview, Risk: v1alpha1.RiskDestructive,
		Rules: []string{"policy:" + e.ns + "/planner#rules[1]"}, Reason: "writes need a person", Modes: modes,
		ExpiresAt: metav1.NewTime(time.Now().Add(10 * time.Minute)),
	}}}
	e.create(a)
	return a
}

// browser is a person's browser: cookies kept, redirects followed for
// navigation, not for form posts (their 303 is checked).
type browser struct {
	t    *testing.T
	e    *env
	jar  http.CookieJar
	nav  *http.Client
	post *http.Client
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: e.t, e: e, jar: jar, nav: &http.Client{Jar: jar, Timeout: 20 * time.Second},
		post: &http.Client{Jar: jar, Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// signIn goes through the identity provider as the person claims names.
func (b *browser) signIn(claims map[string]any) {
	b.t.Helper()
	b.e.idp.signInAs(claims)
	status, body := b.get("/login")
	if status != http.StatusOK || !strings.Contains(body, "Signed in") {
		b.t.Fatalf("sign-in ended with %d: %s", status, body)
	}
}

func (b *browser) get(path string) (int, string) {
	b.t.Helper()
	resp, err := b.nav.Get(b.e.url + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// submit posts a form from origin (the console's own when empty).
func (b *browser) submit(path string, form url.Values, origin string) *http.Response {
	b.t.Helper()
	if origin == "" {
		origin = b.e.url
	}
	req, _ := http.NewRequest(http.MethodPost, b.e.url+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "-" {
		req.Header.Set("Origin", origin)
	}
	resp, err := b.post.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the token the console's pages put in their forms.
func (b *browser) csrf() string {
	b.t.Helper()
	_, body := b.get("/approvals")
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		b.t.Fatalf("no CSRF token on the approvals page: %s", body)
	}
	return m[1]
}

// decide posts a decision from the approvals page and returns the page it
// leads to.
func (b *browser) decide(name string, verdict v1alpha1.ApprovalVerdict, comment string) string {
	b.t.Helper()
	resp := b.submit("/approvals/"+b.e.ns+"/"+name, url.Values{"csrf": {b.csrf()}, "verdict": {string(verdict)}, "comment": {comment}}, "")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/approvals" {
		b.t.Fatalf("a decision answered %d (Location %q), want 303 to /approvals", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, body := b.get("/approvals")
	return body
}

func (e *env) get(name string) *v1alpha1.ToolApproval {
	e.t.Helper()
	var a v1alpha1.ToolApproval
	if err := e.admin.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, &a); err != nil {
		e.t.Fatal(err)
	}
	return &a
}
