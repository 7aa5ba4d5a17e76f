package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/bench/internal/benchutil"
)

// A wake's steps, each the first time this process saw it through a watch,
// after the call began. Watches are seen within milliseconds of the write
// here (one node, the API server on it), while the objects' own timestamps
// are in whole seconds; each step is when the next actor in the chain could
// learn of it.
const (
	stepAsked          = "lease renewed (bridge asked)"
	stepWaking         = "status Waking (controller woke it)"
	stepPodCreated     = "pod created"
	stepScheduled      = "pod scheduled"
	stepPodIP          = "pod IP in status"
	stepAdapterRunning = "adapter sidecar running"
	stepRunning        = "server container running"
	stepPodReady       = "pod Ready"
	stepServerReady    = "status Ready (controller probed it)"
	stepAnswered       = "answered"
)

// stepOrder is the order the steps are printed in: the order of the chain.
var stepOrder = []string{stepAsked, stepWaking, stepPodCreated, stepScheduled, stepPodIP, stepAdapterRunning,
	stepRunning, stepPodReady, stepServerReady, stepAnswered}

// stepWatch records when one wake's steps were seen.
type stepWatch struct {
	start time.Time
	mu    sync.Mutex
	seen  map[string]time.Duration
	ready chan struct{}
}

// watchSteps starts watching the server's Lease, MCPServer and pods from
// now, for a call that begins at start; cancel ctx to stop.
func (b *bench) watchSteps(ctx context.Context, server string) (*stepWatch, error) {
	w := &stepWatch{seen: map[string]time.Duration{}, ready: make(chan struct{})}
	byName := func(name string) *client.ListOptions {
		return &client.ListOptions{Namespace: namespace, FieldSelector: fields.OneTermEqualSelector("metadata.name", name)}
	}
	watches := []struct {
		list client.ObjectList
		opts *client.ListOptions
	}{
		{&coordinationv1.LeaseList{}, byName(server + mcpv1alpha1.ActivityLeaseSuffix)},
		{&mcpv1alpha1.MCPServerList{}, byName(server)},
		{&corev1.PodList{}, &client.ListOptions{Namespace: namespace, LabelSelector: labelsFor(server)}},
	}
	for _, wt := range watches {
		if err := b.c.List(ctx, wt.list, wt.opts); err != nil {
			return nil, err
		}
		// From the list's resource version: only what comes after counts.
		wt.opts.Raw = &metav1.ListOptions{ResourceVersion: wt.list.GetResourceVersion()}
		wi, err := b.c.Watch(ctx, wt.list, wt.opts)
		if err != nil {
			return nil, err
		}
		go func() {
			defer wi.Stop()
			for e := range wi.ResultChan() {
				if e.Type == watch.Added || e.Type == watch.Modified {
					w.observe(e.Object)
				}
			}
		}()
	}
	w.start = time.Now()
	return w, nil
}

// observe records the steps an object's new state shows.
func (w *stepWatch) observe(o any) {
	switch o := o.(type) {
	case *coordinationv1.Lease:
		if o.Spec.RenewTime != nil && o.Spec.RenewTime.After(w.start) {
			w.mark(stepAsked)
		}
	case *mcpv1alpha1.MCPServer:
		c := meta.FindStatusCondition(o.Status.Conditions, mcpv1alpha1.ConditionReady)
		switch {
		case c == nil:
		case c.Reason == mcpv1alpha1.ReasonWaking:
			w.mark(stepWaking)
		case c.Status == metav1.ConditionTrue:
			w.mark(stepServerReady)
		}
	case *corev1.Pod:
		if !o.DeletionTimestamp.IsZero() {
			return
		}
		w.mark(stepPodCreated)
		if o.Spec.NodeName != "" {
			w.mark(stepScheduled)
		}
		if o.Status.PodIP != "" {
			w.mark(stepPodIP)
		}
		// The adapter's sidecar runs for the pod's life; the kubelet
		// starts the server once its postStart hook (the install) is done.
		for _, cs := range o.Status.InitContainerStatuses {
			if cs.State.Running != nil {
				w.mark(stepAdapterRunning)
			}
		}
		for _, cs := range o.Status.ContainerStatuses {
			if cs.State.Running != nil {
				w.mark(stepRunning)
			}
		}
		for _, c := range o.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				w.mark(stepPodReady)
			}
		}
	}
}

func (w *stepWatch) mark(step string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.seen[step]; ok {
		return
	}
	w.seen[step] = time.Since(w.start)
	if step == stepServerReady {
		close(w.ready)
	}
}

// finish records the answer and waits a moment for the watch to show the
// status the bridge acted on (its event reaches this process about when it
// reached the bridge).
func (w *stepWatch) finish(answered time.Duration) map[string]time.Duration {
	w.mark(stepAnswered)
	w.mu.Lock()
	w.seen[stepAnswered] = answered
	w.mu.Unlock()
	select {
	case <-w.ready:
	case <-time.After(2 * time.Second):
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]time.Duration, len(w.seen))
	for k, v := range w.seen {
		out[k] = v
	}
	return out
}

// wakeSteps holds every wake's steps.
type wakeSteps struct {
	runs []map[string]time.Duration
}

func (s *wakeSteps) add(seen map[string]time.Duration) { s.runs = append(s.runs, seen) }

// String is a table: each step's p50 and p95 after the call, and the p50 of
// its time after the step before it (a step not seen in every wake says in
// how many it was).
func (s *wakeSteps) String() string {
	if len(s.runs) == 0 {
		return "no wake measured"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-38s %8s %8s %10s\n", "step (seen by a watch)", "p50", "p95", "step p50")
	prev := ""
	for _, step := range stepOrder {
		var at, delta []time.Duration
		for _, r := range s.runs {
			t, ok := r[step]
			if !ok {
				continue
			}
			at = append(at, t)
			if p, ok := r[prev]; ok && prev != "" {
				delta = append(delta, t-p)
			}
		}
		if len(at) == 0 {
			continue
		}
		name := step
		if len(at) < len(s.runs) {
			name = fmt.Sprintf("%s (%d of %d)", step, len(at), len(s.runs))
		}
		d := "-"
		if len(delta) > 0 {
			d = fmt.Sprintf("+%.2f s", benchutil.Pct(delta, 50).Seconds())
		}
		fmt.Fprintf(&sb, "%-38s %6.2f s %6.2f s %10s\n", name, benchutil.Pct(at, 50).Seconds(), benchutil.Pct(at, 95).Seconds(), d)
		prev = step
	}
	return strings.TrimRight(sb.String(), "\n")
}

// labelsFor selects the server's pods.
func labelsFor(server string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{mcpv1alpha1.ServerLabel: server})
}
