package main

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// sleepyServer creates a workload MCPServer with an idle time and the
// activity Lease the controller creates for it (no controller runs here:
// the plugin's writes are what is tested; the controller's reading of them
// is tested in internal/controller).
func sleepyServer(t *testing.T, name string) (*v1alpha1.MCPServer, *coordinationv1.Lease) {
	t.Helper()
	ctx := context.Background()
	s := &v1alpha1.MCPServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.MCPServerSpec{Transport: v1alpha1.TransportStreamableHTTP,
			Workload: &v1alpha1.Workload{Image: "example.com/server:1", Idle: &metav1.Duration{Duration: time.Minute}}},
	}
	if err := cluster.admin.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	// A bridge saw a call a little in this machine's future (clocks differ).
	renew := metav1.NewMicroTime(time.Now().Add(2 * time.Second))
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + v1alpha1.ActivityLeaseSuffix}, Spec: coordinationv1.LeaseSpec{RenewTime: &renew}}
	if err := cluster.admin.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	return s, l
}

func reread(t *testing.T, obj client.Object) {
	t.Helper()
	if err := cluster.admin.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
}

func TestSleepAsksAfterTheLastActivity(t *testing.T) {
	start(t)
	s, l := sleepyServer(t, "nightly")
	code, out := kubectlMCP(t, "alice", "sleep", s.Name)
	if code != 0 || !strings.Contains(out, "is put to sleep") {
		t.Fatalf("sleep: exit %d, output %q", code, out)
	}
	reread(t, s)
	asked, err := time.Parse(time.RFC3339, s.Annotations[v1alpha1.SleepAnnotation])
	if err != nil {
		t.Fatalf("the sleep annotation %q is not an RFC 3339 time: %v", s.Annotations[v1alpha1.SleepAnnotation], err)
	}
	// The controller sleeps a server when the request is newer than the
	// Lease's renewTime, whatever this machine's clock says.
	if !asked.After(l.Spec.RenewTime.Time) {
		t.Errorf("sleep asked at %s, not after the last activity %s: the controller would ignore it", asked, l.Spec.RenewTime.Time)
	}
}

func TestWakeWritesTheLeaseAsACallDoes(t *testing.T) {
	start(t)
	s, l := sleepyServer(t, "dormant")
	since := metav1.NewTime(time.Now().Add(time.Hour).Truncate(time.Second)) // the controller's clock runs ahead
	s.Status.SleepingSince = &since
	if err := cluster.admin.Status().Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	code, out := kubectlMCP(t, "bob", "wake", s.Name)
	if code != 0 || !strings.Contains(out, "is waking") {
		t.Fatalf("wake: exit %d, output %q", code, out)
	}
	reread(t, l)
	if !l.Spec.RenewTime.After(since.Time) {
		t.Errorf("renewTime %s is not after sleepingSince %s: the controller would not wake the server", l.Spec.RenewTime.Time, since.Time)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "kubectl-mcp" {
		t.Errorf("holderIdentity %v, want kubectl-mcp", l.Spec.HolderIdentity)
	}
}

func TestWakeOfAServerThatNeverSleeps(t *testing.T) {
	start(t)
	s := &v1alpha1.MCPServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "always-on"},
		Spec:       v1alpha1.MCPServerSpec{Transport: v1alpha1.TransportStreamableHTTP, Workload: &v1alpha1.Workload{Image: "example.com/server:1"}},
	}
	if err := cluster.admin.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	code, out := kubectlMCP(t, "alice", "wake", s.Name)
	if code == 0 || !strings.Contains(out, "has no activity Lease") {
		t.Errorf("wake: exit %d, output %q, want an error saying it has no activity Lease", code, out)
	}
}
