package controller

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// deletionMoments remembers, by pod UID, the earliest moment a deletion of a
// server's pod was asked for that the controller saw (deletionTimestamp less
// the grace period). A pod's own fields say it only until it is deleted
// again: a second graceful deletion after the deadline gets a grace period
// of 1 and a deletionTimestamp of its own moment, and the kubelet's final
// deletion one of 0, both dated after a server that exited on the first
// deletion's SIGTERM. Only pods of servers being deleted are held, each
// until its pod is gone.
type deletionMoments struct {
	mu    sync.Mutex
	asked map[types.UID]time.Time
}

// observe records the deletion moment pod carries, if any, and returns the
// earliest one known for it (zero: none).
func (d *deletionMoments) observe(pod *corev1.Pod) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	known, seen := d.asked[pod.UID]
	if asked, ok := deletionAsked(pod); ok && (!seen || asked.Before(known)) {
		if d.asked == nil {
			d.asked = map[types.UID]time.Time{}
		}
		d.asked[pod.UID], known = asked, asked
	}
	return known
}

// first is the earliest deletion moment observed of the pod uid (zero:
// none). Reconciles only read: the pod informer's events alone record and
// forget, so no entry outlives its pod's deletion event.
func (d *deletionMoments) first(uid types.UID) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.asked[uid]
}

func (d *deletionMoments) forget(uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.asked, uid)
}

// deletionAsked is when the deletion of pod was asked for, as its fields say
// it: only while it keeps a grace period (crashedBeforeDeletion says why).
func deletionAsked(pod *corev1.Pod) (time.Time, bool) {
	g := pod.DeletionGracePeriodSeconds
	if pod.DeletionTimestamp.IsZero() || g == nil || *g <= 0 {
		return time.Time{}, false
	}
	return pod.DeletionTimestamp.Add(-time.Duration(*g) * time.Second), true
}

// watchDeletions records the deletions of servers' pods as the pod informer
// delivers them, each update in turn (a reconcile may read only a later
// one), and the pods already being deleted that its first list holds after
// a restart of the controller. It filters no event out.
func (r *MCPServerReconciler) watchDeletions() predicate.Funcs {
	serverPod := func(obj client.Object) (*corev1.Pod, bool) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return nil, false
		}
		// By group and kind: a server served under another version of the
		// API owns its pods all the same.
		owner := metav1.GetControllerOf(pod)
		if owner == nil || owner.Kind != "MCPServer" {
			return pod, false
		}
		gv, err := schema.ParseGroupVersion(owner.APIVersion)
		return pod, err == nil && gv.Group == mcpv1alpha1.GroupVersion.Group
	}
	observe := func(obj client.Object) {
		if pod, ok := serverPod(obj); ok && !pod.DeletionTimestamp.IsZero() {
			r.deletions.observe(pod)
		}
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			observe(e.Object)
			return true
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			observe(e.ObjectNew)
			return true
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			// Whoever owns it now: a pod recorded while a server's and
			// orphaned since is forgotten too.
			if e.Object != nil {
				r.deletions.forget(e.Object.GetUID())
			}
			return true
		},
	}
}
