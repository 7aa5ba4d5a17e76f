package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// checkName is the first phase: of two same-named servers in the bridge's
// scope only the older is served; the newer one runs nothing.
func (r *MCPServerReconciler) checkName(ctx context.Context, sc *scope) (phaseResult, error) {
	s := sc.server
	older := r.olderNamesake(ctx, s)
	if older == "" {
		meta.RemoveStatusCondition(&s.Status.Conditions, mcpv1alpha1.ConditionNameConflict)
		return phaseResult{}, nil
	}
	markDown(s, mcpv1alpha1.ReasonNameInUse, fmt.Sprintf("an older MCPServer %s in the bridge's scope has this name; rename one of them", older))
	setCondition(s, mcpv1alpha1.ConditionNameConflict, metav1.ConditionTrue, mcpv1alpha1.ReasonNameInUse,
		fmt.Sprintf("MCPServer %s is older and keeps the name %s", older, s.Name))
	return phaseResult{stop: true}, r.deletePods(ctx, s)
}

// olderNamesake is the older server of the same name in the bridge's scope
// ("namespace/name"), or "".
func (r *MCPServerReconciler) olderNamesake(ctx context.Context, s *mcpv1alpha1.MCPServer) string {
	inScope := false
	for _, ns := range r.BridgeNamespaces {
		inScope = inScope || ns == s.Namespace
	}
	if !inScope {
		return ""
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
			return ns + "/" + other.Name
		}
	}
	return ""
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
