package mcpbridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/canonjson"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
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

// outcome is how a call's permission resolved.
type outcome struct {
	decision    string // allow or deny
	actor       string // policy, user or bridge
	sourcedFrom string
	reason      string
	failReason  string // tool.failed reason when denied
	// pending is the input_required answer of a 2026-07-28 call waiting for
	// the user: nothing is resolved yet.
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

func (b *Bridge) resolve(c *call, res policy.Result, st *approvalState) outcome {
	switch res.Decision {
	case v1alpha1.DecisionAllow:
		return outcome{decision: "allow", actor: "policy", sourcedFrom: sourceOf(res.SourcedFrom)}
	case v1alpha1.DecisionAsk:
		return b.ask(c, res, st)
	}
	fail := reasonDenied
	if len(res.Rules) == 1 && res.Rules[0].Section == "rateLimit" {
		fail = reasonRateLimited
	}
	return outcome{decision: "deny", actor: "policy", sourcedFrom: sourceOf(res.SourcedFrom), reason: res.Reason, failReason: fail}
}

// offered are the answers the question offers: allow for the session only
// where there is a session and the policy allows it (never for destructive
// tools).
func offered(c *call, res policy.Result) []string {
	var out []string
	if res.Approval.Allows(v1alpha1.ApprovalAllowOnce) {
		out = append(out, answerAllowOnce)
	}
	if res.Approval.Allows(v1alpha1.ApprovalAllowSession) && c.rq.sess != nil {
		out = append(out, answerAllowSession)
	}
	return append(out, answerDeny)
}

func (b *Bridge) ask(c *call, res policy.Result, st *approvalState) outcome {
	rq := c.rq
	unavailable := outcome{
		decision: "deny", actor: "bridge", sourcedFrom: sourceOf(res.SourcedFrom), failReason: reasonApprovalUnavailable,
		reason: reasonApprovalUnavailable + ": the policy asks for approval and the client cannot be asked (it offers no form elicitation)",
	}
	if !rq.elicitation {
		return unavailable
	}
	answers := offered(c, res)
	timeout := res.Approval.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	question := elicitParams(c, res, answers)
	var answer json.RawMessage
	if rq.stateless {
		if st == nil {
			return outcome{pending: b.inputRequired(c, question, answers, timeout)}
		}
		answer = c.params.InputResponses[approvalKey]
		answers = st.Answers
	} else {
		if !rq.out.canStream {
			return unavailable
		}
		var err error
		if answer, err = b.elicit(c, question, timeout); err != nil {
			return outcome{
				decision: "deny", actor: "bridge", sourcedFrom: "approval:timeout", failReason: reasonApprovalTimeout,
				reason: reasonApprovalTimeout + ": " + err.Error(),
			}
		}
	}
	return b.answered(c, answer, answers)
}

// answered turns the user's answer into the outcome.
func (b *Bridge) answered(c *call, answer json.RawMessage, answers []string) outcome {
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
		c.rq.sess.Grants.AllowSession(c.tool.Name)
		return outcome{decision: "allow", actor: "user", sourcedFrom: "approval:session"}
	}
	return outcome{decision: "deny", actor: "user", sourcedFrom: "approval:deny", reason: "the user denied the call", failReason: reasonDenied}
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
func elicitParams(c *call, res policy.Result, answers []string) map[string]any {
	titles := make([]string, len(answers))
	for i, a := range answers {
		titles[i] = answerTitles[a]
	}
	args := "no arguments"
	if len(c.params.Arguments) > 0 {
		args = "arguments " + previewText(string(c.params.Arguments), 512)
	}
	return map[string]any{
		"message": fmt.Sprintf("Allow the agent to call %s (risk %s) with %s? %s", c.tool.Name, res.RiskAtDecision, args, res.Reason),
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

// elicit asks a legacy-era client on the call's response stream and waits
// for its answer (posted back in the session).
func (b *Bridge) elicit(c *call, question map[string]any, timeout time.Duration) (json.RawMessage, error) {
	rq := c.rq
	id, _ := json.Marshal("approval-" + c.id)
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
		return nil, fmt.Errorf("the call ended before an answer: %w", rq.ctx.Err())
	}
}

// approvalState is the sealed requestState of a 2026-07-28 call that asked:
// the retry may reach any replica, which verifies it was asked for this
// caller, this tool and these exact arguments, and not too long ago.
type approvalState struct {
	ToolCallID string   `json:"tc"`
	Tool       string   `json:"tool"`
	Subject    string   `json:"sub"`
	ArgsDigest string   `json:"args"`
	Expires    int64    `json:"exp"` // Unix milliseconds
	Answers    []string `json:"ans"`
}

func argsDigest(args json.RawMessage) string {
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	d, err := canonjson.Digest(args)
	if err != nil {
		return ""
	}
	return d
}

func (b *Bridge) inputRequired(c *call, question map[string]any, answers []string, timeout time.Duration) *jsonrpc.Message {
	state, err := b.cfg.Sealer.Seal(approvalPurpose, approvalState{
		ToolCallID: c.id, Tool: c.tool.Name, Subject: c.rq.id.Username, ArgsDigest: argsDigest(c.params.Arguments),
		Expires: b.now().Add(timeout).UnixMilli(), Answers: answers,
	})
	if err != nil {
		return rpcError(c.rq, jsonrpc.CodeInternalError, err.Error(), nil)
	}
	return rpcResult(c.rq, map[string]any{
		"resultType":    "input_required",
		"inputRequests": map[string]any{approvalKey: map[string]any{"method": "elicitation/create", "params": question}},
		"requestState":  state,
	})
}

func (b *Bridge) openApprovalState(c *call) (*approvalState, error) {
	var st approvalState
	if err := b.cfg.Sealer.Open(approvalPurpose, c.params.RequestState, &st); err != nil {
		return nil, errors.New("invalid requestState: it was not issued by this bridge")
	}
	switch {
	case st.Subject != c.rq.id.Username, st.Tool != c.tool.Name:
		return nil, errors.New("invalid requestState: it was issued for another caller or tool")
	case st.ArgsDigest != argsDigest(c.params.Arguments):
		return nil, errors.New("invalid requestState: the arguments changed since the question; call again without requestState")
	case b.now().UnixMilli() > st.Expires:
		return nil, errors.New("invalid requestState: the question expired; call again without requestState")
	}
	return &st, nil
}
