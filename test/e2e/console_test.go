//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/oauth2"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/devidp"
	"github.com/mcp-operator/mcp-operator/internal/testbrowser"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

// Where make dev puts the identity provider, the bridge and the console
// (hack/cluster/dev.sh): Service IPs this machine reaches.
const (
	devIDP     = "https://10.96.0.80"
	devBridge  = "http://10.96.0.81"
	devConsole = "http://10.96.0.82"
	// hostile is what an agent puts in its arguments to attack the page.
	hostile = `<script>alert("xss")</script><a href="javascript:alert('link')">click</a> &amp; <img src=x onerror=alert(3)>`
)

var _ = Describe("people decide approvals in the console", Label("console"), func() {
	It("signs alice in at the identity provider, shows bob's waiting call live, lets alice approve it and refuses bob his own, inert and safe from other sites", func() {
		var svc corev1.Service
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: bridgeNamespace, Name: "mcp-operator-console"}, &svc)).To(Succeed(), "make dev installs the console")
		root, err := testenv.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		shots := filepath.Join(root, "test", "e2e", "artifacts", "console")
		// The provider's certificate (signed by the dev cluster's CA),
		// which the browsers accept, pinned.
		idpCert, err := os.ReadFile(filepath.Join(root, ".dev", "pki", "devidp.crt"))
		Expect(err).NotTo(HaveOccurred())
		caCert, err := os.ReadFile(filepath.Join(root, ".dev", "pki", "ca.crt"))
		Expect(err).NotTo(HaveOccurred())

		// bob is the agent: his access token (for the bridge, through the
		// desktop client's public client) in a Secret the agent pod reads.
		suffix := time.Now().UnixNano() % 1e6
		agent := fmt.Sprintf("e2e-console-agent-%d", suffix)
		askBob(agent)
		token := personToken(devidp.Bob, caCert)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: servedNamespace, Name: agent}, StringData: map[string]string{"token": token}}
		Expect(k8sClient.Create(ctx, secret)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx, secret) })
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: servedNamespace, Name: agent}}
		Expect(k8sClient.Create(ctx, sa)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx, sa) })

		alice, err := testbrowser.New(idpCert)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(alice.Close)
		Expect(alice.SignIn(devConsole, devidp.Alice.Username, devidp.Alice.Password)).To(Succeed(), "alice signs in at the identity provider's login page")
		Expect(alice.Text("#whoami")).To(Equal("oidc:alice@example.com"))
		Expect(alice.Screenshot(shots, "approvals-empty")).To(Succeed())

		// 1. bob's agent calls write_file: the policy asks a person.
		pod := startAgentWith(agent, corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: agent}}, "--timeout", "5m",
			"--call", writeFile+`={"path":"/data/e2e-console.txt","content":`+fmt.Sprintf("%q", hostile)+`}`)
		pending := pendingApproval("oidc:bob@example.com", writeFile, "")
		approve := "approve-" + servedNamespace + "-" + pending.Name
		// alice's open page shows it without a reload (the event stream).
		Expect(alice.Do(chromedp.WaitVisible(chromedp.ID(approve)))).To(Succeed(), "the waiting call appears on alice's open page")
		// The bridge's preview is JSON (with <, > and & escaped as \u003c…):
		// the hostile text is shown as that text.
		Expect(alice.Text("pre.args")).To(ContainSubstring(`javascript:alert('link')`))
		Expect(alice.Dialogs()).To(BeEmpty(), "script from the agent's arguments ran")
		Expect(alice.Count("script")).To(Equal(1))
		Expect(alice.Count(`a[href^="javascript"], img, [onerror]`)).To(Equal(0))
		Expect(alice.Screenshot(shots, "approvals-pending")).To(Succeed())

		// 2. bob, the agent's own identity, signed in cannot approve it.
		bob, err := testbrowser.New(idpCert)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(bob.Close)
		grantBobDeciding()
		Expect(bob.SignIn(devConsole, devidp.Bob.Username, devidp.Bob.Password)).To(Succeed())
		// The API server authorizes by the new RoleBinding a moment after it
		// is made: bob's page lists the call once it does.
		Eventually(func() (int, error) {
			if err := bob.Do(chromedp.Navigate(devConsole + "/approvals")); err != nil {
				return 0, err
			}
			return bob.Count("#" + approve)
		}).WithTimeout(30*time.Second).WithPolling(time.Second).Should(Equal(1), "bob's page lists the waiting call")
		Expect(bob.Do(chromedp.Click(chromedp.ID(approve)))).To(Succeed())
		Expect(bob.Text("p.flash.error")).To(ContainSubstring("nobody decides their own request"))
		Expect(bob.Screenshot(shots, "own-request-refused")).To(Succeed())

		// 3. A page of another site posts a decision with alice's browser:
		// refused, nothing recorded.
		attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<!doctype html><body onload="document.forms[0].submit()"><form method="post" action="%s/approvals/%s/%s">`+
				`<input name="verdict" value="AllowOnce"><input name="csrf" value="guessed"></form></body>`, devConsole, servedNamespace, pending.Name)
		}))
		DeferCleanup(attacker.Close)
		Expect(alice.Do(chromedp.Navigate(attacker.URL), chromedp.WaitVisible(chromedp.ID("why")))).To(Succeed())
		Expect(alice.Text("#why")).To(ContainSubstring("Nothing was changed"))
		Expect(alice.Screenshot(shots, "csrf-refused")).To(Succeed())
		var a mcpv1alpha1.ToolApproval
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pending), &a)).To(Succeed())
		Expect(a.Spec.Decision).To(BeNil(), "a post from another site or the requester decided")
		Consistently(callSteps).WithArguments(pod).WithTimeout(time.Second).Should(BeEmpty(), "the call went on before a person decided")

		// 4. alice approves: the agent's call completes.
		Expect(alice.Do(chromedp.Navigate(devConsole+"/approvals"), chromedp.Click(chromedp.ID(approve)))).To(Succeed())
		Expect(alice.Text("p.flash")).To(ContainSubstring("Approved once"))
		Expect(alice.Screenshot(shots, "approvals-decided")).To(Succeed())
		Eventually(callSteps).WithArguments(pod).WithTimeout(60 * time.Second).WithPolling(250 * time.Millisecond).Should(HaveLen(1))
		Expect(callSteps(pod)[0].Error).To(BeEmpty())
		Expect(approvalPhase(pending)).To(Equal(mcpv1alpha1.ApprovalApproved))

		// Every page, once more with what the cluster holds now.
		for _, page := range []struct{ path, name string }{
			{"/servers", "servers"}, {"/servers/default/filesystem", "server"},
			{"/policies?namespace=default&tool=mcp.filesystem.write_file&as=oidc:bob@example.com", "policies"}, {"/activity", "activity"},
		} {
			Expect(alice.Do(chromedp.Navigate(devConsole+page.path), chromedp.WaitVisible(chromedp.ID("main")))).To(Succeed())
			Expect(alice.Dialogs()).To(BeEmpty())
			Expect(alice.Screenshot(shots, page.name)).To(Succeed())
		}
		// The activity page read the call from the bridge's audit stream.
		Eventually(func() (string, error) {
			if err := alice.Do(chromedp.Navigate(devConsole + "/activity")); err != nil {
				return "", err
			}
			return alice.Text("main")
		}).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(ContainSubstring(writeFile))
	})
})

// askBob makes the ToolPolicy that asks a person, through ToolApprovals
// only, before bob writes a file.
func askBob(name string) {
	tp := &mcpv1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: servedNamespace, Name: name},
		Spec: mcpv1alpha1.ToolPolicySpec{
			Subjects: []mcpv1alpha1.Subject{{Kind: mcpv1alpha1.SubjectUser, Name: "oidc:bob@example.com"}},
			Rules:    []mcpv1alpha1.ToolRule{{Tools: []string{writeFile}, Decision: mcpv1alpha1.DecisionAsk, Reason: "e2e: a person decides in the console"}},
			Approval: mcpv1alpha1.ApprovalSpec{
				Channels: []mcpv1alpha1.ApprovalChannel{mcpv1alpha1.ChannelToolApproval},
				Modes:    []mcpv1alpha1.ApprovalMode{mcpv1alpha1.ApprovalAllowOnce},
				Timeout:  metav1.Duration{Duration: 5 * time.Minute},
			},
		},
	}
	Expect(k8sClient.Create(ctx, tp)).To(Succeed())
	DeferCleanup(func() { _ = k8sClient.Delete(ctx, tp) })
}

// grantBobDeciding lets bob decide ToolApprovals as far as RBAC goes: what
// stops him deciding his own request is the admission policy.
func grantBobDeciding() {
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: servedNamespace, Name: "e2e-console-bob"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "mcp-approver"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "oidc:bob@example.com"}},
	}
	Expect(k8sClient.Create(ctx, binding)).To(Succeed())
	DeferCleanup(func() { _ = k8sClient.Delete(ctx, binding) })
}

// personToken signs user in at the dev identity provider as the desktop
// client does (authorization code with PKCE, for the bridge's resource)
// and returns the access token. ca signs the provider's certificate.
func personToken(user devidp.User, ca []byte) string {
	pool := x509.NewCertPool()
	Expect(pool.AppendCertsFromPEM(ca)).To(BeTrue())
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	ctx := context.WithValue(ctx, oauth2.HTTPClient, hc)
	conf := oauth2.Config{ClientID: devidp.MCPClientID, RedirectURL: devidp.LoopbackRedirectURI, Scopes: []string{"openid"},
		Endpoint: oauth2.Endpoint{AuthURL: devIDP + "/authorize", TokenURL: devIDP + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	loc, err := devidp.CompleteLogin(ctx, hc, conf.AuthCodeURL("e2e", oauth2.S256ChallengeOption(verifier),
		oauth2.SetAuthURLParam("resource", devBridge+"/mcp")), user)
	Expect(err).NotTo(HaveOccurred())
	tok, err := conf.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	Expect(err).NotTo(HaveOccurred())
	Expect(strings.Count(tok.AccessToken, ".")).To(Equal(2), "a JWT access token")
	return tok.AccessToken
}
