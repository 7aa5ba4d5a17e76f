// Command console measures the console as `manager console` runs it: a real
// process against a real API server (envtest) holding 500 pending
// ToolApprovals and 200 MCPServers, people signed in at the development
// identity provider (in this process). It prints, beside each target, the
// time to render and send the approvals page and the servers page (p50 and
// p90 over repeated loads on loopback, so the time includes HTTP: an upper
// bound of the render) and their bytes, and the process's RSS: idle after
// its start, with 10 and then 50 people signed in (each having loaded the
// approvals page; the cost of a person is the difference between the two),
// idle again once they have all signed out, and once the console has been
// unused long enough to release its memory again. The idle target holds
// for the first two: the third is that of a console unused for its
// --release-when-idle-for, which the bench sets to seconds. It exits 1 when a target is missed.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/bench/internal/benchutil"
	"github.com/mcp-operator/mcp-operator/bench/internal/rssmap"
	"github.com/mcp-operator/mcp-operator/internal/binpages"
	"github.com/mcp-operator/mcp-operator/internal/devidp"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

// The workload and the targets.
const (
	approvals    = 500
	servers      = 200
	toolsEach    = 8
	people       = 50
	fewPeople    = 10
	loads        = 40
	maxRenderP50 = 50 * time.Millisecond
	maxIdleRSS   = 40 << 20
	// minReleased is the least the idle release must give back of the RSS
	// after use (it gave back 23–26 MB when measured).
	minReleased   = 5 << 20
	benchNS       = "tools"
	benchGroup    = "bench-approvers"
	mappedGroup   = "oidc:" + benchGroup
	settleForIdle = 5 * time.Second
	// releaseIdleFor is the console's --release-when-idle-for here: longer
	// than settleForIdle, so the idle-after-use figure is that of a console
	// with its default (minutes), and short enough to measure after it.
	releaseIdleFor = 10 * time.Second
)

func main() {
	attribute := flag.Bool("attribute", false, "also print whose the manager binary's resident pages are at idle, by section and package")
	flag.Parse()
	if err := run(*attribute); err != nil {
		fmt.Fprintln(os.Stderr, "bench-console:", err)
		os.Exit(1)
	}
}

func run(attribute bool) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(filepath.Join(root, "bin"), "bench-console-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "manager")
	// Built as the image's binary is: static, no symbol tables.
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/manager")
	build.Dir, build.Stderr, build.Env = root, os.Stderr, append(os.Environ(), "CGO_ENABLED=0")
	if err := build.Run(); err != nil {
		return fmt.Errorf("building cmd/manager: %w", err)
	}
	symbols := bin + ".symbols"
	if attribute {
		// The same build with its symbol table, for rssmap: -s -w leave the
		// loaded sections where they are.
		build := exec.Command("go", "build", "-trimpath", "-o", symbols, "./cmd/manager")
		build.Dir, build.Stderr, build.Env = root, os.Stderr, append(os.Environ(), "CGO_ENABLED=0")
		if err := build.Run(); err != nil {
			return fmt.Errorf("building cmd/manager with symbols: %w", err)
		}
	}
	// Mapped as a binary read from disk is, not as the linker left it.
	if err := binpages.DropFromPageCache(bin); err != nil {
		fmt.Fprintf(os.Stderr, "warning: the console's file-backed RSS is that of a binary just written (about 5 MB more): %v\n", err)
	}

	env, err := testenv.New()
	if err != nil {
		return err
	}
	cfg, err := env.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		return err
	}
	ctx := context.Background()
	fmt.Printf("filling the API server: %d pending ToolApprovals, %d MCPServers with %d tools each\n", approvals, servers, toolsEach)
	if err := fill(ctx, c); err != nil {
		return err
	}

	// The identity provider with the people who sign in.
	idpSrv := httptest.NewUnstartedServer(nil)
	issuer := "http://" + idpSrv.Listener.Addr().String()
	var users []devidp.User
	for i := range people {
		users = append(users, devidp.User{Username: fmt.Sprintf("person%d", i), Password: "bench", Email: fmt.Sprintf("person%d@example.com", i), Groups: []string{benchGroup}})
	}
	consoleAddr := benchutil.FreeAddr()
	consoleURL := "http://" + consoleAddr
	idp, err := devidp.New(devidp.Config{Issuer: issuer, Users: users, Clients: devidp.DefaultClients()})
	if err != nil {
		return err
	}
	idpSrv.Config.Handler = idp
	idpSrv.Start()
	defer idpSrv.Close()

	user, err := env.AddUser(envtest.User{Name: "bench-console", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return err
	}
	kcPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kcPath, kubeconfig, 0o600); err != nil {
		return err
	}
	secret := filepath.Join(dir, "client-secret")
	if err := os.WriteFile(secret, []byte(devidp.ConsoleSecret), 0o600); err != nil {
		return err
	}
	as, err := runAsImage(dir, kcPath, secret)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "console", "--listen="+consoleAddr, "--public-url="+consoleURL, "--oidc-issuer-url="+issuer,
		"--oidc-client-secret-file="+secret, "--oidc-scopes=profile,email,groups", "--audit-pod-selector=",
		"--release-when-idle-for="+releaseIdleFor.String())
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kcPath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: as}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer benchutil.Stop(cmd)
	if err := waitHealthy(consoleURL); err != nil {
		return fmt.Errorf("%w; it said:\n%s", err, stderr.String())
	}
	time.Sleep(settleForIdle)
	idleRSS := benchutil.RSS(cmd.Process.Pid)
	idleParts := rssParts(cmd.Process.Pid)
	if attribute {
		r, err := rssmap.Attribute(cmd.Process.Pid, symbols)
		if err != nil {
			return fmt.Errorf("while attributing the console's resident pages: %w", err)
		}
		fmt.Println("the manager's binary pages, resident at idle:")
		r.Print(os.Stdout, 25)
	}

	// People sign in and look at the approvals page: first a few, then
	// all of them, so that the cost of one more person is the difference
	// between the two, not between the first and a console that had
	// served nothing yet.
	var browsers []*http.Client
	signInUpTo := func(n int) (int64, error) {
		for i := len(browsers); i < n; i++ {
			b, err := signIn(consoleURL, users[i])
			if err != nil {
				return 0, fmt.Errorf("%s signing in: %w", users[i].Username, err)
			}
			if _, _, err := load(b, consoleURL+"/approvals", fmt.Sprintf("Waiting for a decision (%d)", approvals)); err != nil {
				return 0, err
			}
			browsers = append(browsers, b)
		}
		// The heap between two collections swings by more than a person's
		// session: settle as at idle so that both figures are read alike.
		time.Sleep(settleForIdle)
		return benchutil.RSS(cmd.Process.Pid), nil
	}
	fewRSS, err := signInUpTo(fewPeople)
	if err != nil {
		return err
	}
	peopleRSS, err := signInUpTo(people)
	if err != nil {
		return err
	}
	approvalsP50, approvalsP90, approvalsBytes, err := timeLoads(browsers[0], consoleURL+"/approvals", fmt.Sprintf("Waiting for a decision (%d)", approvals))
	if err != nil {
		return err
	}
	serversP50, serversP90, serversBytes, err := timeLoads(browsers[1], consoleURL+"/servers", "srv-199")
	if err != nil {
		return err
	}

	// Everyone signs out and the traffic stops; the console gets the same
	// time to settle as at its start. This is the idle a console that has
	// been used sits at, which a fresh start's figure alone would hide.
	for _, b := range browsers {
		if err := signOut(b, consoleURL); err != nil {
			return err
		}
		b.CloseIdleConnections()
	}
	time.Sleep(settleForIdle)
	usedRSS := benchutil.RSS(cmd.Process.Pid)
	usedParts := rssParts(cmd.Process.Pid)
	// The console's idle release comes within 1.25 releaseIdleFor of the
	// last request.
	time.Sleep(releaseIdleFor*5/4 + time.Second - settleForIdle)
	releasedRSS := benchutil.RSS(cmd.Process.Pid)
	releasedParts := rssParts(cmd.Process.Pid)

	mb := func(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	fmt.Println()
	fmt.Printf("%-44s %12s %12s %8s  %s\n", "measure", "value", "target", "ratio", "")
	row := func(name, value, target string, ratio float64, ok bool) {
		fmt.Printf("%-44s %12s %12s %8.2f  %s\n", name, value, target, ratio, benchutil.Verdict(ok))
	}
	row(fmt.Sprintf("approvals page (%d pending), p50", approvals), ms(approvalsP50), ms(maxRenderP50), float64(approvalsP50)/float64(maxRenderP50), approvalsP50 <= maxRenderP50)
	fmt.Printf("%-44s %12s\n", "  p90", ms(approvalsP90))
	fmt.Printf("%-44s %12s\n", "  bytes", fmt.Sprintf("%d", approvalsBytes))
	row(fmt.Sprintf("servers page (%d servers), p50", servers), ms(serversP50), ms(maxRenderP50), float64(serversP50)/float64(maxRenderP50), serversP50 <= maxRenderP50)
	fmt.Printf("%-44s %12s\n", "  p90", ms(serversP90))
	fmt.Printf("%-44s %12s\n", "  bytes", fmt.Sprintf("%d", serversBytes))
	idleOK := func(rss int64) bool { return rss > 0 && rss <= maxIdleRSS }
	row("console RSS, idle (watches synced)", mb(idleRSS), mb(maxIdleRSS), float64(idleRSS)/float64(maxIdleRSS), idleOK(idleRSS))
	fmt.Printf("%-44s %12s\n", "  of which", idleParts)
	fmt.Printf("%-44s %12s\n", fmt.Sprintf("console RSS, %d people signed in", fewPeople), mb(fewRSS))
	fmt.Printf("%-44s %12s\n", fmt.Sprintf("console RSS, %d people signed in", people), mb(peopleRSS))
	fmt.Printf("%-44s %12s\n", fmt.Sprintf("  per person (%d vs %d people)", people, fewPeople), fmt.Sprintf("%.0f KB", float64(peopleRSS-fewRSS)/float64(people-fewPeople)/1024))
	row("console RSS, idle after use (all signed out)", mb(usedRSS), mb(maxIdleRSS), float64(usedRSS)/float64(maxIdleRSS), idleOK(usedRSS))
	fmt.Printf("%-44s %12s\n", "  of which", usedParts)
	// The idle release must have come and given back at least a few MB:
	// a release that never fires would print a figure that is not one.
	released := releasedRSS > 0 && releasedRSS <= usedRSS-minReleased
	row(fmt.Sprintf("console RSS, after use and unused for %s", releaseIdleFor), mb(releasedRSS), "-"+mb(minReleased), float64(releasedRSS)/float64(usedRSS), released)
	fmt.Printf("%-44s %12s\n", "  of which", releasedParts)
	if approvalsP50 > maxRenderP50 || serversP50 > maxRenderP50 || !idleOK(idleRSS) || !idleOK(usedRSS) || !released {
		return errors.New("a target was missed")
	}
	return nil
}

// fill creates the workload and lets the bench's people read it (a
// ClusterRole bound to their group, as the console impersonates them).
func fill(ctx context.Context, c client.Client) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS}}); err != nil {
		return err
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "bench-approver"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"toolapprovals", "mcpservers", "toolpolicies"}, Verbs: []string{"get", "list", "watch", "update"}}}}
	if err := c.Create(ctx, role); err != nil {
		return err
	}
	if err := c.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench-approver"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: mappedGroup}}}); err != nil {
		return err
	}
	for i := range servers {
		s := &v1alpha1.MCPServer{ObjectMeta: metav1.ObjectMeta{Namespace: benchNS, Name: fmt.Sprintf("srv-%d", i)}, Spec: v1alpha1.MCPServerSpec{
			Transport: v1alpha1.TransportStreamableHTTP, Remote: &v1alpha1.Remote{URL: fmt.Sprintf("https://srv-%d.example.com/mcp", i)}}}
		if err := c.Create(ctx, s); err != nil {
			return err
		}
		s.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", Message: "serving", LastTransitionTime: metav1.Now()}}
		for j := range toolsEach {
			s.Status.Tools = append(s.Status.Tools, v1alpha1.ToolStatus{Name: fmt.Sprintf("mcp.srv-%d.tool_%d", i, j), UpstreamName: fmt.Sprintf("tool_%d", j),
				Description: "does one thing with the files it is given, and says what it did", Risk: v1alpha1.RiskRead, SchemaDigest: "sha256:" + strings.Repeat("a", 64)})
		}
		s.Status.ToolCount = toolsEach
		if err := c.Status().Update(ctx, s); err != nil {
			return err
		}
	}
	for i := range approvals {
		a := &v1alpha1.ToolApproval{ObjectMeta: metav1.ObjectMeta{Namespace: benchNS, Name: fmt.Sprintf("ask-%d", i)}, Spec: v1alpha1.ToolApprovalSpec{Request: v1alpha1.ApprovalRequest{
			Requester: v1alpha1.ApprovalRequester{Username: "system:serviceaccount:agents:planner", Session: "s-1"}, Method: "tools/call",
			Server: fmt.Sprintf("srv-%d", i%servers), Target: fmt.Sprintf("mcp.srv-%d.tool_1", i%servers),
			ArgumentsPreview: fmt.Sprintf(`{"path":"/data/reports/%d.csv","content":"quarterly figures, row %d of the report"}`, i, i),
			Risk:             v1alpha1.RiskDestructive, Rules: []string{"policy:tools/planner#rules[1]"}, Reason: "writes need a person",
			Modes: []v1alpha1.ApprovalMode{v1alpha1.ApprovalAllowOnce, v1alpha1.ApprovalAllowSession}, ExpiresAt: metav1.NewTime(time.Now().Add(time.Hour)),
		}}}
		if err := c.Create(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// imageUser is the user the image runs its root-owned /manager as.
const imageUser = 65532

// runAsImage makes the console run as the image runs it when the bench
// runs as root: the binary, owned by root, run by the unprivileged image
// user, who gets its own files to read. The kernel grants some memory
// advice only to a file's owner, so an RSS measured as the owner could be
// one a cluster never sees. Without root, the console runs as the bench's
// own user, and the bench says so.
func runAsImage(dir string, files ...string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		fmt.Printf("not root: the console runs as uid %d, the owner of its binary (the image runs it as %d, not the owner)\n", os.Geteuid(), imageUser)
		return nil, nil
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	for _, f := range files {
		if err := os.Chown(f, imageUser, imageUser); err != nil {
			return nil, err
		}
	}
	fmt.Printf("the console runs as uid %d, its binary owned by root, as in the image\n", imageUser)
	return &syscall.Credential{Uid: imageUser, Gid: imageUser}, nil
}

// rssParts says where a process's resident pages are: its heap and
// stacks (anonymous) and its binary (file-backed).
func rssParts(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	var parts []string
	for _, line := range strings.Split(string(data), "\n") {
		for _, key := range []string{"RssAnon:", "RssFile:"} {
			if rest, ok := strings.CutPrefix(line, key); ok {
				parts = append(parts, strings.TrimSuffix(key, ":")+" "+strings.TrimSpace(rest))
			}
		}
	}
	return strings.Join(parts, ", ")
}

func waitHealthy(base string) error {
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return errors.New("manager console did not serve /healthz within 60s")
}

var loginForm = regexp.MustCompile(`<form method="post" action="([^"]+)">\s*<input type="hidden" name="authRequestID" value="([^"]+)">`)

// signIn is a person's browser signing in at the provider's login page.
func signIn(consoleURL string, u devidp.User) (*http.Client, error) {
	jar, _ := cookiejar.New(nil)
	b := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	resp, err := b.Get(consoleURL + "/login")
	if err != nil {
		return nil, err
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := loginForm.FindSubmatch(page)
	if m == nil {
		return nil, fmt.Errorf("no login page: %.300s", page)
	}
	resp, err = b.PostForm(strings.ReplaceAll(string(m[1]), "&amp;", "&"), url.Values{"authRequestID": {string(m[2])}, "username": {u.Username}, "password": {u.Password}})
	if err != nil {
		return nil, err
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "Signed in") {
		return nil, fmt.Errorf("not signed in: %.300s", page)
	}
	return b, nil
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// signOut is a person pressing "Sign out" on a page of the console.
func signOut(b *http.Client, consoleURL string) error {
	resp, err := b.Get(consoleURL + "/policies")
	if err != nil {
		return err
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindSubmatch(page)
	if m == nil {
		return fmt.Errorf("no sign-out form: %.300s", page)
	}
	req, err := http.NewRequest(http.MethodPost, consoleURL+"/logout", strings.NewReader(url.Values{"csrf": {string(m[1])}}.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", consoleURL)
	resp, err = b.Do(req)
	if err != nil {
		return err
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "Signed out") {
		return fmt.Errorf("signing out: %d %.300s", resp.StatusCode, page)
	}
	return nil
}

func load(b *http.Client, u, want string) (time.Duration, int, error) {
	start := time.Now()
	resp, err := b.Get(u)
	if err != nil {
		return 0, 0, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
		return 0, 0, fmt.Errorf("%s: %d, %v, page lacks %q", u, resp.StatusCode, err, want)
	}
	return took, len(body), nil
}

func timeLoads(b *http.Client, u, want string) (p50, p90 time.Duration, size int, err error) {
	var times []time.Duration
	for range loads {
		took, n, err := load(b, u, want)
		if err != nil {
			return 0, 0, 0, err
		}
		times, size = append(times, took), n
	}
	return benchutil.Pct(times, 50), benchutil.Pct(times, 90), size, nil
}
