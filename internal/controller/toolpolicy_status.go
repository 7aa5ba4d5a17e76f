package controller

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/policy"
	"github.com/mcp-operator/mcp-operator/internal/textcut"
)

// Bounds of what a ToolPolicy's status holds.
const (
	// maxMatchedServers is the CRD's MaxItems of status.matchedServers.
	maxMatchedServers = 1000
	// maxConditionMessage keeps a message with many errors readable and well
	// under the API's limit of 32768 characters.
	maxConditionMessage = 4096
)

// toolPolicyStatus is the status a ToolPolicy should have, given the
// MCPServers of its namespace. It keeps the existing conditions' transition
// times; messages hold no times or counters that change on their own, so an
// unchanged world gives an unchanged status.
func toolPolicyStatus(tp *mcpv1alpha1.ToolPolicy, servers []mcpv1alpha1.MCPServer) mcpv1alpha1.ToolPolicyStatus {
	status := mcpv1alpha1.ToolPolicyStatus{
		ObservedGeneration: tp.Generation,
		Conditions:         slices.Clone(tp.Status.Conditions),
	}
	compiled, errs := policy.CompilePolicy(tp)
	if len(errs) > 0 {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{
			Type:               mcpv1alpha1.ConditionReady,
			Status:             metav1.ConditionFalse,
			Reason:             mcpv1alpha1.ReasonInvalid,
			Message:            invalidMessage(errs),
			ObservedGeneration: tp.Generation,
		})
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{
			Type:               mcpv1alpha1.ConditionWarnings,
			Status:             metav1.ConditionUnknown,
			Reason:             mcpv1alpha1.ReasonInvalid,
			Message:            "the policy does not compile (see Ready); it is linted once it does",
			ObservedGeneration: tp.Generation,
		})
		return status
	}
	var matched []string
	for _, s := range servers {
		if s.Namespace != tp.Namespace {
			continue
		}
		n := 0
		for _, t := range s.Status.Tools {
			if compiled.MatchesTool(s.Name, t.Name, t.Risk) {
				n++
			}
		}
		if n > 0 {
			matched = append(matched, s.Name)
			status.ToolCount += int32(n)
		}
	}
	slices.Sort(matched)
	if len(matched) > maxMatchedServers {
		matched = matched[:maxMatchedServers]
	}
	status.MatchedServers = matched
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type:               mcpv1alpha1.ConditionReady,
		Status:             metav1.ConditionTrue,
		Reason:             mcpv1alpha1.ReasonCompiled,
		Message:            compiledMessage(tp, &status),
		ObservedGeneration: tp.Generation,
	})
	meta.SetStatusCondition(&status.Conditions, warningsCondition(tp, compiled.Lint(&tp.Spec, policy.CatalogsOf(tp.Namespace, servers))))
	return status
}

// warningsCondition lists the lints' findings, each with its field, so the
// author can fix them all in one edit.
func warningsCondition(tp *mcpv1alpha1.ToolPolicy, ws []policy.Warning) metav1.Condition {
	c := metav1.Condition{
		Type:               mcpv1alpha1.ConditionWarnings,
		Status:             metav1.ConditionFalse,
		Reason:             mcpv1alpha1.ReasonNoWarnings,
		Message:            "the lints found nothing",
		ObservedGeneration: tp.Generation,
	}
	if len(ws) == 0 {
		return c
	}
	c.Status, c.Reason = metav1.ConditionTrue, mcpv1alpha1.ReasonHasWarnings
	c.Message = capMessage("the policy is in force, with " + listed(len(ws), func(i int) string { return ws[i].String() }, "a warning", "warnings"))
	return c
}

// invalidMessage lists every error with its field, so the author can fix
// them all in one edit.
func invalidMessage(errs []policy.CompileError) string {
	return capMessage("the policy is not in force (its subjects get deny from it) because of " + listed(len(errs), func(i int) string { return errs[i].Error() }, "an error", "errors"))
}

// listed counts items and lists them each with its field: "an error: x" or
// "3 errors: x; y; z".
func listed(n int, item func(i int) string, one, many string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = item(i)
	}
	what := one
	if n > 1 {
		what = fmt.Sprintf("%d %s", n, many)
	}
	return what + ": " + strings.Join(parts, "; ")
}

// capMessage cuts a condition message to maxConditionMessage bytes, on a
// character boundary, marking the cut.
func capMessage(msg string) string {
	if len(msg) > maxConditionMessage {
		msg = textcut.Prefix(msg, maxConditionMessage-len(" …")) + " …"
	}
	return msg
}

func compiledMessage(tp *mcpv1alpha1.ToolPolicy, status *mcpv1alpha1.ToolPolicyStatus) string {
	return fmt.Sprintf("the policy is in force: %d tool rules, %d resource rules, %d prompt rules, %d skill rules; its tool rules match %d published tools of %d servers",
		len(tp.Spec.Rules), len(tp.Spec.Resources), len(tp.Spec.Prompts), len(tp.Spec.Skills), status.ToolCount, len(status.MatchedServers))
}

// readyReason is the Ready condition's reason, for logs.
func readyReason(status *mcpv1alpha1.ToolPolicyStatus) string {
	if c := meta.FindStatusCondition(status.Conditions, mcpv1alpha1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}
