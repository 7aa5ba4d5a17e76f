package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/policy"
	"github.com/mcp-operator/mcp-operator/internal/textcut"
)

// Answers a user can give to an approval question.
const (
	answerAllowOnce    = "allow_once"
	answerAllowSession = "allow_session"
	answerDeny         = "deny"
)

// approvalKey names the bridge's question in inputRequests (2026-07-28).
const approvalKey = "approval"

// outcome is how a request's permission resolved.
type outcome struct {
	decision    v1alpha1.Decision // allow or deny (an ask resolves to one of them)
	actor       string            // policy, user or bridge
	sourcedFrom string
	approver    string // who decided a ToolApproval
	reason      string
	failReason  string // tool.failed reason when denied
	// pending is the input_required answer of a 2026-07-28 request waiting
	// for the user: nothing is resolved yet.
	pending *jsonrpc.Message
	// retry is what a denial says about sending the request again (none
	// of them ran it): by default that it is answered the same.
	retry retryHint
}

// sourceOf maps the engine's sourcedFrom to the event's vocabulary.
func sourceOf(s string) string {
	switch s {
	case policy.SourceSessionAllow, policy.SourceSessionAllowOnce:
		return "session-grant"
	}
	return s
}

// outcomeOf turns x's decision into its outcome, putting the question to a
// person where it is ask.
func (b *Bridge) outcomeOf(x *exchange) outcome {
	res := x.res
	switch res.Decision {
	case v1alpha1.DecisionAllow:
		return outcome{decision: v1alpha1.DecisionAllow, actor: "policy", sourcedFrom: sourceOf(res.SourcedFrom)}
	case v1alpha1.DecisionAsk:
		if x.noAsk {
			return unavailable(res, "the policy asks, and a completion or a subscription is not asked about (getting the prompt or reading the resource is)")
		}
		return b.askApproval(x)
	}
	return denial(res)
}

// denial is the outcome of a result the policy (or a rate limit) denies.
func denial(res policy.Result) outcome {
	o := outcome{decision: v1alpha1.DecisionDeny, actor: "policy", sourcedFrom: sourceOf(res.SourcedFrom), reason: res.Reason, failReason: reasonDenied}
	if len(res.Rules) == 1 && res.Rules[0].Section == "rateLimit" {
		// The one denial that passes: when the caller's bucket refills.
		o.failReason, o.retry = reasonRateLimited, retryIn(res.RetryAfter)
	}
	return o
}

// unavailable is the outcome of an ask that no person can be asked about:
// the bridge denies it, and why says what stood in the way.
func unavailable(res policy.Result, why string) outcome {
	return outcome{
		decision: v1alpha1.DecisionDeny, actor: "bridge", sourcedFrom: sourceOf(res.SourcedFrom), failReason: reasonApprovalUnavailable,
		reason: reasonApprovalUnavailable + ": " + why,
	}
}

// offered are the answers the question offers: allow for the session only
// where there is a session and the policy allows it (never for destructive
// tools).
func offered(rq *request, res policy.Result) []string {
	var out []string
	if res.Approval.Allows(v1alpha1.ApprovalAllowOnce) {
		out = append(out, answerAllowOnce)
	}
	if res.Approval.Allows(v1alpha1.ApprovalAllowSession) && rq.sess != nil {
		out = append(out, answerAllowSession)
	}
	return append(out, answerDeny)
}

// channels are the ways the policy lets a person be asked about res, in
// order (elicitation only, for a result without approval settings).
func channels(res policy.Result) []v1alpha1.ApprovalChannel {
	if res.Approval == nil {
		return []v1alpha1.ApprovalChannel{v1alpha1.ChannelElicitation}
	}
	return res.Approval.Channels
}

// askApproval puts x to a person through the first of the policy's
// channels that can carry the question: the agent's client (elicitation)
// or a ToolApproval.
func (b *Bridge) askApproval(x *exchange) outcome {
	rq, res := x.rq, x.res
	if st := x.resumed; st != nil {
		// A 2026-07-28 retry: the answer to the elicitation asked before.
		// The state comes back from the agent, and the policy may have
		// changed since: the answer counts only if the policy still lets
		// the agent's client be asked, and only within what it offers now
		// (otherwise an agent could answer a question that today goes to
		// a person through a ToolApproval).
		if !slices.Contains(channels(res), v1alpha1.ChannelElicitation) {
			// Made again without the answer, it is put to whom the
			// policy names now.
			o := unavailable(res, "the policy no longer lets the client answer this approval (channels: "+channelNames(channels(res))+"); send the request again without the answer")
			o.retry = retryAnytime
			return o
		}
		now := offered(rq, res)
		var still []string
		for _, a := range st.Answers {
			if slices.Contains(now, a) {
				still = append(still, a)
			}
		}
		return userOutcome(x, x.inputResponses[approvalKey], still)
	}
	for _, ch := range channels(res) {
		switch {
		case ch == v1alpha1.ChannelElicitation && rq.elicitation && (rq.stateless || rq.out.canStream):
			return b.askClient(x)
		case ch == v1alpha1.ChannelToolApproval && b.canAskPerson(x):
			return b.askPerson(x, res, offered(rq, res))
		}
	}
	return unavailable(res, "the policy asks for approval through "+channelNames(channels(res))+
		", and none can be used (the client offers no form elicitation, or the bridge makes no ToolApprovals)")
}

func channelNames(chs []v1alpha1.ApprovalChannel) string {
	if len(chs) == 0 {
		return "no channel the asking policies have in common"
	}
	names := make([]string, len(chs))
	for i, ch := range chs {
		names[i] = string(ch)
	}
	return strings.Join(names, ", ")
}

// askClient asks the agent's client: a 2026-07-28 client gets the
// input_required answer, a legacy one the question on its stream.
func (b *Bridge) askClient(x *exchange) outcome {
	rq, res := x.rq, x.res
	answers := offered(rq, res)
	timeout := res.Approval.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	question := elicitParams(x, answers)
	if rq.stateless {
		st := newState(resumeApproval, x, b.now().Add(timeout))
		st.Answers = answers
		pending, _ := b.inputRequired(rq, st, map[string]inputRequest{approvalKey: {Method: "elicitation/create", Params: question}})
		return outcome{pending: pending}
	}
	answer, err := b.elicitInSession(x, question, timeout)
	if Stopping(err) {
		return stoppingOutcome(err)
	}
	if err != nil {
		// Nobody answered: sent again, it is asked again.
		return outcome{
			decision: v1alpha1.DecisionDeny, actor: "bridge", sourcedFrom: "approval:timeout", failReason: reasonApprovalTimeout,
			reason: reasonApprovalTimeout + ": " + err.Error(), retry: retryAnytime,
		}
	}
	return userOutcome(x, answer, answers)
}

// userOutcome turns the user's answer to the question into the outcome.
func userOutcome(x *exchange, answer json.RawMessage, answers []string) outcome {
	var a struct {
		Action  string `json:"action"`
		Content struct {
			Decision string `json:"decision"`
		} `json:"content"`
	}
	_ = json.Unmarshal(answer, &a)
	choice := a.Content.Decision
	if a.Action != "accept" || !slices.Contains(answers, choice) {
		choice = answerDeny
	}
	switch choice {
	case answerAllowOnce:
		return outcome{decision: v1alpha1.DecisionAllow, actor: "user", sourcedFrom: "approval:once"}
	case answerAllowSession:
		x.rq.sess.Grants.AllowSessionFor(x.res)
		return outcome{decision: v1alpha1.DecisionAllow, actor: "user", sourcedFrom: "approval:session"}
	}
	return outcome{decision: v1alpha1.DecisionDeny, actor: "user", sourcedFrom: "approval:deny", reason: "the user denied the " + x.noun(), failReason: reasonDenied}
}

var answerTitles = map[string]string{answerAllowOnce: "Allow once", answerAllowSession: "Allow for this session", answerDeny: "Deny"}

// elicitParams is the form the user answers.
func elicitParams(x *exchange, answers []string) json.RawMessage {
	titles := make([]string, len(answers))
	for i, a := range answers {
		titles[i] = answerTitles[a]
	}
	with := ""
	if x.method != methodRead {
		with = " with no arguments"
		if len(x.args) > 0 {
			with = " with arguments " + textcut.Cut(string(x.args), 512)
		}
	}
	form, _ := json.Marshal(map[string]any{
		"message": fmt.Sprintf("Allow the agent to %s%s? %s", x.action, with, x.res.Reason),
		"requestedSchema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"decision": map[string]any{"type": "string", "title": "Decision", "enum": answers, "enumNames": titles},
			},
			"required": []string{"decision"},
		},
	})
	return form
}

// elicitInSession asks a legacy-era client on the request's response
// stream and waits for its answer (posted back in the session), until
// timeout or the replica's waits end.
func (b *Bridge) elicitInSession(x *exchange, question json.RawMessage, timeout time.Duration) (json.RawMessage, error) {
	rq := x.rq
	id, _ := json.Marshal("approval-" + x.id)
	ctx, cancel := b.untilWaitsEnd(rq.ctx)
	defer cancel()
	noAnswer := fmt.Errorf("no answer within %s", timeout)
	ctx, stop := context.WithTimeoutCause(ctx, timeout, noAnswer)
	defer stop()
	m, err := askInSession(ctx, rq, id, "elicitation/create", question)
	switch {
	case errors.Is(err, errNotSent):
		return nil, errors.New("the question could not be sent to the client")
	case errors.Is(err, noAnswer):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("the %s ended before an answer: %w", x.noun(), err)
	case m.Error != nil:
		return nil, fmt.Errorf("the client refused the question: %s", m.Error.Message)
	}
	return m.Result, nil
}

// stoppingOutcome ends a request whose approval was still awaited when
// the replica stopped: undecided, and safe to send again.
func stoppingOutcome(err error) outcome {
	return outcome{decision: v1alpha1.DecisionDeny, actor: "bridge", sourcedFrom: "approval:stopping", failReason: ReasonStopping, reason: err.Error(), retry: retryAnytime}
}
