package controller

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// +kubebuilder:rbac:groups=mcp-operator.dev,resources=toolpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=mcp-operator.dev,resources=toolpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=mcp-operator.dev,resources=mcpservers,verbs=get;list;watch

// ToolPolicyReconciler compiles each ToolPolicy and reports in its status
// whether it is in force and which published tools its rules reach. The
// bridge compiles policies itself; this controller is how authors learn of
// their mistakes.
type ToolPolicyReconciler struct {
	client.Client
}

// SetupWithManager registers the reconciler, watching ToolPolicies and the
// MCPServers whose catalogs they match.
func (r *ToolPolicyReconciler) SetupWithManager(mgr ctrl.Manager, opts Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("toolpolicy").
		// Status writes do not change the generation, so they do not come
		// back as work.
		For(&mcpv1alpha1.ToolPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&mcpv1alpha1.MCPServer{},
			handler.EnqueueRequestsFromMapFunc(r.policiesOfServerNamespace),
			builder.WithPredicates(catalogChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(opts.MaxConcurrentReconciles, 1)}).
		Complete(r)
}

// Reconcile computes the policy's status and writes it when it changed.
func (r *ToolPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var tp mcpv1alpha1.ToolPolicy
	if err := r.Get(ctx, req.NamespacedName, &tp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var servers mcpv1alpha1.MCPServerList
	if err := r.List(ctx, &servers, client.InNamespace(tp.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("while listing the MCPServers of namespace %s: %w", tp.Namespace, err)
	}
	status := toolPolicyStatus(&tp, servers.Items)
	if equality.Semantic.DeepEqual(tp.Status, status) {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(tp.DeepCopy())
	tp.Status = status
	if err := r.Status().Patch(ctx, &tp, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("while writing the status of ToolPolicy %s: %w", req.NamespacedName, err)
	}
	log.FromContext(ctx).V(1).Info("status written", "ready", readyReason(&status), "matchedServers", len(status.MatchedServers), "toolCount", status.ToolCount)
	return ctrl.Result{}, nil
}

// policiesOfServerNamespace maps an MCPServer to every ToolPolicy of its
// namespace: any of them may match its tools.
func (r *ToolPolicyReconciler) policiesOfServerNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	var policies mcpv1alpha1.ToolPolicyList
	if err := r.List(ctx, &policies, client.InNamespace(obj.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "while listing the ToolPolicies of a changed MCPServer's namespace", "namespace", obj.GetNamespace())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(policies.Items))
	for _, p := range policies.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
	}
	return reqs
}

// catalogChanged passes MCPServer events that can change what a policy
// matches or what its lints find: a server coming or going, or its
// published tools (names, risks, arguments, how many) changing.
var catalogChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldServer, okOld := e.ObjectOld.(*mcpv1alpha1.MCPServer)
		newServer, okNew := e.ObjectNew.(*mcpv1alpha1.MCPServer)
		if !okOld || !okNew {
			return true
		}
		return oldServer.Status.ToolCount != newServer.Status.ToolCount ||
			!sameMatchedAndLinted(oldServer.Status.Tools, newServer.Status.Tools)
	},
}

// sameMatchedAndLinted compares what policy matching and the lints look at.
func sameMatchedAndLinted(a, b []mcpv1alpha1.ToolStatus) bool {
	return slices.EqualFunc(a, b, func(x, y mcpv1alpha1.ToolStatus) bool {
		return x.Name == y.Name && x.Risk == y.Risk && slices.Equal(x.Arguments, y.Arguments)
	})
}
