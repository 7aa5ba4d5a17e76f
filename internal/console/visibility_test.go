package console

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// otherNamespace is the test's world in a second, new namespace, seen by
// the same console.
func (e *env) otherNamespace() *env {
	e.t.Helper()
	o := *e
	o.ns = e.ns + "-other"
	o.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.ns}})
	return &o
}

// A person who may list namespace A and not B sees A's approvals and
// servers and nothing of B's, not even B's name.
func TestPartialVisibility(t *testing.T) {
	e := newEnv(t)
	other := e.otherNamespace()
	e.approver(aliceUser)
	e.approval("seen-1", bobUser, `{}`)
	other.approval("hidden-1", bobUser, `{}`)
	e.server("fs")
	other.server("secretfs")
	b := e.browser()
	b.signIn(alice)
	testkit.Eventually(t, "both namespaces' objects are in the console's watches", func() bool {
		var a v1alpha1.ToolApproval
		var s v1alpha1.MCPServer
		return e.console.cache.Get(context.Background(), client.ObjectKey{Namespace: other.ns, Name: "hidden-1"}, &a) == nil &&
			e.console.cache.Get(context.Background(), client.ObjectKey{Namespace: other.ns, Name: "secretfs"}, &s) == nil
	})
	testkit.Eventually(t, "A's approval shows", func() bool { _, body := b.get("/approvals"); return strings.Contains(body, e.ns+"/seen-1") })
	testkit.Eventually(t, "A's server shows", func() bool { _, body := b.get("/servers"); return strings.Contains(body, e.ns+"/fs") })
	for _, path := range []string{"/approvals", "/servers"} {
		if _, body := b.get(path); strings.Contains(body, other.ns) || strings.Contains(body, "hidden-1") || strings.Contains(body, "secretfs") {
			t.Errorf("%s shows namespace %s, which alice may not list: %s", path, other.ns, body)
		}
	}
	if status, body := b.get("/servers/" + other.ns + "/secretfs"); status == http.StatusOK || strings.Contains(body, "secretfs") && strings.Contains(body, "read_file") {
		t.Errorf("the page of a server alice may not list: %d %s", status, body)
	}
}

// The event stream says "changed" only for namespaces the person may
// list: a change in another namespace sends nothing.
func TestEventStreamFiltersByNamespace(t *testing.T) {
	e := newEnv(t)
	other := e.otherNamespace()
	e.approver(aliceUser)
	b := e.browser()
	b.signIn(alice)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp := b.stream(ctx)
	defer resp.Body.Close()
	changed := make(chan struct{}, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() == "event: changed" {
				changed <- struct{}{}
			}
		}
	}()
	// A change alice may not see, then, once the console has surely
	// passed it on (it waits streamCoalesce before a refresh), one she may.
	other.approval("hidden-1", bobUser, `{}`)
	testkit.Eventually(t, "the console's watch has the hidden approval", func() bool {
		var a v1alpha1.ToolApproval
		return e.console.cache.Get(ctx, client.ObjectKey{Namespace: other.ns, Name: "hidden-1"}, &a) == nil
	})
	time.Sleep(3 * streamCoalesce)
	e.approval("seen-1", bobUser, `{}`)
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no changed event for a namespace alice may list")
	}
	select {
	case <-changed:
		t.Fatal("two changed events: one was for a namespace alice may not list")
	case <-time.After(3 * streamCoalesce):
	}
}
