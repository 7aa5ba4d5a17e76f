package controller

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// leakToken is a GitHub token (fake) the leaky server writes besides the
// value it was given.
const leakToken = "ghp_Q7vK2mX9pL4wR8tY1nB6cZ3fH5jD0sA2gE7u"

// leakyServer is an MCP server (session era) that writes the bearer token
// it was sent into its tool's title and description, and, once failing is
// set, into the error it answers tools/list with. No real server quotes
// its credentials on demand; this one stands in for that fault only.
func leakyServer(failing *atomic.Bool) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &m) != nil || m.ID == nil {
			w.WriteHeader(http.StatusAccepted) // a notification
			return
		}
		given := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", "leaky")
		reply := func(result string) {
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":`+result+`}`)
		}
		switch m.Method {
		case "initialize":
			reply(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"leaky","version":"1"}}`)
		case "tools/list":
			if failing.Load() {
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"error":{"code":-32001,"message":"login with `+given+` and `+leakToken+` failed"}}`)
				return
			}
			reply(`{"tools":[{"name":"lookup","title":"Lookup as ` + given + `","description":"Looks up records with the key ` + given + ` or ` + leakToken + `.","inputSchema":{"type":"object"}}]}`)
		default:
			reply(`{}`)
		}
	}))
	DeferCleanup(srv.Close)
	return srv.URL + "/mcp"
}

var _ = Describe("MCPServer controller with a server that leaks its credentials", func() {
	It("publishes the catalog and the probe's errors without the server's Secret value or a token", func() {
		ns := createNamespace()
		startManager([]string{ns}, reconcilerFor(clocktesting.NewFakeClock(time.Now().Truncate(time.Second))))
		const value = "the-leaky-servers-own-s3cret"
		Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token"}, StringData: map[string]string{"token": value}})).To(Succeed())
		var failing atomic.Bool
		s := &mcpv1alpha1.MCPServer{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leaky"},
			Spec: mcpv1alpha1.MCPServerSpec{
				Transport: mcpv1alpha1.TransportStreamableHTTP,
				Remote: &mcpv1alpha1.Remote{
					URL:  leakyServer(&failing),
					Auth: &mcpv1alpha1.RemoteAuth{BearerTokenSecretRef: &mcpv1alpha1.SecretKeySelector{Name: "token", Key: "token"}},
				},
			},
		}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		Eventually(condition(s, mcpv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).Should(haveReason(metav1.ConditionTrue, mcpv1alpha1.ReasonServing))

		tools := get(s).Status.Tools
		Expect(tools).To(HaveLen(1))
		Expect(tools[0].Title).To(Equal("Lookup as [REDACTED:secret]"))
		Expect(tools[0].Description).To(Equal("Looks up records with the key [REDACTED:secret] or [REDACTED:github-token]."))

		// The server now fails its probe with an error quoting both.
		failing.Store(true)
		Eventually(func(g Gomega) {
			poke(s)
			c := condition(s, mcpv1alpha1.ConditionAvailable)()
			g.Expect(c).To(haveReason(metav1.ConditionFalse, mcpv1alpha1.ReasonProbeFailed))
			g.Expect(c.Message).To(ContainSubstring("login with [REDACTED:secret] and [REDACTED:github-token] failed"))
		}).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

		published, err := json.Marshal(get(s).Status)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(published)).NotTo(Or(ContainSubstring(value), ContainSubstring(leakToken)))
		Expect(strings.Join(eventsOf(s), "\n")).NotTo(Or(ContainSubstring(value), ContainSubstring(leakToken)))
	})

	It("names a remote server it cannot reach without the credentials in its URL", func() {
		ns := createNamespace()
		startManager([]string{ns}, reconcilerFor(clocktesting.NewFakeClock(time.Now().Truncate(time.Second))))
		addr := fmt.Sprintf("127.0.0.1:%d", testkit.FreePort(GinkgoT())) // nothing listens there
		s := &mcpv1alpha1.MCPServer{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unreachable"},
			Spec: mcpv1alpha1.MCPServerSpec{
				Transport: mcpv1alpha1.TransportStreamableHTTP,
				Remote:    &mcpv1alpha1.Remote{URL: "http://urluser:pa55word@" + addr + "/mcp?token=s3cret-token&sig=Zq81xw"},
			},
		}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		Eventually(func() string {
			if c := condition(s, mcpv1alpha1.ConditionReady)(); c != nil {
				return c.Reason + ": " + c.Message
			}
			return ""
		}).WithTimeout(30 * time.Second).
			Should(And(HavePrefix("ProbeFailed: probe failed: "), ContainSubstring("http://REDACTED@"+addr), ContainSubstring("connection refused")))
		shown := Or(ContainSubstring("urluser"), ContainSubstring("pa55word"), ContainSubstring("s3cret-token"), ContainSubstring("Zq81xw"))
		conditions, err := json.Marshal(get(s).Status.Conditions)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(conditions)).NotTo(shown)
		Expect(strings.Join(eventsOf(s), "\n")).NotTo(shown)
	})
})
