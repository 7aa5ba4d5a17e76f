package approval

import "github.com/mcp-operator/mcp-operator/api/v1alpha1"

// Waiting says whether a still waits for a person: no decision and no
// outcome yet. kubectl mcp and the console offer a decision only then.
func Waiting(a *v1alpha1.ToolApproval) bool {
	return a.Spec.Decision == nil && (a.Status.Phase == "" || a.Status.Phase == v1alpha1.ApprovalPending)
}

// Offers says whether a verdict is one a person may decide with: Deny
// always, an approval only in a mode the request offers.
func Offers(modes []v1alpha1.ApprovalMode, v v1alpha1.ApprovalVerdict) bool {
	if v == v1alpha1.VerdictDeny {
		return true
	}
	for _, m := range modes {
		if string(m) == string(v) {
			return true
		}
	}
	return false
}
