package console

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/approval"
)

// approvalsView is the approvals page: what waits, then what finished.
type approvalsView struct {
	Now        time.Time
	Namespaces []string
	Pending    []pendingRow
	Finished   []approvalRow
}

// pendingRow is a waiting request as its card shows it, in plain strings:
// the page may hold hundreds, and the template reads each field once.
type pendingRow struct {
	Namespace, Name, Target, Risk, Requester, Server, Method, Preview, Reason, Session string
	// ID makes the card's element ids (namespace-name), Action its form's
	// path, Left the time left.
	ID, Action, Left string
	Rules            []string
	OffersSession    bool
	Destructive      bool
	expires          time.Time
}

func pendingOf(a *v1alpha1.ToolApproval, now time.Time) pendingRow {
	r := &a.Spec.Request
	left := "expired"
	if d := r.ExpiresAt.Sub(now); d > 0 {
		left = duration.HumanDuration(d)
	}
	return pendingRow{Namespace: a.Namespace, Name: a.Name, Target: r.Target, Risk: string(r.Risk), Requester: r.Requester.Username,
		Server: r.Server, Method: r.Method, Preview: r.ArgumentsPreview, Reason: r.Reason, Session: r.Requester.Session,
		ID: a.Namespace + "-" + a.Name, Action: "/approvals/" + url.PathEscape(a.Namespace) + "/" + url.PathEscape(a.Name), Left: left,
		Rules: r.Rules, OffersSession: approval.Offers(r.Modes, v1alpha1.VerdictAllowSession), Destructive: r.Risk == v1alpha1.RiskDestructive,
		expires: r.ExpiresAt.Time}
}

type approvalRow struct {
	*v1alpha1.ToolApproval
	Phase v1alpha1.ApprovalPhase
	// Decided: a decision is recorded and the bridge has not acted yet.
	Decided bool
}

// maxFinishedShown bounds the finished list (the newest first).
const maxFinishedShown = 100

func (s *Server) approvalsPage(r *http.Request, x *session) (string, page, error) {
	ctx := r.Context()
	v := approvalsView{Now: s.opts.Now(), Namespaces: s.visible(ctx, x, "toolapprovals")}
	var list v1alpha1.ToolApprovalList
	if err := s.cache.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return "", page{}, err
	}
	for i := range list.Items {
		a := &list.Items[i]
		if _, ok := slices.BinarySearch(v.Namespaces, a.Namespace); !ok {
			continue
		}
		if approval.Waiting(a) {
			v.Pending = append(v.Pending, pendingOf(a, v.Now))
			continue
		}
		row := approvalRow{ToolApproval: a, Phase: a.Status.Phase}
		if row.Phase == "" {
			row.Phase = v1alpha1.ApprovalPending
		}
		row.Decided = row.Phase == v1alpha1.ApprovalPending
		v.Finished = append(v.Finished, row)
	}
	// What expires first comes first; the newest outcome first.
	slices.SortFunc(v.Pending, func(a, b pendingRow) int { return a.expires.Compare(b.expires) })
	slices.SortFunc(v.Finished, func(a, b approvalRow) int { return finishedAt(b).Compare(finishedAt(a)) })
	if len(v.Finished) > maxFinishedShown {
		v.Finished = v.Finished[:maxFinishedShown]
	}
	return "approvals", page{Title: "Approvals", Nav: "approvals", Live: topicApprovals, Data: v}, nil
}

func finishedAt(r approvalRow) time.Time {
	if r.Status.FinishedAt != nil {
		return r.Status.FinishedAt.Time
	}
	return r.CreationTimestamp.Time
}

// maxComment is the decision comment's limit in the API.
const maxComment = 1024

// decide records a person's decision on a ToolApproval, as that person:
// RBAC says whether they may update it, and the admission policy whether
// this decision may be recorded (never on their own request). Whatever the
// outcome, the person is sent back to the approvals page with a message.
func (s *Server) decide(w http.ResponseWriter, r *http.Request, x *session) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	verdict := v1alpha1.ApprovalVerdict(r.PostForm.Get("verdict"))
	comment := strings.TrimSpace(r.PostForm.Get("comment"))
	back := func(f flash) {
		x.addFlash(f)
		http.Redirect(w, r, "/approvals", http.StatusSeeOther)
	}
	ref := ns + "/" + name
	switch {
	case verdict != v1alpha1.VerdictAllowOnce && verdict != v1alpha1.VerdictAllowSession && verdict != v1alpha1.VerdictDeny:
		back(flash{Error: true, Text: fmt.Sprintf("Nothing was decided on %s: %q is not a decision (AllowOnce, AllowSession or Deny).", ref, verdict)})
		return
	case utf8.RuneCountInString(comment) > maxComment:
		back(flash{Error: true, Text: fmt.Sprintf("Nothing was decided on %s: the comment is longer than %d characters.", ref, maxComment)})
		return
	}
	pc, err := s.clientsOf(x)
	if err != nil {
		back(flash{Error: true, Text: "Nothing was decided: " + err.Error()})
		return
	}
	ctx := r.Context()
	var a v1alpha1.ToolApproval
	if err := pc.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &a); err != nil {
		back(flash{Error: true, Text: fmt.Sprintf("Nothing was decided: ToolApproval %s could not be read as %s: %s", ref, x.person.Username, apiMessage(err))})
		return
	}
	if d := a.Spec.Decision; d != nil {
		back(flash{Error: true, Text: fmt.Sprintf("ToolApproval %s was decided already: %s by %s.", ref, d.Verdict, d.Decider)})
		return
	}
	if !approval.Waiting(&a) {
		back(flash{Error: true, Text: fmt.Sprintf("ToolApproval %s is %s: the request no longer waits for a decision.", ref, a.Status.Phase)})
		return
	}
	if !approval.Offers(a.Spec.Request.Modes, verdict) {
		back(flash{Error: true, Text: fmt.Sprintf("ToolApproval %s does not offer %s (offered: %v); nothing was decided.", ref, verdict, a.Spec.Request.Modes)})
		return
	}
	a.Spec.Decision = &v1alpha1.ApprovalDecision{Verdict: verdict, Decider: x.person.Username, Comment: comment}
	// The update carries the version read: a decision made meanwhile by
	// someone else is a conflict, never overwritten.
	if err := pc.client.Update(ctx, &a); err != nil {
		text := fmt.Sprintf("The API server refused your decision on %s: %s", ref, apiMessage(err))
		if apierrors.IsConflict(err) {
			text = fmt.Sprintf("ToolApproval %s changed while you decided (someone else may have decided it); nothing was recorded. Look again below.", ref)
		}
		back(flash{Error: true, Text: text})
		return
	}
	req := a.Spec.Request
	text := fmt.Sprintf("Denied %s %s for %s.", req.Method, req.Target, req.Requester.Username)
	switch verdict {
	case v1alpha1.VerdictAllowOnce:
		text = fmt.Sprintf("Approved once: %s %s for %s, with the arguments shown.", req.Method, req.Target, req.Requester.Username)
	case v1alpha1.VerdictAllowSession:
		text = fmt.Sprintf("Approved for the session: for the rest of session %s, %s may call %s with ANY arguments without asking again.",
			req.Requester.Session, req.Requester.Username, req.Target)
	}
	s.opts.Log.Info("decided", "approval", ref, "verdict", verdict, "decider", x.person.Username)
	back(flash{Text: text})
}

// apiMessage is what the API server said, without the Go error's wrapping:
// an admission policy's refusal reads as its message.
func apiMessage(err error) string {
	if se, ok := err.(apierrors.APIStatus); ok && se.Status().Message != "" {
		return se.Status().Message
	}
	return err.Error()
}
