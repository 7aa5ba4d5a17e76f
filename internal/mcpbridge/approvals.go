package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/approval"
	"github.com/mcp-operator/mcp-operator/internal/k8s/apiretry"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/policy"
)

// Reasons of a request a person decided through a ToolApproval.
const (
	reasonDeniedByApprover = "denied_by_approver"
)

// approvalProgressEvery is how often a waiting session-era agent that sent
// a progress token hears that its request still waits (it also keeps the
// response stream from looking idle).
const approvalProgressEvery = 30 * time.Second

// canAskPerson says whether p can be put to a person through a
// ToolApproval: the bridge has a broker and knows the server's namespace.
func (b *Bridge) canAskPerson(x *exchange) bool {
	return b.cfg.Approvals != nil && x.server != nil
}

// askPerson creates a ToolApproval for p and waits for a person's decision
// (out of band: docs/approvals.md). answers are what the question may be
// answered with, as offered by the policy.
func (b *Bridge) askPerson(x *exchange, res policy.Result, answers []string) outcome {
	rq := x.rq
	var modes []v1alpha1.ApprovalMode
	for _, a := range answers {
		switch a {
		case answerAllowOnce:
			modes = append(modes, v1alpha1.ApprovalAllowOnce)
		case answerAllowSession:
			modes = append(modes, v1alpha1.ApprovalAllowSession)
		}
	}
	if len(modes) == 0 {
		// Nothing a person could approve with (say a destructive tool
		// whose policy offers only AllowSession): asking would only be a
		// ToolApproval the API server refuses.
		return unavailable(res, "the policy leaves no approval mode for this "+x.noun()+" (AllowSession is never offered for destructive tools or without a session); add AllowOnce to approval.modes")
	}
	timeout := 2 * time.Minute
	if res.Approval != nil && res.Approval.Timeout > 0 {
		timeout = res.Approval.Timeout
	}
	rules := make([]string, len(res.Rules))
	for i, r := range res.Rules {
		rules[i] = r.String()
	}
	stop := make(chan struct{})
	defer close(stop)
	// A stopping replica stops waiting: the request is answered as not
	// decided, to be sent again (the ToolApproval is left Cancelled).
	ctx, cancel := b.untilWaitsEnd(rq.ctx)
	defer cancel()
	o, err := b.cfg.Approvals.Ask(ctx, approval.Request{
		Namespace: x.server.Namespace, Server: x.server.Name, Method: x.method, Target: x.target,
		Args: x.args, ArgsDigest: x.argsDigest(), ArgsPreview: b.argsPreview(x),
		Requester: v1alpha1.ApprovalRequester{Username: rq.id.Username, Groups: rq.id.Groups, Session: rq.sessionID()},
		Risk:      res.RiskAtDecision, Rules: rules, Reason: res.Reason, Modes: modes, ToolCallID: x.id, Timeout: timeout,
		Pending: func(namespace, name string, expires time.Time) {
			b.progressWhileWaiting(x, namespace, name, expires, stop)
		},
	})
	if cause := context.Cause(ctx); Stopping(cause) {
		return stoppingOutcome(cause)
	}
	if err != nil {
		o := unavailable(res, "no ToolApproval could be created: "+err.Error())
		if after, passes := apiretry.After(err); passes {
			// The API server is away or busy (restarting, say): asked
			// again then, a person can be asked.
			o.retry = retryIn(after)
		}
		return o
	}
	from := o.Ref()
	switch o.Phase {
	case v1alpha1.ApprovalApproved:
		if o.Verdict == v1alpha1.VerdictAllowSession && rq.sess != nil {
			rq.sess.Grants.AllowSessionFor(res)
		}
		return outcome{decision: v1alpha1.DecisionAllow, actor: "user", approver: o.Decider, sourcedFrom: from}
	case v1alpha1.ApprovalDenied:
		reason := fmt.Sprintf("%s: %s", reasonDeniedByApprover, o.Message)
		if o.Comment != "" {
			reason += ": " + o.Comment
		}
		return outcome{decision: v1alpha1.DecisionDeny, actor: "user", approver: o.Decider, sourcedFrom: from, reason: reason, failReason: reasonDeniedByApprover}
	case v1alpha1.ApprovalExpired:
		// Nobody decided: sent again, it is asked again.
		return outcome{decision: v1alpha1.DecisionDeny, actor: "bridge", sourcedFrom: from, failReason: reasonApprovalTimeout,
			reason: reasonApprovalTimeout + ": " + o.Message, retry: retryAnytime}
	}
	return outcome{decision: v1alpha1.DecisionDeny, actor: "bridge", sourcedFrom: from, failReason: reasonApprovalTimeout,
		reason: fmt.Sprintf("%s: the %s ended before a decision (%s)", reasonApprovalTimeout, x.noun(), o.Message), retry: retryAnytime}
}

// argsPreview is what the person deciding sees of p's arguments: redacted
// like audit events (the server's Secret values and credential shapes).
func (b *Bridge) argsPreview(x *exchange) string {
	if len(x.args) == 0 {
		return ""
	}
	out, err := b.redactor(x.server).JSON(x.args, nil)
	if err != nil {
		return "[arguments not shown: they could not be redacted]"
	}
	return string(out)
}

// progressWhileWaiting tells a session-era agent that sent a progress token
// what its request waits for and how a person decides it, now and then
// until stop.
func (b *Bridge) progressWhileWaiting(x *exchange, namespace, name string, expires time.Time, stop <-chan struct{}) {
	rq := x.rq
	if x.progressToken == nil || !rq.out.canStream {
		return
	}
	msg := fmt.Sprintf("waiting for a person to approve ToolApproval %s/%s (kubectl mcp approve %s -n %s) until %s",
		namespace, name, name, namespace, expires.UTC().Format(time.RFC3339))
	send := func() {
		params, _ := json.Marshal(map[string]any{"progressToken": x.progressToken, "progress": x.nextProgress(), "message": msg})
		rq.out.send(jsonrpc.NewNotification("notifications/progress", params))
	}
	send()
	go func() {
		t := time.NewTicker(approvalProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				send()
			case <-stop:
				return
			}
		}
	}()
}

// progressMeta is the params._meta of a read or a prompt: the progress
// token a request waiting for a person's decision is told about.
type progressMeta struct {
	ProgressToken json.RawMessage `json:"progressToken"`
}
