package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/approval"
	"github.com/mcp-operator/mcp-operator/internal/textcut"
)

func approvalsCmd(fs *flag.FlagSet) func(*env, []string) error {
	allNamespaces := fs.Bool("all-namespaces", false, "list the ToolApprovals of every namespace")
	fs.BoolVar(allNamespaces, "A", false, "short for --all-namespaces")
	all := fs.Bool("all", false, "list finished ToolApprovals too (approved, denied, expired, cancelled)")
	return func(e *env, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("unexpected arguments %v", args)
		}
		var opts []client.ListOption
		if !*allNamespaces {
			opts = append(opts, client.InNamespace(e.namespace))
		}
		var list v1alpha1.ToolApprovalList
		if err := e.client.List(context.Background(), &list, opts...); err != nil {
			return fmt.Errorf("while listing ToolApprovals: %w", err)
		}
		items := list.Items[:0]
		for _, a := range list.Items {
			if *all || approval.Waiting(&a) {
				items = append(items, a)
			}
		}
		if len(items) == 0 {
			fmt.Fprintln(e.out, "No ToolApprovals waiting for a decision.")
			return nil
		}
		sort.Slice(items, func(i, j int) bool { return items[i].CreationTimestamp.Before(&items[j].CreationTimestamp) })
		w := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAMESPACE\tNAME\tPHASE\tREQUESTER\tTARGET\tARGUMENTS\tRISK\tAGE\tEXPIRES IN")
		now := time.Now()
		for _, a := range items {
			r := a.Spec.Request
			phase := a.Status.Phase
			if phase == "" {
				phase = v1alpha1.ApprovalPending
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Namespace, a.Name, phase, r.Requester.Username, r.Target,
				preview(r.ArgumentsPreview, 60), r.Risk, duration.HumanDuration(now.Sub(a.CreationTimestamp.Time)), expiresIn(&a, now))
		}
		return w.Flush()
	}
}

func expiresIn(a *v1alpha1.ToolApproval, now time.Time) string {
	if !approval.Waiting(a) {
		return "-"
	}
	left := a.Spec.Request.ExpiresAt.Sub(now)
	if left <= 0 {
		return "expired"
	}
	return duration.HumanDuration(left)
}

func preview(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "-"
	}
	return textcut.Cut(s, n)
}

func approveCmd(fs *flag.FlagSet) func(*env, []string) error {
	session := fs.Bool("session", false, "approve the tool for the rest of the agent's session, with ANY arguments, not only the ones shown (when the approval offers it)")
	comment := fs.String("comment", "", "comment recorded with the decision")
	return func(e *env, args []string) error {
		verdict := v1alpha1.VerdictAllowOnce
		if *session {
			verdict = v1alpha1.VerdictAllowSession
		}
		return decide(e, args, verdict, *comment)
	}
}

func denyCmd(fs *flag.FlagSet) func(*env, []string) error {
	comment := fs.String("comment", "", "comment recorded with the decision (the agent's error carries it)")
	return func(e *env, args []string) error {
		return decide(e, args, v1alpha1.VerdictDeny, *comment)
	}
}

// decide writes the decision under the caller's own user name, which the
// API server reports (SelfSubjectReview) and the admission policy checks.
func decide(e *env, args []string, verdict v1alpha1.ApprovalVerdict, comment string) error {
	if len(args) != 1 {
		return errors.New("give the name of one ToolApproval (kubectl mcp approvals lists them)")
	}
	ctx := context.Background()
	var a v1alpha1.ToolApproval
	if err := e.client.Get(ctx, client.ObjectKey{Namespace: e.namespace, Name: args[0]}, &a); err != nil {
		return fmt.Errorf("while reading ToolApproval %s/%s: %w", e.namespace, args[0], err)
	}
	if d := a.Spec.Decision; d != nil {
		return fmt.Errorf("ToolApproval %s/%s was decided already: %s by %s", a.Namespace, a.Name, d.Verdict, d.Decider)
	}
	if !approval.Waiting(&a) {
		return fmt.Errorf("ToolApproval %s/%s is %s: the request no longer waits for a decision", a.Namespace, a.Name, a.Status.Phase)
	}
	if verdict == v1alpha1.VerdictAllowSession && !approval.Offers(a.Spec.Request.Modes, v1alpha1.VerdictAllowSession) {
		return fmt.Errorf("ToolApproval %s/%s does not offer approval for the session (offered: %v); approve without --session", a.Namespace, a.Name, a.Spec.Request.Modes)
	}
	me, err := e.clientset.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("while asking the API server who you are: %w", err)
	}
	user := me.Status.UserInfo.Username
	a.Spec.Decision = &v1alpha1.ApprovalDecision{Verdict: verdict, Decider: user, Comment: comment}
	// The update carries the version read: a decision made meanwhile by
	// someone else is a conflict, never overwritten.
	if err := e.client.Update(ctx, &a); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("ToolApproval %s/%s changed while you decided (someone else may have decided it): look again with kubectl mcp approvals --all", a.Namespace, a.Name)
		}
		return fmt.Errorf("while deciding ToolApproval %s/%s: %w", a.Namespace, a.Name, err)
	}
	word := "denied"
	if verdict != v1alpha1.VerdictDeny {
		word = "approved (" + string(verdict) + ")"
	}
	fmt.Fprintf(e.out, "toolapproval %s/%s %s by %s: %s %s for %s\n", a.Namespace, a.Name, word, user,
		a.Spec.Request.Method, a.Spec.Request.Target, a.Spec.Request.Requester.Username)
	if verdict == v1alpha1.VerdictAllowSession {
		// The bridge grants a session approval by tool, not by arguments:
		// say so where the person sees the result of what they did.
		fmt.Fprintf(e.out, "  for the rest of session %s, %s may call %s with any arguments without asking again\n",
			a.Spec.Request.Requester.Session, a.Spec.Request.Requester.Username, a.Spec.Request.Target)
	}
	return nil
}
