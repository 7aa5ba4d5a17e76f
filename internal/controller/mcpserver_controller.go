package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// fieldOwner is the server-side apply field manager of everything the
// controller writes.
const fieldOwner = "mcp-operator"

// requeueSoon brings a reconcile back right after its status is written.
const requeueSoon = 100 * time.Millisecond

// probeFailuresToCrash is how many probes in a row a running pod may fail
// before it counts as crashed: one slow answer is not a crash.
const probeFailuresToCrash = 3

// Kubernetes Event reasons; the message starts with the audit event name.
const (
	eventCrashed           = "Crashed"
	eventRestarting        = "Restarting"
	eventPermanentlyFailed = "PermanentlyFailed"
	eventShutdown          = "Shutdown"
	eventCatalogChanged    = "CatalogChanged"
	eventCatalogRefused    = "CatalogRefused"
	eventRecovered         = "Recovered"
)

// +kubebuilder:rbac:groups=mcp-operator.dev,resources=mcpservers,verbs=get;list;watch
// +kubebuilder:rbac:groups=mcp-operator.dev,resources=mcpservers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch

// MCPServerReconciler runs each MCPServer's workload (or reaches its remote
// endpoint), probes it, publishes its catalog in status and applies the
// restart policy.
type MCPServerReconciler struct {
	client.Client
	// Secrets reads the Secrets remote servers name, uncached: a cached
	// client would list and watch every Secret the controller can see,
	// holding them all in memory, for the few a server references.
	Secrets  client.Reader
	Recorder recorder.EventRecorder
	Prober   Prober
	Clock    clock.Clock
	Workload WorkloadOptions
	// BridgeNamespaces is the bridge's scope: servers of these namespaces
	// share one name space of mcp.<server>.<tool>, so two of the same name
	// conflict. Empty: each namespace is its own scope.
	BridgeNamespaces []string

	mu            sync.Mutex
	probeFailures map[types.NamespacedName]int
	// pending holds each reconcile's events until its status is written: a
	// reconcile that worked from a stale object (and whose write conflicts)
	// must not announce a crash twice. controller-runtime never reconciles
	// one key on two workers at once.
	pending map[types.NamespacedName][]pendingEvent
}

type pendingEvent struct{ typ, reason, message string }

func init() {
	reconcilers = append(reconcilers, func(mgr ctrl.Manager, opts Options) error {
		prober := opts.Prober
		if prober == nil {
			prober = NewMCPProber()
		}
		return (&MCPServerReconciler{
			Client:           mgr.GetClient(),
			Secrets:          mgr.GetAPIReader(),
			Recorder:         mgr.GetEventRecorder("mcp-operator"),
			Prober:           prober,
			Workload:         opts.Workload,
			BridgeNamespaces: opts.BridgeNamespaces,
		}).SetupWithManager(mgr, opts)
	})
}

// SetupWithManager registers the reconciler, watching the objects it owns.
func (r *MCPServerReconciler) SetupWithManager(mgr ctrl.Manager, opts Options) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Secrets == nil {
		r.Secrets = mgr.GetAPIReader()
	}
	r.probeFailures = map[types.NamespacedName]int{}
	r.pending = map[types.NamespacedName][]pendingEvent{}
	return ctrl.NewControllerManagedBy(mgr).
		// Spec and annotation changes only: the reconciler's own status writes
		// must not start another probe (a probe slower than a second would
		// otherwise write lastProbeTime forever).
		For(&mcpv1alpha1.MCPServer{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&corev1.Pod{}).
		Owns(&corev1.Service{}).
		Owns(&networkingv1.NetworkPolicy{}).
		// A server that lost a name conflict gets it when the older one goes.
		Watches(&mcpv1alpha1.MCPServer{}, handler.EnqueueRequestsFromMapFunc(r.sameNameElsewhere)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(opts.MaxConcurrentReconciles, 1)}).
		Named("mcpserver").
		Complete(r)
}

// Reconcile brings one server to its desired state. Status is written once,
// at the end, and only when it changed.
func (r *MCPServerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, err error) {
	var s mcpv1alpha1.MCPServer
	if err := r.Get(ctx, req.NamespacedName, &s); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetProbeFailures(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !s.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	orig := s.DeepCopy()
	defer func() {
		if err == nil {
			err = r.patchStatus(ctx, orig, &s)
		}
		r.flushEvents(&s, err == nil)
		if apierrors.IsConflict(err) {
			// Worked from a stale object: nothing was written; run again.
			result, err = ctrl.Result{RequeueAfter: requeueSoon}, nil
		}
	}()

	if conflict, older := r.nameConflict(ctx, &s); conflict {
		markDown(&s, mcpv1alpha1.ReasonNameInUse, fmt.Sprintf("an older MCPServer %s in the bridge's scope has this name; rename one of them", older))
		setCondition(&s, mcpv1alpha1.ConditionNameConflict, metav1.ConditionTrue, mcpv1alpha1.ReasonNameInUse,
			fmt.Sprintf("MCPServer %s is older and keeps the name %s", older, s.Name))
		return ctrl.Result{}, r.deletePods(ctx, &s)
	}
	meta.RemoveStatusCondition(&s.Status.Conditions, mcpv1alpha1.ConditionNameConflict)

	if s.Spec.Suspend {
		return ctrl.Result{}, r.suspend(ctx, &s)
	}
	if s.Spec.Remote != nil {
		return r.reconcileRemote(ctx, &s)
	}
	return r.reconcileWorkload(ctx, &s)
}

// suspend withdraws the catalog and deletes the pod at once, without restart.
func (r *MCPServerReconciler) suspend(ctx context.Context, s *mcpv1alpha1.MCPServer) error {
	ready := meta.FindStatusCondition(s.Status.Conditions, mcpv1alpha1.ConditionReady)
	if ready == nil || ready.Reason != mcpv1alpha1.ReasonSuspended {
		r.event(s, corev1.EventTypeNormal, eventShutdown, "mcp.server.shutdown: spec.suspend is true; the server's tools are withdrawn")
	}
	markDown(s, mcpv1alpha1.ReasonSuspended, "spec.suspend is true")
	s.Status.Restarts.NextRestartTime = nil
	return r.deletePods(ctx, s)
}

func (r *MCPServerReconciler) reconcileRemote(ctx context.Context, s *mcpv1alpha1.MCPServer) (ctrl.Result, error) {
	target, err := remoteTarget(ctx, r.Secrets, s)
	if err != nil {
		markDown(s, mcpv1alpha1.ReasonCredentialsMissing, err.Error())
		return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
	}
	cat, err := r.Prober.Probe(ctx, target)
	if err != nil {
		markDown(s, mcpv1alpha1.ReasonProbeFailed, "probe failed: "+err.Error())
		return ctrl.Result{RequeueAfter: restartSettingsOf(s.Spec.RestartPolicy).cap}, nil
	}
	r.publish(ctx, s, cat, &mcpv1alpha1.Endpoint{URL: s.Spec.Remote.URL})
	return ctrl.Result{RequeueAfter: nextProbe(s.Spec.Probe.Interval.Duration, s.UID, r.Clock.Now())}, nil
}

func (r *MCPServerReconciler) reconcileWorkload(ctx context.Context, s *mcpv1alpha1.MCPServer) (ctrl.Result, error) {
	if err := r.applyOwned(ctx, s, buildService(s)); err != nil {
		return ctrl.Result{}, fmt.Errorf("while applying the Service: %w", err)
	}
	if err := r.applyOwned(ctx, s, buildNetworkPolicy(s, r.Workload)); err != nil {
		return ctrl.Result{}, fmt.Errorf("while applying the NetworkPolicy: %w", err)
	}
	restart := restartSettingsOf(s.Spec.RestartPolicy)
	now := r.Clock.Now()

	if s.Status.Restarts.FailedGeneration != 0 {
		if !r.recoveryRequested(s) {
			markDown(s, mcpv1alpha1.ReasonPermanentlyFailed, permanentlyFailedMessage(s))
			return ctrl.Result{}, r.deletePods(ctx, s)
		}
		s.Status.Restarts.FailedGeneration = 0
		s.Status.Restarts.RestartRequest = ""
		s.Status.Restarts.Consecutive = 0
		s.Status.Restarts.NextRestartTime = nil
		r.event(s, corev1.EventTypeNormal, eventRecovered, "the server is started again after giving up (spec changed or restart requested)")
	}

	desired := buildPod(s, r.Workload)
	desired.Name = podNameFor(s, desired)
	// Older incarnations and pods of an older spec go.
	current, err := r.prunePods(ctx, s, desired.Name)
	if err != nil {
		return ctrl.Result{}, err
	}

	if current == nil {
		if next := s.Status.Restarts.NextRestartTime; next != nil && now.Before(next.Time) {
			return ctrl.Result{RequeueAfter: next.Sub(now)}, nil
		}
		if err := controllerutil.SetControllerReference(s, desired, r.Scheme()); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Create(ctx, desired, client.FieldOwner(fieldOwner)); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, fmt.Errorf("while creating the server's pod: %w", err)
		}
		s.Status.Restarts.NextRestartTime = nil
		setStarting(s)
		return ctrl.Result{}, nil
	}

	state, reason, upSince := podState(current)
	switch state {
	case podTerminated:
		return r.crash(s, restart, reason, now)
	case podStarting:
		setStarting(s)
		return ctrl.Result{}, nil
	}

	target := ProbeTarget{Server: s, URL: workloadURL(s, current), Timeout: s.Spec.Probe.Timeout.Duration}
	cat, err := r.Prober.Probe(ctx, target)
	if err != nil {
		failures := r.countProbeFailure(client.ObjectKeyFromObject(s))
		if failures >= probeFailuresToCrash {
			r.forgetProbeFailures(client.ObjectKeyFromObject(s))
			return r.crash(s, restart, fmt.Sprintf("ProbeFailed (%d probes in a row: %v)", failures, err), now)
		}
		setCondition(s, mcpv1alpha1.ConditionAvailable, metav1.ConditionFalse, mcpv1alpha1.ReasonProbeFailed, "probe failed: "+err.Error())
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	r.forgetProbeFailures(client.ObjectKeyFromObject(s))
	r.publish(ctx, s, cat, &mcpv1alpha1.Endpoint{URL: target.URL, PodName: current.Name})

	next := nextProbe(s.Spec.Probe.Interval.Duration, s.UID, now)
	if !markStable(&s.Status.Restarts, restart, upSince, now) && s.Status.Restarts.Consecutive > 0 {
		// Come back when the server has been up long enough to be stable.
		next = min(next, upSince.Add(restart.stableAfter).Sub(now)+time.Second)
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// crash counts a crash in status and decides: restart after backoff, or give
// up. The crashed pod is deleted by the next reconcile, right after the count
// is written: the status write is optimistically locked, so a reconcile working
// from a stale cache can't count the same crash twice.
func (r *MCPServerReconciler) crash(s *mcpv1alpha1.MCPServer, restart restartSettings, reason string, now time.Time) (ctrl.Result, error) {
	out := recordCrash(&s.Status.Restarts, restart, reason, now)
	r.event(s, corev1.EventTypeWarning, eventCrashed, fmt.Sprintf("mcp.server.crashed: %s (crash %d in a row)", reason, s.Status.Restarts.Consecutive))
	if out.giveUp {
		s.Status.Restarts.FailedGeneration = s.Generation
		s.Status.Restarts.RestartRequest = s.Annotations[mcpv1alpha1.RestartAnnotation]
		markDown(s, mcpv1alpha1.ReasonPermanentlyFailed, permanentlyFailedMessage(s))
		r.event(s, corev1.EventTypeWarning, eventPermanentlyFailed, "mcp.server.permanently_failed: "+permanentlyFailedMessage(s))
		return ctrl.Result{RequeueAfter: requeueSoon}, nil
	}
	wait := out.restartAt.Sub(now)
	markDown(s, mcpv1alpha1.ReasonRestarting, fmt.Sprintf("crashed (%s); restart %d of %d after backoff", reason, s.Status.Restarts.Consecutive, restart.maxRestarts))
	r.event(s, corev1.EventTypeNormal, eventRestarting, fmt.Sprintf("mcp.server.restarting: restart %d of %d in %s", s.Status.Restarts.Consecutive, restart.maxRestarts, wait))
	// Come back as soon as the count is written: that reconcile deletes the
	// crashed pod and waits out the rest of the backoff.
	return ctrl.Result{RequeueAfter: requeueSoon}, nil
}

func permanentlyFailedMessage(s *mcpv1alpha1.MCPServer) string {
	return fmt.Sprintf("gave up after %d crashes in a row (last: %s); change the spec or set the annotation %s to a new value to start it again",
		s.Status.Restarts.Consecutive, s.Status.Restarts.LastExitReason, mcpv1alpha1.RestartAnnotation)
}

// recoveryRequested: a permanently failed server comes back on a spec change
// or a new value of the restart annotation.
func (r *MCPServerReconciler) recoveryRequested(s *mcpv1alpha1.MCPServer) bool {
	return s.Generation != s.Status.Restarts.FailedGeneration ||
		s.Annotations[mcpv1alpha1.RestartAnnotation] != s.Status.Restarts.RestartRequest
}

func (r *MCPServerReconciler) publish(ctx context.Context, s *mcpv1alpha1.MCPServer, cat *Catalog, endpoint *mcpv1alpha1.Endpoint) {
	now := metav1.NewTime(r.Clock.Now().Truncate(time.Second))
	s.Status.LastProbeTime = &now
	wasRefused := meta.IsStatusConditionTrue(s.Status.Conditions, mcpv1alpha1.ConditionDegraded) &&
		meta.FindStatusCondition(s.Status.Conditions, mcpv1alpha1.ConditionDegraded).Reason == mcpv1alpha1.ReasonCatalogNotApproved
	res := publishCatalog(s, cat, endpoint)
	if res.changed != nil && !res.changed.empty() {
		r.event(s, corev1.EventTypeNormal, eventCatalogChanged, "catalog changed: "+truncate(res.changed.String(), 1024))
	}
	if res.refused && !wasRefused {
		r.event(s, corev1.EventTypeWarning, eventCatalogRefused, "catalog refused: its digest differs from spec.tools.approvedDigest")
	}
	log.FromContext(ctx).V(1).Info("catalog probed", "digest", cat.Digest, "tools", len(cat.Tools))
}

func setStarting(s *mcpv1alpha1.MCPServer) {
	markDown(s, mcpv1alpha1.ReasonStarting, "the server's pod is starting")
}

// podNameFor names a pod by server, incarnation and spec: a restart or a spec
// change is a new pod, never a race with the deletion of the old one.
func podNameFor(s *mcpv1alpha1.MCPServer, pod *corev1.Pod) string {
	spec, _ := json.Marshal(pod.Spec)
	sum := sha256.Sum256(spec)
	return fmt.Sprintf("%s-%d-%s", s.Name, s.Status.Restarts.Total, hex.EncodeToString(sum[:])[:6])
}

type podPhase int

const (
	podStarting podPhase = iota
	podRunning
	podTerminated
)

// podState reads a pod as a kubelet reports it: starting, running (ready to
// probe) or terminated, with the exit reason and when it came up.
func podState(pod *corev1.Pod) (podPhase, string, time.Time) {
	for _, cs := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if t := cs.State.Terminated; t != nil && (t.ExitCode != 0 || cs.Name == serverContainer) {
			return podTerminated, exitReason(t), time.Time{}
		}
	}
	switch pod.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		reason := pod.Status.Reason
		if reason == "" {
			reason = string(pod.Status.Phase)
		}
		return podTerminated, reason, time.Time{}
	case corev1.PodRunning:
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && pod.Status.PodIP != "" {
				up := c.LastTransitionTime.Time
				for _, cs := range pod.Status.ContainerStatuses {
					if cs.Name == serverContainer && cs.State.Running != nil {
						up = cs.State.Running.StartedAt.Time
					}
				}
				return podRunning, "", up
			}
		}
	}
	return podStarting, "", time.Time{}
}

func exitReason(t *corev1.ContainerStateTerminated) string {
	if t.Reason == "OOMKilled" {
		return "OOMKilled"
	}
	if t.Signal != 0 {
		return fmt.Sprintf("killed by signal %d", t.Signal)
	}
	reason := t.Reason
	if reason == "" {
		reason = "Error"
	}
	return fmt.Sprintf("%s (exit code %d)", reason, t.ExitCode)
}

// deletePods deletes all of the server's pods.
func (r *MCPServerReconciler) deletePods(ctx context.Context, s *mcpv1alpha1.MCPServer) error {
	_, err := r.prunePods(ctx, s, "")
	return err
}

// prunePods deletes the server's pods except the one named keep, and returns
// that one when it exists.
func (r *MCPServerReconciler) prunePods(ctx context.Context, s *mcpv1alpha1.MCPServer, keep string) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(s.Namespace), client.MatchingLabels{mcpv1alpha1.ServerLabel: s.Name}); err != nil {
		return nil, fmt.Errorf("while listing pods: %w", err)
	}
	var kept *corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if !metav1.IsControlledBy(p, s) {
			continue
		}
		if p.Name == keep {
			kept = p
			continue
		}
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("while deleting an old pod of the server: %w", err)
		}
	}
	return kept, nil
}

// applyOwned server-side applies an object the server owns.
func (r *MCPServerReconciler) applyOwned(ctx context.Context, s *mcpv1alpha1.MCPServer, obj client.Object) error {
	if err := controllerutil.SetControllerReference(s, obj, r.Scheme()); err != nil {
		return err
	}
	gvk, err := r.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return r.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldOwner), client.ForceOwnership)
}

// patchStatus writes status when it changed, with optimistic locking: a
// reconcile working from a stale object gets a conflict instead of
// overwriting newer status.
func (r *MCPServerReconciler) patchStatus(ctx context.Context, orig, s *mcpv1alpha1.MCPServer) error {
	s.Status.ObservedGeneration = s.Generation
	if equality.Semantic.DeepEqual(orig.Status, s.Status) {
		return nil
	}
	err := r.Status().Patch(ctx, s, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	if err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("while writing status: %w", err)
	}
	return err
}

// nameConflict reports whether an older server in the bridge's scope has the
// same name, and which.
func (r *MCPServerReconciler) nameConflict(ctx context.Context, s *mcpv1alpha1.MCPServer) (bool, string) {
	inScope := false
	for _, ns := range r.BridgeNamespaces {
		inScope = inScope || ns == s.Namespace
	}
	if !inScope {
		return false, ""
	}
	for _, ns := range r.BridgeNamespaces {
		if ns == s.Namespace {
			continue
		}
		var other mcpv1alpha1.MCPServer
		if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.Name}, &other); err != nil {
			continue
		}
		if olderThan(&other, s) {
			return true, ns + "/" + other.Name
		}
	}
	return false, ""
}

// sameNameElsewhere maps a server to the same-named servers of the other
// namespaces in the bridge's scope.
func (r *MCPServerReconciler) sameNameElsewhere(_ context.Context, obj client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, ns := range r.BridgeNamespaces {
		if ns != obj.GetNamespace() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: obj.GetName()}})
		}
	}
	return out
}

// olderThan orders servers by creation, then namespace, so exactly one of
// two same-named servers keeps the name.
func olderThan(a, b *mcpv1alpha1.MCPServer) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Namespace < b.Namespace
}

// event queues a Kubernetes Event; it goes out once the reconcile's status is
// written (flushEvents).
func (r *MCPServerReconciler) event(s *mcpv1alpha1.MCPServer, typ, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := client.ObjectKeyFromObject(s)
	r.pending[key] = append(r.pending[key], pendingEvent{typ, reason, message})
}

// flushEvents sends the reconcile's events when its status was written, and
// drops them when it was not.
func (r *MCPServerReconciler) flushEvents(s *mcpv1alpha1.MCPServer, written bool) {
	r.mu.Lock()
	key := client.ObjectKeyFromObject(s)
	events := r.pending[key]
	delete(r.pending, key)
	r.mu.Unlock()
	if !written || r.Recorder == nil {
		return
	}
	for _, e := range events {
		r.Recorder.Eventf(s, nil, e.typ, e.reason, e.reason, "%s", e.message)
	}
}

func (r *MCPServerReconciler) countProbeFailure(key types.NamespacedName) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.probeFailures[key]++
	return r.probeFailures[key]
}

func (r *MCPServerReconciler) forgetProbeFailures(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.probeFailures, key)
}

// nextProbe is how long until a server's next periodic probe: every
// interval, at a phase of the interval fixed by the server's UID, and at least
// half an interval from now. Servers that were probed together (created in a
// burst, or all reconciled at a controller start) would otherwise stay
// together: a random jitter per probe spreads them only as a random walk,
// hours at the default interval, while a fixed phase spreads them evenly from
// the second probe on.
func nextProbe(d time.Duration, uid types.UID, now time.Time) time.Duration {
	if d <= 0 {
		d = 5 * time.Minute
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(uid))
	phase := int64(h.Sum64() % uint64(d))
	earliest := now.Add(d / 2).UnixNano()
	wait := ((phase-earliest%int64(d))%int64(d) + int64(d)) % int64(d)
	return d/2 + time.Duration(wait)
}
