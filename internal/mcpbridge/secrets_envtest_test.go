package mcpbridge

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// TestSecretsReadOnSpecChangesOnly: every probe writes an MCPServer's
// status, and the bridge rebuilds its table on each write. Secrets must not
// be read again then (that cost N servers N² reads per probe interval),
// only when a server's spec changes or at the periodic resync. Counted with
// the API server's own request metrics.
func TestSecretsReadOnSpecChangesOnly(t *testing.T) {
	rt, _, k, sink := startRuntimeWith(t, func(o *Options) { o.SecretsResync = time.Hour }, "secret-reads")
	_, cs := startAPIServer(t)
	ctx := context.Background()
	if err := k.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "secret-reads", Name: "creds"}, StringData: map[string]string{"key": "s3cret-value-for-header"}}); err != nil {
		t.Fatal(err)
	}
	s := bridgetest.Published(t, "secret-reads", "everything", testpeers.GoEverything(t, false).URL, v1alpha1.ToolsSpec{})
	s.Spec.Remote.HeadersFrom = []v1alpha1.HeaderFromSecret{{Name: "X-Api-Key", SecretKeyRef: v1alpha1.SecretKeySelector{Name: "creds", Key: "key"}}}
	obj := apply(t, k, s)
	testkit.Eventually(t, "the server is served", func() bool { _, _, ok := rt.Registry.Server("everything"); return ok })

	before := secretGets(t, cs)
	for i := range 10 {
		updateStatus(t, k, obj, func(st *v1alpha1.MCPServerStatus) {
			now := metav1.NewTime(time.Now().Add(time.Duration(i) * time.Second))
			st.LastProbeTime = &now
		})
	}
	marker := "sha256:" + strings.Repeat("ab", 32)
	updateStatus(t, k, obj, func(st *v1alpha1.MCPServerStatus) { st.CatalogDigest = marker })
	testkit.Eventually(t, "the bridge saw every status write", func() bool {
		srv, _, ok := rt.Registry.Server("everything")
		return ok && srv.CatalogDigest == marker
	})
	if n := secretGets(t, cs) - before; n != 0 {
		t.Fatalf("11 status writes made the bridge read Secrets %d times, want 0", n)
	}

	var cur v1alpha1.MCPServer
	if err := k.Get(ctx, client.ObjectKeyFromObject(obj), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Tools.TrustAnnotations = true
	if err := k.Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "a spec change reads the server's Secrets again", func() bool { return secretGets(t, cs) > before })

	// A Secret that can no longer be read: its value is still redacted
	// (redaction fails closed), after the next reading.
	redacts := func() bool {
		r := rt.Watcher.Redactor("secret-reads", "everything")
		return r != nil && !strings.Contains(r.String("leak: s3cret-value-for-header", nil), "s3cret")
	}
	if !redacts() {
		t.Fatal("the server's Secret value is not redacted")
	}
	// The production audit writer knows the values too: an event carrying
	// one (an upstream's error message) is written without it.
	if _, err := rt.Audit.Write("", "", audit.MCPCallFailed{Server: "everything", Error: "denied for key s3cret-value-for-header"}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Audit.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if log := sink.String(); strings.Contains(log, "s3cret-value-for-header") || !strings.Contains(log, "denied for key [REDACTED:secret]") {
		t.Fatalf("the audit log holds the server's Secret value or lost the event:\n%s", log)
	}
	if err := k.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "secret-reads", Name: "creds"}}); err != nil {
		t.Fatal(err)
	}
	installed := rt.Watcher.Redactor("secret-reads", "everything")
	if err := k.Get(ctx, client.ObjectKeyFromObject(obj), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Tools.TrustAnnotations = false
	if err := k.Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}
	// Every reading installs a redactor of its own.
	testkit.Eventually(t, "the bridge installs a new reading of the Secrets", func() bool {
		return rt.Watcher.Redactor("secret-reads", "everything") != installed
	})
	if !redacts() {
		t.Fatal("a Secret that could not be read stopped being redacted")
	}
}

// secretGets is how many GETs of Secrets the API server has served.
func secretGets(t *testing.T, cs *kubernetes.Clientset) int {
	t.Helper()
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="secrets"`) || !strings.Contains(line, `verb="GET"`) {
			continue
		}
		n, err := strconv.Atoi(line[strings.LastIndexByte(line, ' ')+1:])
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		total += n
	}
	return total
}
