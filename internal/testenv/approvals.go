package testenv

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// DecideApproval writes a person's decision into a ToolApproval, as the
// console or `kubectl mcp approve` does, and fails the test if the API
// server refuses it. a itself is left as it was.
func DecideApproval(t interface {
	Helper()
	Fatal(...any)
}, c client.Client, a *mcpv1alpha1.ToolApproval, verdict mcpv1alpha1.ApprovalVerdict, decider, comment string) {
	t.Helper()
	a = a.DeepCopy()
	a.Spec.Decision = &mcpv1alpha1.ApprovalDecision{Verdict: verdict, Decider: decider, Comment: comment}
	if err := c.Update(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}
