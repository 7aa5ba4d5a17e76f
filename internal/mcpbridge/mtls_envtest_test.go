package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/k8s/credentials"
	mcpclient "github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mtlstest"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// TestRemoteServerOverMutualTLS: a remote MCPServer whose tlsSecretRef
// holds a CA and a client certificate is reached by the bridge over mutual
// TLS, with the credentials it reads from the Secret on envtest's API
// server. The upstream is the go-sdk everything-server behind the test's
// TLS-terminating proxy (mtlstest.Front), which requires a client
// certificate its CA signed: the handshake is what is tested. Rotating the
// Secret moves new connections to the new certificate while a call in
// flight finishes; a wrong certificate or CA fails calls with a reason and
// the bridge serves on.
func TestRemoteServerOverMutualTLS(t *testing.T) {
	ns := freshNamespace("mtls")
	rt, url, k, _ := startRuntimeWith(t, func(o *Options) { o.SecretsResync = 200 * time.Millisecond }, ns)
	ctx := context.Background()

	ca := mtlstest.NewCA(t, "mcp test CA")
	rogue := mtlstest.NewCA(t, "rogue CA")
	// An impostor has the trusted CA's name but not its key: its
	// certificates pass the client's match against the CAs the server
	// accepts, and are refused by the server's verification.
	impostor := mtlstest.NewCA(t, "mcp test CA")
	up := testpeers.GoEverything(t, false)
	front := mtlstest.NewFront(t, ca, fmt.Sprintf("http://127.0.0.1:%d", up.Port))

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "upstream-tls"}}
	tlsData := func(caPEM []byte, client *mtlstest.Pair) map[string][]byte {
		d := map[string][]byte{"ca.crt": caPEM}
		if client != nil {
			d["tls.crt"], d["tls.key"] = client.Cert, client.Key
		}
		return d
	}
	setSecret := func(data map[string][]byte) {
		t.Helper()
		secret.Data = data
		if err := k.Update(ctx, secret); err != nil {
			t.Fatalf("while rotating the Secret: %v", err)
		}
	}
	first := ca.Client(t, "bridge-client-1")
	secret.Data = tlsData(ca.PEM, &first)
	if err := k.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}

	// Published as the controller publishes it: probed with the
	// credentials the shared reader makes of the Secret.
	spec := v1alpha1.MCPServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secure"}}
	spec.Spec.Remote = &v1alpha1.Remote{
		URL:  front.URL + "/mcp",
		Auth: &v1alpha1.RemoteAuth{TLSSecretRef: &v1alpha1.LocalSecretReference{Name: secret.Name}},
	}
	creds, err := credentials.Read(ctx, k, &spec)
	if err != nil {
		t.Fatal(err)
	}
	s := bridgetest.PublishedOver(t, ns, "secure", streamhttp.Options{URL: spec.Spec.Remote.URL, TLS: creds.TLS}, v1alpha1.ToolsSpec{})
	s.Spec.Remote = spec.Spec.Remote
	apply(t, k, s)
	createPolicy(t, k, toolPolicy(ns, "agents", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.secure.*")))
	front.Reset()

	c := connectTo(t, url, "alice-token", mcpclient.EraSession)
	testkit.Eventually(t, "the bridge lists the server's tools over mTLS", func() bool {
		items, err := c.ListTools(testkit.Context(t), mcpclient.Limits{})
		return err == nil && len(items) > 5
	})
	call := func() (json.RawMessage, error) {
		return c.CallTool(testkit.Context(t), "mcp.secure.test_simple_text", json.RawMessage(`{}`))
	}
	res, err := call()
	if err != nil {
		t.Fatalf("a call over mTLS: %v", err)
	}
	if got := firstText(t, res); !strings.Contains(got, "test") {
		t.Fatalf("the call answered %q", got)
	}
	if subjects := front.Subjects(); len(subjects) == 0 || slices.ContainsFunc(subjects, func(s string) bool { return s != "bridge-client-1" }) {
		t.Fatalf("the proxy saw client certificates %v, want bridge-client-1 only", subjects)
	}

	// Rotation: a call held at the proxy on the connection made with the
	// first certificate finishes; calls after the Secret changed are made
	// on new connections with the second one.
	hold := front.HoldNext(`"test_simple_text"`)
	held := make(chan error, 1)
	go func() {
		_, err := call()
		held <- err
	}()
	select {
	case <-hold.Held:
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not reach the proxy")
	}
	second := ca.Client(t, "bridge-client-2")
	setSecret(tlsData(ca.PEM, &second))
	testkit.Eventually(t, "calls use the rotated client certificate", func() bool {
		front.Reset()
		_, err := call()
		subjects := front.Subjects()
		return err == nil && len(subjects) > 0 && !slices.Contains(subjects, "bridge-client-1")
	})
	// The old connection stays open while its call runs, and is closed
	// (its session ended) once the call is over.
	endOfFirst := mtlstest.Request{Method: http.MethodDelete, Subject: "bridge-client-1"}
	if slices.Contains(front.Requests(), endOfFirst) {
		t.Fatal("the connection made with the first certificate was closed under its call in flight")
	}
	hold.Release()
	select {
	case err := <-held:
		if err != nil {
			t.Fatalf("the call in flight across the rotation failed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight across the rotation did not end")
	}
	if subjects := front.Subjects(); !slices.Contains(subjects, "bridge-client-2") {
		t.Fatalf("the proxy saw %v after the rotation, want bridge-client-2", subjects)
	}
	testkit.Eventually(t, "the connection made with the first certificate is closed after its last call", func() bool {
		return slices.Contains(front.Requests(), endOfFirst)
	})

	// Credentials the server or the bridge refuse: each call fails with
	// mcp_server_unavailable and says why; the bridge serves on. Each case's
	// error differs from the one before, so waiting for it waits for the
	// bridge to have read the Secret.
	for _, tc := range []struct {
		name    string
		data    map[string][]byte
		agent   string // in the error the agent gets
		refusal string // in the proxy's log, when it is the one refusing
	}{
		// Go's TLS client sends only a certificate whose issuer is among
		// the CAs the server names: this one is not sent at all.
		{"a client certificate of another CA", tlsData(ca.PEM, ptr.To(rogue.Client(t, "intruder"))), "tls: certificate required", "didn't provide a certificate"},
		{"a client certificate of a CA with the trusted CA's name", tlsData(ca.PEM, ptr.To(impostor.Client(t, "impostor"))), "remote error: tls: unknown certificate authority", "certificate signed by unknown authority"},
		{"no client certificate", tlsData(ca.PEM, nil), "tls: certificate required", "didn't provide a certificate"},
		{"a CA that did not sign the server's certificate", tlsData(rogue.PEM, &first), "certificate signed by unknown authority", "remote error: tls: bad certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setSecret(tc.data)
			var last error
			testkit.Eventually(t, "calls fail with the new credentials", func() bool {
				front.Reset()
				_, last = call()
				return last != nil && strings.Contains(last.Error(), tc.agent)
			})
			if rpcCode(last) != CodeUpstream || !strings.Contains(last.Error(), "mcp_server_unavailable") {
				t.Fatalf("the call failed with %v, want %d and mcp_server_unavailable", last, CodeUpstream)
			}
			// The proxy logs its side of the handshake on its own goroutine,
			// which may come after the bridge has the error.
			testkit.Eventually(t, "the proxy logs "+tc.refusal, func() bool { return strings.Contains(front.Refusals(), tc.refusal) })
			// The connection the refused credentials replaced is drained: it
			// may still end its sessions with the last good certificate. So
			// may the first one: it holds two sessions (the shared one and
			// the agent's), and the wait above saw one DELETE; the other,
			// sent at the same moment, can reach the proxy after this
			// subtest's Reset on a loaded machine (then this check failed,
			// though no refused certificate got through).
			for _, r := range front.Requests() {
				if r.Subject != "bridge-client-2" && r != endOfFirst {
					t.Fatalf("requests reached the server with client certificates %v", front.Requests())
				}
			}
		})
	}

	// Fixed again: calls go through, the bridge is up.
	setSecret(tlsData(ca.PEM, &second))
	testkit.Eventually(t, "calls succeed once the Secret is right again", func() bool {
		_, err := call()
		return err == nil
	})
	ops := httptest.NewServer(rt.OpsHandler)
	defer ops.Close()
	resp, err := http.Get(ops.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		t.Fatalf("/healthz: %d %q", resp.StatusCode, body)
	}
	if _, conn, ok := rt.Registry.Server("secure"); !ok || conn.Target().Credentials == "" {
		t.Fatal("the server is not served with its credentials")
	}
}
