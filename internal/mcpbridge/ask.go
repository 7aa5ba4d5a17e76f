package mcpbridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/approval"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/policy"
)

// Answers a user can give to an approval question.
const (
	answerAllowOnce    = "allow_once"
	answerAllowSession = "allow_session"
	answerDeny         = "deny"
)

// approvalKey names the bridge's question in inputRequests (2026-07-28).
const approvalKey = "approval"

// approvalPurpose separates approval states from other sealed values.
const approvalPurpose = "mcp-approval"

// permission is one request the permission engine decides and the user may
// be asked about: a tool call, a resource read or a prompt. All three go
// through permit, so their questions, sealed states and decision events
// are made one way.
type permission struct {
	rq *request
	// method is tools/call, resources/read or prompts/get.
	method string
	// target is the canonical name the decision is about and the sealed
	// state binds: mcp.<server>.<tool>, mcp://<server>/<uri> or
	// mcp.<server>.<prompt>.
	target string
	// args are a tool's or a prompt's arguments (none for a read): the
	// sealed state binds their digest, the question shows a preview.
	args json.RawMessage
	// action names the request in the question, as the agent sees it:
	// "call mcp.fs.write (risk write)", "read the resource <uri>".
	action string
	// inputResponses and requestState are the params of a 2026-07-28
	// retry.
	inputResponses map[string]json.RawMessage
	requestState   string
	// id is the toolCallId of the request's events: new, or the asking
	// request's on a retry.
	id string
	// server is the MCPServer the request goes to, when known (a person
	// asked through a ToolApproval decides in its namespace).
	server *routes.Server
	// progressToken is the agent's, told what a ToolApproval waits for.
	progressToken json.RawMessage
}

// retryParams are the params of a 2026-07-28 retry, whatever the method.
type retryParams struct {
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
	RequestState   string                     `json:"requestState"`
}

// invalidStateError refuses a retry whose requestState does not fit it.
type invalidStateError struct{ msg string }

func (e *invalidStateError) Error() string { return e.msg }

// permit decides p: it records the request (or, on a 2026-07-28 retry,
// takes up the one the sealed state names), applies the session's grants,
// asks the user where the result is ask, and records the decision before
// it returns. An outcome with pending set is the input_required answer, with
// nothing resolved yet. An error is an *invalidStateError or a record that
// could not be written: either way nothing may go upstream.
func (b *Bridge) permit(p *permission, res policy.Result) (outcome, error) {
	rq := p.rq
	var st *approvalState
	if p.requestState != "" {
		// The retry of a request that asked: the same id, and
		// permission.requested is written already.
		var err error
		if st, err = b.openApprovalState(p); err != nil {
			return outcome{}, err
		}
		p.id = st.ToolCallID
	} else {
		p.id = b.cfg.NewCallID()
		if _, err := b.audit(rq, p.requested(res, b.source(rq))); err != nil {
			return outcome{}, err
		}
	}
	if rq.sess != nil {
		res = rq.sess.Grants.Apply(res)
	}
	if p.method == methodCall && b.cfg.Limiter != nil {
		// Only tool calls count against a policy's rate limit.
		res = b.cfg.Limiter.Apply(rq.id.Subject, res)
	}
	o := b.resolve(p, res, st)
	if o.pending != nil {
		return o, nil
	}
	if _, err := b.audit(rq, p.resolved(o)); err != nil {
		return outcome{}, err
	}
	return o, nil
}

// requested is p's permission.requested event.
func (p *permission) requested(res policy.Result, source string) audit.PermissionRequested {
	ev := audit.PermissionRequested{Args: p.args, RiskAtDecision: string(res.RiskAtDecision), SourcedFrom: source, ToolCallID: p.id}
	ev.Tool, ev.Resource, ev.Prompt = p.names()
	return ev
}

// resolved is p's permission.resolved event.
func (p *permission) resolved(o outcome) audit.PermissionResolved {
	ev := audit.PermissionResolved{Decision: o.decision, Actor: o.actor, SourcedFrom: o.sourcedFrom, ToolCallID: p.id, Reason: o.reason, Approver: o.approver}
	ev.Tool, ev.Resource, ev.Prompt = p.names()
	return ev
}

// names puts p's target in the event field of its kind.
func (p *permission) names() (tool, resource, prompt string) {
	switch p.method {
	case methodRead:
		return "", p.target, ""
	case methodPrompt:
		return "", "", p.target
	}
	return p.target, "", ""
}

// Methods a permission is for.
const (
	methodCall   = "tools/call"
	methodRead   = "resources/read"
	methodPrompt = "prompts/get"
)

// noun names the request in reasons: "the user denied the call".
func (p *permission) noun() string {
	switch p.method {
	case methodRead:
		return "read"
	case methodPrompt:
		return "prompt"
	}
	return "call"
}

// outcome is how a request's permission resolved.
type outcome struct {
	decision    string // allow or deny
	actor       string // policy, user or bridge
	sourcedFrom string
	approver    string // who decided a ToolApproval
	reason      string
	failReason  string // tool.failed reason when denied
	// pending is the input_required answer of a 2026-07-28 request waiting
	// for the user: nothing is resolved yet.
	pending *jsonrpc.Message
}

// sourceOf maps the engine's sourcedFrom to the event's vocabulary.
func sourceOf(s string) string {
	switch s {
	case policy.SourceSessionAllow, policy.SourceSessionAllowOnce:
		return "session-grant"
	}
	return s
}

func (b *Bridge) resolve(p *permission, res policy.Result, st *approvalState) outcome {
	switch res.Decision {
	case v1alpha1.DecisionAllow:
		return outcome{decision: "allow", actor: "policy", sourcedFrom: sourceOf(res.SourcedFrom)}
	case v1alpha1.DecisionAsk:
		return b.ask(p, res, st)
	}
	return denial(res)
}

// denial is the outcome of a result the policy (or a rate limit) denies.
func denial(res policy.Result) outcome {
	fail := reasonDenied
	if len(res.Rules) == 1 && res.Rules[0].Section == "rateLimit" {
		fail = reasonRateLimited
	}
	return outcome{decision: "deny", actor: "policy", sourcedFrom: sourceOf(res.SourcedFrom), reason: res.Reason, failReason: fail}
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

// ask puts p to a person through the first of the policy's channels that
// can carry the question: the agent's client (elicitation) or a
// ToolApproval.
func (b *Bridge) ask(p *permission, res policy.Result, st *approvalState) outcome {
	rq := p.rq
	if st != nil {
		// A 2026-07-28 retry: the answer to the elicitation asked before.
		// The state comes back from the agent, and the policy may have
		// changed since: the answer counts only if the policy still lets
		// the agent's client be asked, and only within what it offers now
		// (otherwise an agent could answer a question that today goes to
		// a person through a ToolApproval).
		if !slices.Contains(channels(res), v1alpha1.ChannelElicitation) {
			return outcome{
				decision: "deny", actor: "bridge", sourcedFrom: sourceOf(res.SourcedFrom), failReason: reasonApprovalUnavailable,
				reason: reasonApprovalUnavailable + ": the policy no longer lets the client answer this approval (channels: " + channelNames(channels(res)) + "); send the request again without the answer",
			}
		}
		now := offered(rq, res)
		var still []string
		for _, a := range st.Answers {
			if contains(now, a) {
				still = append(still, a)
			}
		}
		return answered(p, res, p.inputResponses[approvalKey], still)
	}
	for _, ch := range channels(res) {
		switch {
		case ch == v1alpha1.ChannelElicitation && rq.elicitation && (rq.stateless || rq.out.canStream):
			return b.elicitAnswer(p, res)
		case ch == v1alpha1.ChannelToolApproval && b.canAskPerson(p):
			return b.askPerson(p, res, offered(rq, res))
		}
	}
	return outcome{
		decision: "deny", actor: "bridge", sourcedFrom: sourceOf(res.SourcedFrom), failReason: reasonApprovalUnavailable,
		reason: fmt.Sprintf("%s: the policy asks for approval through %s, and none can be used (the client offers no form elicitation, or the bridge makes no ToolApprovals)",
			reasonApprovalUnavailable, channelNames(channels(res))),
	}
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

// elicitAnswer asks the agent's client: a 2026-07-28 client gets the
// input_required answer, a legacy one the question on its stream.
func (b *Bridge) elicitAnswer(p *permission, res policy.Result) outcome {
	rq := p.rq
	answers := offered(rq, res)
	timeout := res.Approval.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	question := elicitParams(p, res, answers)
	if rq.stateless {
		return outcome{pending: b.inputRequired(p, question, answers, timeout)}
	}
	answer, err := b.elicit(p, question, timeout)
	if err != nil {
		return outcome{
			decision: "deny", actor: "bridge", sourcedFrom: "approval:timeout", failReason: reasonApprovalTimeout,
			reason: reasonApprovalTimeout + ": " + err.Error(),
		}
	}
	return answered(p, res, answer, answers)
}

// answered turns the user's answer into the outcome.
func answered(p *permission, res policy.Result, answer json.RawMessage, answers []string) outcome {
	var a struct {
		Action  string `json:"action"`
		Content struct {
			Decision string `json:"decision"`
		} `json:"content"`
	}
	_ = json.Unmarshal(answer, &a)
	choice := a.Content.Decision
	if a.Action != "accept" || !contains(answers, choice) {
		choice = answerDeny
	}
	switch choice {
	case answerAllowOnce:
		return outcome{decision: "allow", actor: "user", sourcedFrom: "approval:once"}
	case answerAllowSession:
		p.rq.sess.Grants.AllowSessionFor(res)
		return outcome{decision: "allow", actor: "user", sourcedFrom: "approval:session"}
	}
	return outcome{decision: "deny", actor: "user", sourcedFrom: "approval:deny", reason: "the user denied the " + p.noun(), failReason: reasonDenied}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

var answerTitles = map[string]string{answerAllowOnce: "Allow once", answerAllowSession: "Allow for this session", answerDeny: "Deny"}

// elicitParams is the form the user answers.
func elicitParams(p *permission, res policy.Result, answers []string) map[string]any {
	titles := make([]string, len(answers))
	for i, a := range answers {
		titles[i] = answerTitles[a]
	}
	with := ""
	if p.method != methodRead {
		with = " with no arguments"
		if len(p.args) > 0 {
			with = " with arguments " + previewText(string(p.args), 512)
		}
	}
	return map[string]any{
		"message": fmt.Sprintf("Allow the agent to %s%s? %s", p.action, with, res.Reason),
		"requestedSchema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"decision": map[string]any{"type": "string", "title": "Decision", "enum": answers, "enumNames": titles},
			},
			"required": []string{"decision"},
		},
	}
}

func previewText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// elicit asks a legacy-era client on the request's response stream and
// waits for its answer (posted back in the session).
func (b *Bridge) elicit(p *permission, question map[string]any, timeout time.Duration) (json.RawMessage, error) {
	rq := p.rq
	id, _ := json.Marshal("approval-" + p.id)
	params, _ := json.Marshal(question)
	answer, done := rq.sess.Await(string(id))
	defer done()
	req := &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: id, Method: "elicitation/create", Params: params}
	if !rq.out.send(req) {
		return nil, errors.New("the question could not be sent to the client")
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case m := <-answer:
		if m.Error != nil {
			return nil, fmt.Errorf("the client refused the question: %s", m.Error.Message)
		}
		return m.Result, nil
	case <-t.C:
		return nil, fmt.Errorf("no answer within %s", timeout)
	case <-rq.ctx.Done():
		return nil, fmt.Errorf("the %s ended before an answer: %w", p.noun(), rq.ctx.Err())
	}
}

// approvalState is the sealed requestState of a 2026-07-28 request that
// asked: the retry may reach any replica, which verifies it was asked for
// this caller, this method and target, these exact arguments, and not too
// long ago.
type approvalState struct {
	ToolCallID string `json:"tc"`
	// Method is the request's method; states issued before it was added
	// were all for tools/call.
	Method     string   `json:"m,omitempty"`
	Target     string   `json:"tool"`
	Subject    string   `json:"sub"`
	ArgsDigest string   `json:"args"`
	Expires    int64    `json:"exp"` // Unix milliseconds
	Answers    []string `json:"ans"`
}

// argsDigest binds a question to the exact arguments, as a ToolApproval
// does ("" for arguments that are not JSON).
func argsDigest(args json.RawMessage) string {
	d, _ := approval.ArgsDigest(args)
	return d
}

func (b *Bridge) inputRequired(p *permission, question map[string]any, answers []string, timeout time.Duration) *jsonrpc.Message {
	state, err := b.cfg.Sealer.Seal(approvalPurpose, approvalState{
		ToolCallID: p.id, Method: p.method, Target: p.target, Subject: p.rq.id.Username, ArgsDigest: argsDigest(p.args),
		Expires: b.now().Add(timeout).UnixMilli(), Answers: answers,
	})
	if err != nil {
		return rpcError(p.rq, jsonrpc.CodeInternalError, err.Error(), nil)
	}
	return rpcResult(p.rq, map[string]any{
		"resultType":    "input_required",
		"inputRequests": map[string]any{approvalKey: map[string]any{"method": "elicitation/create", "params": question}},
		"requestState":  state,
	})
}

func (b *Bridge) openApprovalState(p *permission) (*approvalState, error) {
	var st approvalState
	if err := b.cfg.Sealer.Open(approvalPurpose, p.requestState, &st); err != nil {
		return nil, &invalidStateError{"invalid requestState: it was not issued by this bridge"}
	}
	if st.Method == "" {
		st.Method = methodCall
	}
	switch {
	case st.Subject != p.rq.id.Username, st.Method != p.method, st.Target != p.target:
		return nil, &invalidStateError{"invalid requestState: it was issued for another caller or request"}
	case st.ArgsDigest != argsDigest(p.args):
		return nil, &invalidStateError{"invalid requestState: the arguments changed since the question; send the request again without requestState"}
	case b.now().UnixMilli() > st.Expires:
		return nil, &invalidStateError{"invalid requestState: the question expired; send the request again without requestState"}
	}
	return &st, nil
}
