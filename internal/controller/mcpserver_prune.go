package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// deletePods deletes all of the server's pods.
func (r *MCPServerReconciler) deletePods(ctx context.Context, s *mcpv1alpha1.MCPServer) error {
	_, err := r.prunePods(ctx, s, "")
	return err
}

// prunePods deletes the server's pods except the one named keep, and returns
// that one when it exists: older incarnations and pods of an older spec go.
// One list per reconcile.
func (r *MCPServerReconciler) prunePods(ctx context.Context, s *mcpv1alpha1.MCPServer, keep string) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(s.Namespace), client.MatchingLabels{mcpv1alpha1.ServerLabel: s.Name}); err != nil {
		return nil, fmt.Errorf("while listing the server's pods: %w", err)
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
			return nil, fmt.Errorf("while deleting the old pod %s of the server: %w", p.Name, err)
		}
	}
	return kept, nil
}
