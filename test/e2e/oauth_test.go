//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/devidp"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// The dev cluster's identity provider (hack/cluster/devidp.yaml): its issuer,
// its token endpoint (as an MCPServer names it for token exchange) and its
// keys; and the bridge's resource as make dev configures it (its public URL
// and MCP endpoint).
const (
	devidpIssuer      = "https://10.96.0.80"
	devidpTokenURL    = devidpIssuer + "/oauth/token"
	devidpKeysURL     = devidpIssuer + "/keys"
	devBridgeResource = "http://10.96.0.81/mcp"
	devBridgeMetadata = "http://10.96.0.81/.well-known/oauth-protected-resource/mcp"
)

// desktopRun is what test/e2e/oauth-client.mjs reports.
type desktopRun struct {
	// Requests the SDK made to the bridge and for its OAuth discovery, in order.
	Requests []struct {
		URL             string `json:"url"`
		Method          string `json:"method"`
		Status          int    `json:"status"`
		WWWAuthenticate string `json:"wwwAuthenticate"`
	} `json:"requests"`
	RegisteredClient    string   `json:"registeredClient"`
	Resource            string   `json:"resource"`
	CodeChallengeMethod string   `json:"codeChallengeMethod"`
	Tools               []string `json:"tools"`
	Call                *struct {
		IsError bool `json:"isError"`
	} `json:"call"`
	AccessToken string `json:"accessToken"`
	Fatal       string `json:"fatal"`
}

// runDesktopClient runs the TypeScript SDK's client on this machine, outside
// the pods' network, as a person following the steps make dev printed: the
// client configuration in .dev/desktop-client.json, the dev cluster's CA in
// NODE_EXTRA_CA_CERTS, and the person's sign-in.
func runDesktopClient(user devidp.User, tool string) desktopRun {
	root, err := testenv.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	sdk, err := testpeers.NPMPackageDir("@modelcontextprotocol/sdk")
	Expect(err).NotTo(HaveOccurred())
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, "node", filepath.Join(root, "test", "e2e", "oauth-client.mjs"))
	cmd.Env = append(os.Environ(), "MCP_SDK_DIR="+sdk,
		"CLIENT_CONFIG="+filepath.Join(root, ".dev", "desktop-client.json"),
		"NODE_EXTRA_CA_CERTS="+filepath.Join(root, ".dev", "pki", "ca.crt"),
		"SIGN_IN_USER="+user.Username, "SIGN_IN_PASSWORD="+user.Password, "CALL_TOOL="+tool)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred(), "the TypeScript client failed: %s", stderr.String())
	var run desktopRun
	Expect(json.Unmarshal(out, &run)).To(Succeed(), string(out))
	return run
}

// providerKeys are the identity provider's published signing keys, fetched
// from this machine through the node's service network, trusting the dev
// cluster's CA as the printed steps do.
func providerKeys() jose.JSONWebKeySet {
	root, err := testenv.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	pem, err := os.ReadFile(filepath.Join(root, ".dev", "pki", "ca.crt"))
	Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	Expect(pool.AppendCertsFromPEM(pem)).To(BeTrue(), "no certificate in .dev/pki/ca.crt")
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := c.Get(devidpKeysURL)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusOK))
	var keys jose.JSONWebKeySet
	Expect(json.NewDecoder(resp.Body).Decode(&keys)).To(Succeed())
	Expect(keys.Keys).NotTo(BeEmpty())
	return keys
}

// verifiedClaims are the claims of a token whose RS256 signature one of the
// provider's keys verifies, and whose issuer is the provider.
func verifiedClaims(keys jose.JSONWebKeySet, token string) map[string]any {
	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.RS256})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	kid := jws.Signatures[0].Header.KeyID
	signer := keys.Key(kid)
	ExpectWithOffset(1, signer).To(HaveLen(1), "key %q is not among the provider's keys", kid)
	payload, err := jws.Verify(signer[0])
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), "the token's signature does not verify with the provider's key %q", kid)
	var claims map[string]any
	ExpectWithOffset(1, json.Unmarshal(payload, &claims)).To(Succeed())
	ExpectWithOffset(1, claims).To(HaveKeyWithValue("iss", devidpIssuer))
	return claims
}

// clusterCACertificate is a serving certificate for the address, signed by
// the dev cluster's CA (.dev/pki), which the MCPServer names as its server's
// CA (tlsSecretRef).
func clusterCACertificate(addr netip.Addr) tls.Certificate {
	root, err := testenv.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	ca, err := tls.LoadX509KeyPair(filepath.Join(root, ".dev", "pki", "ca.crt"), filepath.Join(root, ".dev", "pki", "ca.key"))
	Expect(err).NotTo(HaveOccurred())
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "e2e recording server"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{addr.AsSlice()},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Leaf, &key.PublicKey, ca.PrivateKey)
	Expect(err).NotTo(HaveOccurred())
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// resourceMetadataParam is the resource_metadata of a Bearer challenge.
var resourceMetadataParam = regexp.MustCompile(`resource_metadata="([^"]*)"`)

func personPolicy(name, user string, tools ...string) {
	tp := &mcpv1alpha1.ToolPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: servedNamespace, Name: name},
		Spec: mcpv1alpha1.ToolPolicySpec{
			Subjects: []mcpv1alpha1.Subject{{Kind: mcpv1alpha1.SubjectUser, Name: user}},
			Rules:    []mcpv1alpha1.ToolRule{{Tools: tools, Decision: mcpv1alpha1.DecisionAllow}},
		},
	}
	Expect(k8sClient.Create(ctx, tp)).To(Succeed())
	DeferCleanup(func() { _ = k8sClient.Delete(ctx, tp) })
}

var _ = Describe("people signed in at the identity provider", Label("oauth"), func() {
	It("reach the bridge from a desktop client, each under their own policy, each with their own exchanged token upstream", func() {
		root, err := testenv.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		Expect(filepath.Join(root, ".dev", "desktop-client.json")).To(BeAnExistingFile(),
			"make dev printed no desktop client configuration: it does when the bridge accepts the provider's tokens")

		// A recording proxy in front of the sample everything-server, published
		// as a remote server whose callers' tokens are exchanged at the
		// provider by the bridge's own client.
		everything := get(&mcpv1alpha1.MCPServer{ObjectMeta: metav1.ObjectMeta{Namespace: servedNamespace, Name: "everything"}})
		Expect(everything.Status.Endpoint).NotTo(BeNil(), "the sample everything-server has no endpoint")
		upstream := recordCalls(everything.Status.Endpoint.URL, clusterCACertificate)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: servedNamespace, Name: "e2e-bridge-oauth-client"},
			StringData: map[string]string{"client_id": devidp.BridgeClientID, "client_secret": devidp.BridgeSecret}}
		Expect(k8sClient.Create(ctx, secret)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx, secret) })
		// The recording server's CA, for the controller's probe and the bridge.
		caPEM, err := os.ReadFile(filepath.Join(root, ".dev", "pki", "ca.crt"))
		Expect(err).NotTo(HaveOccurred())
		ca := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: servedNamespace, Name: "e2e-recorder-ca"},
			Data: map[string][]byte{"ca.crt": caPEM}}
		Expect(k8sClient.Create(ctx, ca)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx, ca) })
		server := &mcpv1alpha1.MCPServer{
			ObjectMeta: metav1.ObjectMeta{Namespace: servedNamespace, Name: "e2e-recorded"},
			Spec: mcpv1alpha1.MCPServerSpec{Transport: mcpv1alpha1.TransportStreamableHTTP, Remote: &mcpv1alpha1.Remote{
				URL: upstream.url,
				Auth: &mcpv1alpha1.RemoteAuth{TokenExchange: &mcpv1alpha1.TokenExchange{
					TokenURL: devidpTokenURL, Resource: upstream.url,
					ClientSecretRef: mcpv1alpha1.LocalSecretReference{Name: secret.Name},
				}, TLSSecretRef: &mcpv1alpha1.LocalSecretReference{Name: ca.Name}},
			}},
		}
		Expect(k8sClient.Create(ctx, server)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx, server) })
		Eventually(ready(server)).WithTimeout(90 * time.Second).Should(Equal("True/Serving"))

		// Alice may use every tool of the server, Bob one.
		const tool = "mcp.e2e-recorded.test_simple_text"
		personPolicy("e2e-oauth-alice", "oidc:"+devidp.Alice.Email, "mcp.e2e-recorded.*")
		personPolicy("e2e-oauth-bob", "oidc:"+devidp.Bob.Email, tool)
		recorded := func(tools []string) []string {
			return slices.DeleteFunc(slices.Clone(tools), func(t string) bool { return !strings.HasPrefix(t, "mcp.e2e-recorded.") })
		}

		runs := map[string]desktopRun{}
		for _, u := range []devidp.User{devidp.Alice, devidp.Bob} {
			// The bridge sees the new policy and server within moments.
			Eventually(func(g Gomega) {
				run := runDesktopClient(u, tool)
				g.Expect(run.Fatal).To(BeEmpty())
				g.Expect(run.Tools).To(ContainElement(tool))
				g.Expect(run.Call).NotTo(BeNil())
				g.Expect(run.Call.IsError).To(BeFalse())
				runs[u.Email] = run
			}).WithTimeout(60 * time.Second).WithPolling(3 * time.Second).Should(Succeed())
		}
		alice, bob := runs[devidp.Alice.Email], runs[devidp.Bob.Email]
		keys := providerKeys()
		for _, run := range []desktopRun{alice, bob} {
			// The bridge's first answer was a 401 whose challenge named the
			// protected resource metadata, and the client read that document.
			Expect(run.Requests).NotTo(BeEmpty())
			first := run.Requests[0]
			Expect(first.URL).To(Equal(devBridgeResource))
			Expect(first.Status).To(Equal(http.StatusUnauthorized))
			Expect(first.WWWAuthenticate).To(HavePrefix("Bearer "))
			m := resourceMetadataParam.FindStringSubmatch(first.WWWAuthenticate)
			Expect(m).To(HaveLen(2), "the 401's challenge %q names no resource_metadata", first.WWWAuthenticate)
			Expect(m[1]).To(Equal(devBridgeMetadata))
			Expect(run.Requests).To(ContainElement(SatisfyAll(
				HaveField("URL", m[1]), HaveField("Method", http.MethodGet), HaveField("Status", http.StatusOK))),
				"the client did not read the metadata the challenge named")
			// It registered itself and asked for a token for the bridge's
			// resource, exactly, with PKCE S256.
			Expect(run.RegisteredClient).To(HavePrefix("dyn-"))
			Expect(run.CodeChallengeMethod).To(Equal("S256"))
			Expect(run.Resource).To(Equal(devBridgeResource))
			Expect(devidp.Audience(verifiedClaims(keys, run.AccessToken))).To(ContainElement(devBridgeResource))
		}
		// Each sees the catalog of their own policy.
		Expect(len(recorded(alice.Tools))).To(BeNumerically(">", 1))
		Expect(recorded(bob.Tools)).To(Equal([]string{tool}))

		// Each person's call carried a token the provider issued to the bridge
		// for that person and for this server: not the client's own, and not
		// the other person's.
		bySubject := map[string]string{}
		for _, c := range upstream.calls() {
			bearer, ok := strings.CutPrefix(c.header.Get("Authorization"), "Bearer ")
			Expect(ok).To(BeTrue(), "a call reached the server without a bearer token")
			Expect(bearer).NotTo(BeElementOf(alice.AccessToken, bob.AccessToken), "a client's own token went upstream")
			claims := verifiedClaims(keys, bearer)
			Expect(devidp.Audience(claims)).To(ContainElement(upstream.url))
			Expect(claims["act"]).To(HaveKeyWithValue("sub", devidp.BridgeClientID))
			sub, _ := claims["sub"].(string)
			bySubject[sub] = bearer
		}
		Expect(bySubject).To(HaveKey(devidp.Alice.Email))
		Expect(bySubject).To(HaveKey(devidp.Bob.Email))
		Expect(bySubject[devidp.Alice.Email]).NotTo(Equal(bySubject[devidp.Bob.Email]))
	})
})
