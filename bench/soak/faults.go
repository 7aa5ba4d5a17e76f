package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/bench/internal/benchutil"
)

// fault is one scheduled hurt: at is its time from the start, lasting how
// long it keeps hurting (0: a single act).
type fault struct {
	at   time.Duration
	name string
	do   func(context.Context) error
}

// window is when a fault was in force.
type window struct {
	name       string
	start, end time.Time
	err        error
}

// schedule is every fault of a run of d: the sample server's pod killed
// every killEvery, and the others once each, spread over the run.
func (s *soak) schedule(d, killEvery time.Duration) []fault {
	var faults []fault
	for at := time.Minute; at < d-30*time.Second; at += killEvery {
		faults = append(faults, fault{at, "server pod killed", s.killServerPod})
	}
	once := []struct {
		name string
		do   func(context.Context) error
	}{
		{"bridge replica deleted", s.deleteBridgeReplica},
		{"upstream hangs (30s)", s.upstreamFault(modeHang)},
		{"controller restarted", s.restartController},
		{"upstream answers garbage (30s)", s.upstreamFault(modeGarbage)},
		{"NetworkPolicy changed (60s)", s.changeNetworkPolicy},
		{"API server restarted", s.restartAPIServer},
		{"upstream closes connections mid-answer (30s)", s.upstreamFault(modeCut)},
	}
	for i, f := range once {
		at := d * time.Duration(15+10*i) / 100
		faults = append(faults, fault{at, f.name, f.do})
	}
	sort.Slice(faults, func(i, j int) bool { return faults[i].at < faults[j].at })
	return faults
}

// inject runs the schedule from start, recording each fault's window.
func (s *soak) inject(ctx context.Context, start time.Time, faults []fault) []window {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var out []window
	for _, f := range faults {
		select {
		case <-ctx.Done():
			wg.Wait()
			return out
		case <-time.After(time.Until(start.Add(f.at))):
		}
		wg.Go(func() {
			w := window{name: f.name, start: time.Now()}
			w.err = f.do(ctx)
			w.end = time.Now()
			fmt.Printf("fault %-48s at %6s, %s%s\n", f.name, w.start.Sub(start).Round(time.Second), w.end.Sub(w.start).Round(time.Second), errNote(w.err))
			mu.Lock()
			out = append(out, w)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func errNote(err error) string {
	if err == nil {
		return ""
	}
	return " (failed: " + err.Error() + ")"
}

func (s *soak) deletePodOf(ctx context.Context, namespace, selector string) error {
	pods, err := s.dev.CS.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == "Running" {
			return s.dev.CS.CoreV1().Pods(namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
		}
	}
	return fmt.Errorf("no running pod of %s", selector)
}

// killServerPod deletes the sample everything server's pod (as a drain or a
// person would).
func (s *soak) killServerPod(ctx context.Context) error {
	return s.deletePodOf(ctx, benchutil.DevNamespace, "app.kubernetes.io/instance=everything")
}

func (s *soak) deleteBridgeReplica(ctx context.Context) error {
	return s.deletePodOf(ctx, benchutil.DevBridgeNamespace, bridgeSelector)
}

func (s *soak) restartController(ctx context.Context) error {
	return s.deletePodOf(ctx, benchutil.DevBridgeNamespace, controllerSelector)
}

// restartAPIServer stops the dev cluster's kube-apiserver and starts it
// again with the same command line (hack/cluster/restart.sh).
func (s *soak) restartAPIServer(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, filepath.Join(s.dev.Root, "hack", "cluster", "restart.sh"), "kube-apiserver").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

// upstreamFault turns the recording upstream's mode on for 30 s.
func (s *soak) upstreamFault(m upstreamMode) func(context.Context) error {
	return func(ctx context.Context) error {
		s.rec.setMode(m)
		defer s.rec.setMode(modeHealthy)
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
		}
		return nil
	}
}

// changeNetworkPolicy changes the sample server's egress (DNS to none), so
// the controller rewrites its NetworkPolicy while calls flow, and back after
// 60 s.
func (s *soak) changeNetworkPolicy(ctx context.Context) error {
	// The controller writes the server too (status, finalizers): an update
	// that lost the race is read again and retried, as any client would.
	set := func(e mcpv1alpha1.EgressPolicy) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var srv mcpv1alpha1.MCPServer
			if err := s.dev.C.Get(ctx, client.ObjectKey{Namespace: benchutil.DevNamespace, Name: "everything"}, &srv); err != nil {
				return err
			}
			srv.Spec.Workload.Network.Egress = e
			return s.dev.C.Update(ctx, &srv)
		})
	}
	var before mcpv1alpha1.MCPServer
	if err := s.dev.C.Get(ctx, client.ObjectKey{Namespace: benchutil.DevNamespace, Name: "everything"}, &before); err != nil {
		return err
	}
	if err := set(mcpv1alpha1.EgressNone); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-time.After(60 * time.Second):
	}
	return set(before.Spec.Workload.Network.Egress)
}
