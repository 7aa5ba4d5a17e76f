package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/textcut"
)

// fieldOwner is the server-side apply field manager of everything the
// controller writes.
const fieldOwner = "mcp-operator"

// +kubebuilder:rbac:groups=mcp-operator.dev,resources=mcpservers,verbs=get;list;watch
// +kubebuilder:rbac:groups=mcp-operator.dev,resources=mcpservers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;delete

// MCPServerReconciler runs each MCPServer's workload (or reaches its remote
// endpoint), probes it, publishes its catalog in status and applies the
// restart policy. It keeps no state of its own between reconciles: what must
// survive (crash and probe-failure counts) is in status.
type MCPServerReconciler struct {
	client.Client
	// APIReader reads uncached: the Secrets remote servers name (a cached
	// client would list and watch every Secret the controller can see,
	// holding them all in memory, for the few a server references), and the
	// activity Lease the moment a server falls asleep (the cache may not
	// show a renewal written just before).
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	Prober    Prober
	Clock     clock.Clock
	Workload  WorkloadOptions
	// BridgeNamespaces is the bridge's scope: servers of these namespaces
	// share one name space of mcp.<server>.<tool>, so two of the same name
	// conflict. Empty: each namespace is its own scope.
	BridgeNamespaces []string
	// Tracer makes a span of each reconcile and its phases (tracing.go);
	// nil: none.
	Tracer trace.Tracer

	// wakeRequests holds, by server UID, the activity that woke a server
	// until the wake ends: its latency counts from that first request, not
	// from the renewals bridges write while calls wait for it. Lost on a
	// restart of the controller, when that wake goes unmeasured.
	wakeRequests sync.Map
	// earlyRetries holds, by server, what an early probe's retry hands to
	// the next reconcile (earlyRetry).
	earlyRetries sync.Map
	// deletions holds the first deletion moment seen of each server's pod
	// being deleted, for crashedBeforeDeletion.
	deletions deletionMoments
}

// NewMCPServerReconciler is the reconciler `manager controller` runs: the
// manager's cached client, its uncached reader, the MCP prober
// unless opts names another.
func NewMCPServerReconciler(mgr ctrl.Manager, opts Options) *MCPServerReconciler {
	prober := opts.Prober
	if prober == nil {
		prober = NewMCPProber()
	}
	return &MCPServerReconciler{
		Client:           mgr.GetClient(),
		APIReader:        mgr.GetAPIReader(),
		Recorder:         mgr.GetEventRecorder("mcp-operator"),
		Prober:           prober,
		Workload:         opts.Workload,
		BridgeNamespaces: opts.BridgeNamespaces,
		Tracer:           opts.Tracer,
	}
}

// SetupWithManager registers the reconciler, watching the objects it owns.
func (r *MCPServerReconciler) SetupWithManager(mgr ctrl.Manager, opts Options) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	return ctrl.NewControllerManagedBy(mgr).
		// Spec and annotation changes only: the reconciler's own status writes
		// must not start another probe (a probe slower than a second would
		// otherwise write lastProbeTime forever).
		For(&mcpv1alpha1.MCPServer{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&corev1.Pod{}, builder.WithPredicates(r.watchDeletions())).
		Owns(&corev1.Service{}).
		Owns(&networkingv1.NetworkPolicy{}).
		// Activity Leases wake sleeping servers (mcpserver_sleep.go).
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(r.wakeOnActivity)).
		// A server that lost a name conflict gets it when the older one goes.
		Watches(&mcpv1alpha1.MCPServer{}, handler.EnqueueRequestsFromMapFunc(r.sameNameElsewhere)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(opts.MaxConcurrentReconciles, 1)}).
		Named("mcpserver").
		Complete(r)
}

// scope is one reconcile of one server: what the phases read and hand on to
// each other. The server's status is edited in place and written once, at
// the end.
type scope struct {
	server  *mcpv1alpha1.MCPServer
	now     time.Time
	restart restartSettings
	// pod is the server's running pod, set by the pod phase (workloads).
	pod     *corev1.Pod
	upSince time.Time
	// beforeReady: pod is probed before the kubelet reported it Ready; a
	// failed probe then only means it is still starting.
	beforeReady bool
	// early: this reconcile may be the retry of an early probe that failed
	// (nil: it is not).
	early *earlyRetry
	// catalog and endpoint are what the probe phase found, and where.
	catalog  *Catalog
	endpoint *mcpv1alpha1.Endpoint
	// probed: a probe succeeded in this reconcile.
	probed bool
	// waking: the server was woken and is not Ready yet; wakeStarted: this
	// reconcile woke it; wakeRequest: the activity that woke it (zero when
	// unknown), the start of the wake latency.
	waking, wakeStarted bool
	wakeRequest         time.Time
	// events go out after the status write, and only if it succeeded: a
	// reconcile that worked from a stale object must not announce a crash
	// twice.
	events []serverEvent
}

// serverEvent is a Kubernetes Event on the server; the message starts with the
// audit event name where there is one.
type serverEvent struct{ typ, reason, message string }

func (sc *scope) event(typ, reason, message string) {
	sc.events = append(sc.events, serverEvent{typ, reason, message})
}

// phase is one step of a reconcile. It returns when to come back and whether
// the later phases have anything to do; an error ends the reconcile (see
// mcpserver_errors.go for what each kind of error does).
type phase struct {
	name string
	run  func(ctx context.Context, sc *scope) (phaseResult, error)
}

type phaseResult struct {
	// requeueAfter brings the server back after this long; 0: only when a
	// watched object changes.
	requeueAfter time.Duration
	// stop: the later phases have nothing to do in this reconcile.
	stop bool
}

// phases are the steps of a server's reconcile, in the order they run
// (docs/mcpserver.md lists them the same way).
func (r *MCPServerReconciler) phases(s *mcpv1alpha1.MCPServer) []phase {
	if s.Spec.Remote != nil {
		return []phase{
			{"name check", r.checkName},
			{"suspend", r.suspendIfAsked},
			{"probe", r.probeRemote},
			{"publish", r.publish},
		}
	}
	return []phase{
		{"name check", r.checkName},
		{"suspend", r.suspendIfAsked},
		{"owned objects", r.applyOwnedObjects},
		{"restart gate", r.restartGate},
		{"sleep", r.sleepOrWake},
		{"pod", r.reconcilePod},
		{"probe", r.probeWorkload},
		{"publish", r.publish},
	}
}

// Reconcile brings one server to its desired state: the phases in order,
// then status written once whatever happened, then the events.
func (r *MCPServerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var s mcpv1alpha1.MCPServer
	if err := r.Get(ctx, req.NamespacedName, &s); err != nil {
		if apierrors.IsNotFound(err) {
			forgetMetrics(req.Namespace, req.Name)
			r.earlyRetries.Delete(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !s.DeletionTimestamp.IsZero() {
		// ownerReferences delete the pod, Service and NetworkPolicy.
		forgetMetrics(s.Namespace, s.Name)
		return ctrl.Result{}, nil
	}
	ctx, span := r.startReconcile(ctx, &s)
	defer span.End()
	orig := s.DeepCopy()
	sc := &scope{server: &s, now: r.Clock.Now(), restart: restartSettingsOf(s.Spec.RestartPolicy)}
	sc.early = r.takeEarlyRetry(&s)
	var res phaseResult
	var err error
	for _, p := range r.phases(&s) {
		var pr phaseResult
		pctx, pspan := r.tracer().Start(ctx, p.name)
		pr, err = p.run(pctx, sc)
		endPhase(pspan, pr, err)
		res.requeueAfter = earliest(res.requeueAfter, pr.requeueAfter)
		if err != nil {
			log.FromContext(ctx).V(1).Info("phase ended the reconcile", "phase", p.name, "reason", err.Error())
			break
		}
		if pr.stop {
			break
		}
	}
	return r.summarize(ctx, sc, orig, res, err)
}

// summarize records the phases' outcome in status, writes it, emits the
// events and decides when to come back.
func (r *MCPServerReconciler) summarize(ctx context.Context, sc *scope, orig *mcpv1alpha1.MCPServer, res phaseResult, phaseErr error) (ctrl.Result, error) {
	s := sc.server
	result := ctrl.Result{RequeueAfter: res.requeueAfter}
	var waiting *waitingError
	var stalled *stalledError
	switch {
	case phaseErr == nil:
	case errors.As(phaseErr, &waiting):
		if sc.waking {
			// The catalog stays listed while the woken server starts.
			markWaking(s, waiting.message)
		} else {
			markAway(s, waiting.reason, waiting.message)
		}
		result.RequeueAfter = earliest(result.RequeueAfter, waiting.after)
	case errors.As(phaseErr, &stalled):
		if stalled.reason == mcpv1alpha1.ReasonPermanentlyFailed {
			markDown(s, stalled.reason, stalled.message)
		} else {
			markAway(s, stalled.reason, stalled.message)
		}
		if serverReadyReason(orig) != stalled.reason && !sc.hasEvent(stalled.reason) {
			sc.event(corev1.EventTypeWarning, stalled.reason, stalled.message)
		}
		sc.wakeFailed(stalled.reason + ": " + stalled.message)
		result.RequeueAfter = earliest(result.RequeueAfter, stalled.recheck)
	}
	transient := phaseErr != nil && waiting == nil && stalled == nil
	if transient {
		msg := textcut.Cut(phaseErr.Error(), 1024)
		if c := meta.FindStatusCondition(orig.Status.Conditions, mcpv1alpha1.ConditionDegraded); c == nil || c.Reason != mcpv1alpha1.ReasonReconcileError {
			sc.event(corev1.EventTypeWarning, mcpv1alpha1.ReasonReconcileError, msg)
		}
		setCondition(s, mcpv1alpha1.ConditionDegraded, metav1.ConditionTrue, mcpv1alpha1.ReasonReconcileError, msg)
	} else {
		if c := meta.FindStatusCondition(s.Status.Conditions, mcpv1alpha1.ConditionDegraded); c != nil && c.Reason == mcpv1alpha1.ReasonReconcileError {
			meta.RemoveStatusCondition(&s.Status.Conditions, mcpv1alpha1.ConditionDegraded)
		}
		// Only a reconcile that did all it could describes the spec.
		s.Status.ObservedGeneration = s.Generation
	}

	stampTransitions(orig, s, sc.now)
	if sc.probed {
		stampProbe(orig, s, sc.now)
	}
	if err := r.patchStatus(ctx, orig, s); err != nil {
		if apierrors.IsConflict(err) {
			// Worked from a stale object: nothing was written; run again.
			return ctrl.Result{RequeueAfter: requeueSoon}, nil
		}
		return ctrl.Result{}, err
	}
	r.emit(s, sc.events)
	traceEvents(ctx, sc.events)
	recordMetrics(s, sc)
	if sc.hasEvent(eventWoke) || sc.hasEvent(eventWakeFailed) {
		r.wakeRequests.Delete(s.UID)
	}
	if transient {
		return ctrl.Result{}, phaseErr
	}
	return result, nil
}

// wakeFailed emits WakeFailed when a waking server fails to start; the
// failure's own reason (ImagePullFailed, Crashed ...) is said too.
func (sc *scope) wakeFailed(why string) {
	if sc.waking && !sc.hasEvent(eventWakeFailed) {
		sc.event(corev1.EventTypeWarning, eventWakeFailed, "the server did not come back after a wake: "+textcut.Cut(why, 1024))
	}
}

// stampTransitions dates the conditions whose status this reconcile changed
// by the reconciler's clock rather than the machine's, which
// meta.SetStatusCondition reads: idle time is measured from Ready's
// transition and compared with the same clock's now.
func stampTransitions(orig, s *mcpv1alpha1.MCPServer, now time.Time) {
	for i := range s.Status.Conditions {
		c := &s.Status.Conditions[i]
		if o := meta.FindStatusCondition(orig.Status.Conditions, c.Type); o == nil || o.Status != c.Status {
			c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
		}
	}
}

// lastProbeRefresh is how old status.lastProbeTime may get while nothing
// else in status changes: a successful probe alone writes status once per
// this long, not at each probe (the exact time is a metric).
const lastProbeRefresh = time.Hour

// stampProbe sets status.lastProbeTime after a successful probe when status
// is written anyway, or when the recorded time is older than
// lastProbeRefresh.
func stampProbe(orig, s *mcpv1alpha1.MCPServer, now time.Time) {
	last := orig.Status.LastProbeTime
	if equality.Semantic.DeepEqual(orig.Status, s.Status) && last != nil && now.Sub(last.Time) < lastProbeRefresh {
		return
	}
	probed := metav1.NewTime(now.Truncate(time.Second))
	s.Status.LastProbeTime = &probed
}

func (sc *scope) hasEvent(reason string) bool {
	for _, e := range sc.events {
		if e.reason == reason {
			return true
		}
	}
	return false
}

func serverReadyReason(s *mcpv1alpha1.MCPServer) string {
	if c := meta.FindStatusCondition(s.Status.Conditions, mcpv1alpha1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

// patchStatus writes status when it changed, with optimistic locking: a
// reconcile working from a stale object gets a conflict instead of
// overwriting newer status.
func (r *MCPServerReconciler) patchStatus(ctx context.Context, orig, s *mcpv1alpha1.MCPServer) error {
	if equality.Semantic.DeepEqual(orig.Status, s.Status) {
		return nil
	}
	err := r.Status().Patch(ctx, s, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	if err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("while writing status: %w", err)
	}
	return err
}

func (r *MCPServerReconciler) emit(s *mcpv1alpha1.MCPServer, events []serverEvent) {
	if r.Recorder == nil {
		return
	}
	for _, e := range events {
		r.Recorder.Eventf(s, nil, e.typ, e.reason, e.reason, "%s", e.message)
	}
}
