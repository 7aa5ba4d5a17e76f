package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/k8s/apiretry"
	"github.com/mcp-operator/mcp-operator/internal/mcp/canonjson"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/signed"
	"github.com/mcp-operator/mcp-operator/internal/redact"
)

// A 2026-07-28 agent answers a question by sending its request again with
// inputResponses and the requestState the question came with. The bridge
// asks three kinds of question, and each retry resumes the pipeline
// (pipeline.go) at its own stage:
//
//   - resumeApproval: the bridge's own approval question (ask.go); the
//     retry resumes at the ask stage, with the user's answer;
//   - resumeUpstream: a 2026-07-28 server's input_required (inputrequired.go);
//     the retry was allowed before, so it resumes at the forward stage, with
//     the answers and the server's own state;
//   - resumeParked: a session-era server's request in the middle of a call
//     parked on this replica (parked.go); the retry hands the answer over.
//
// All three are one sealed format (statePurpose), opened in one place
// (openState), which checks the binding, the deadline and single use.

// statePurpose separates requestStates from the bridge's other sealed
// values (session ids).
const statePurpose = "mcp-request-state"

// What a requestState resumes.
const (
	resumeApproval = "approval"
	resumeUpstream = "upstream-input"
	resumeParked   = "parked"
)

// requestState is the sealed requestState of a question to a 2026-07-28
// agent: the retry may reach any replica, which verifies it was asked for
// this caller, in this era and session, this method and target, these
// exact arguments, and not too long ago.
type requestState struct {
	// Kind is what the retry resumes: resumeApproval, resumeUpstream or
	// resumeParked.
	Kind string `json:"k"`
	// ToolCallID is the asking request's id: the retry continues its
	// event chain.
	ToolCallID string `json:"tc"`
	Method     string `json:"m"`
	// Target is the canonical name the question was about.
	Target  string `json:"t"`
	Subject string `json:"sub"`
	// Era is the protocol era of the request asked about (stateEra), and
	// Session its session's id ("" in the stateless era): a state is
	// answered in the same era and session, never carried across (a
	// stateless question's allow_once replayed inside a session, or a
	// parked call continued by a session's request).
	Era        string `json:"era"`
	Session    string `json:"sess,omitempty"`
	ArgsDigest string `json:"args"`
	Expires    int64  `json:"exp"` // Unix milliseconds
	// Answers are the answers an approval question offered.
	Answers []string `json:"ans,omitempty"`
	// Upstream is a 2026-07-28 server's own requestState, passed back to
	// it as it was.
	Upstream string `json:"up,omitempty"`
	// Parked names the parked call on the replica that holds it.
	Parked string `json:"pk,omitempty"`
}

// Reasons of a retry refused for its requestState (-32602).
const (
	// reasonInvalidState: the state does not fit the request, expired or
	// was used already.
	reasonInvalidState = "invalid_request_state"
	// reasonStateUnrecorded: the state's single use could not be recorded
	// (the API server did not answer).
	reasonStateUnrecorded = "request_state_unrecorded"
	// reasonParkedGone: the parked call the state continues is not held
	// by this replica.
	reasonParkedGone = "parked_call_gone"
)

// invalidStateError refuses a retry whose requestState does not fit it:
// the request did not run; retry says whether making it again is safe and
// may be answered otherwise (the message says whether with the same
// requestState or without one).
type invalidStateError struct {
	msg    string
	reason string
	retry  retryHint
}

func (e *invalidStateError) Error() string { return e.msg }

// unfit is a state that is not this request's, or not this bridge's:
// sent again, it is refused again.
func unfit(msg string) *invalidStateError {
	return &invalidStateError{msg: msg, reason: reasonInvalidState, retry: retryNever}
}

// outdated is a state whose question is no longer answerable: the request
// did not run, and made again without requestState it is asked afresh.
func outdated(msg string) *invalidStateError {
	return &invalidStateError{msg: msg, reason: reasonInvalidState, retry: retryAnytime}
}

// answer is the refusal as the agent gets it.
func (e *invalidStateError) answer(rq *request) *jsonrpc.Message {
	return rpcError(rq, jsonrpc.CodeInvalidParams, e.msg, e.retry.with(map[string]any{"reason": e.reason}))
}

// argsDigest binds a question to the exact arguments, as a ToolApproval
// does and audit events name them ("" for arguments that are not JSON).
func argsDigest(args json.RawMessage) string {
	d, _ := canonjson.ArgumentsDigest(args)
	return d
}

// argsDigest is the digest of x's arguments, computed once for the request:
// its events, its sealed state and its ToolApproval all name it.
func (x *exchange) argsDigest() string {
	if x.digest == nil {
		d := argsDigest(x.args)
		x.digest = &d
	}
	return *x.digest
}

// eventArgsDigest is x's digest for its audit events: computed (once,
// shared with its sealed state and ToolApproval) only when the Writer shows
// it, "" otherwise, which an event leaves out.
func (b *Bridge) eventArgsDigest(x *exchange) string {
	if !b.cfg.Audit.WritesArgsDigest(x.args) {
		return ""
	}
	return x.argsDigest()
}

// newState is the state of a question about x's request, answerable until
// deadline.
func newState(kind string, x *exchange, deadline time.Time) requestState {
	return requestState{
		Kind: kind, ToolCallID: x.id, Method: x.method, Target: x.target, Subject: x.rq.id.Username,
		Era: stateEra(x.rq), Session: x.rq.sessionID(), ArgsDigest: x.argsDigest(), Expires: deadline.UnixMilli(),
	}
}

// Eras a requestState is sealed in.
const (
	eraStateless = "stateless"
	eraSession   = "session"
)

func stateEra(rq *request) string {
	if rq.stateless {
		return eraStateless
	}
	return eraSession
}

func (b *Bridge) sealState(st requestState) (string, error) {
	return b.cfg.Sealer.Seal(statePurpose, st)
}

// openState is the one place a requestState is opened: it must have been
// sealed by this bridge (any replica), for x's caller, method, target and
// exact arguments, before its deadline, and not used before, on any
// replica when Config.Once is set (otherwise on this one).
func (b *Bridge) openState(x *exchange, raw string) (*requestState, *invalidStateError) {
	var st requestState
	if err := b.cfg.Sealer.Open(statePurpose, raw, &st); err != nil {
		return nil, unfit("invalid requestState: it was not issued by this bridge")
	}
	switch {
	case st.Subject != x.rq.id.Username, st.Method != x.method, st.Target != x.target:
		return nil, unfit("invalid requestState: it was issued for another caller or request")
	case st.Era != stateEra(x.rq):
		return nil, unfit(fmt.Sprintf("invalid requestState: it was issued to a request %s and is used in a request %s; answer a question in the era it was asked in", eraPhrase(st.Era), eraPhrase(stateEra(x.rq))))
	case st.Session != x.rq.sessionID():
		return nil, unfit("invalid requestState: it was issued in another session")
	case st.ArgsDigest != x.argsDigest():
		return nil, outdated("invalid requestState: the arguments changed since the question; the request was not run: send it again without requestState, to be asked afresh")
	case b.now().UnixMilli() > st.Expires && st.Kind == resumeParked:
		// A parked state expires with its call, which reached its server
		// and may have gone on there without the answer.
		return nil, &invalidStateError{reason: reasonParkedGone, retry: retryNever,
			msg: "invalid requestState: the question expired, and with it the call it continues, which reached its server; " + mayHaveRunAdvice}
	case b.now().UnixMilli() > st.Expires:
		return nil, outdated("invalid requestState: the question expired; the request was not run: send it again without requestState, to be asked afresh")
	}
	// One answer serves one retry: an allow_once replayed would run the
	// request again under the same call id, and each retry of a server's
	// question is another call upstream.
	switch fresh, err := b.useOnce(x.rq.ctx, raw, st.Expires); {
	case err != nil:
		return nil, unrecordedUse(err)
	case !fresh:
		// Its first use may have run the request, or only recorded the
		// use (the API server wrote the record and its answer was lost,
		// or the first retry was refused after): making it again is the
		// agent's call, and is asked about again.
		return nil, unfit("invalid requestState: it was used already (its first use may have run the request, or its use was recorded without the bridge hearing it); a request sent without requestState is asked about afresh")
	}
	return &st, nil
}

// unrecordedUse refuses a state whose single use could not be recorded:
// the request did not run. Whether the state itself can serve again
// depends on what the API server did before it failed to answer: if it
// never wrote the record, the same request sent again runs once; if it
// wrote it, the same request is refused as used already. Sent without
// requestState, the request is asked about afresh either way.
func unrecordedUse(err error) *invalidStateError {
	e := &invalidStateError{reason: reasonStateUnrecorded, retry: retryNever}
	// The API server's error leaves the bridge: redacted as every other
	// text that does (it names URLs of the cluster, and could quote more).
	why, _ := output.Text(redact.Shapes(), "error.message", err.Error())
	e.msg = "requestState could not be used: its single use could not be recorded (" + why + "); the request was not run"
	if after, passes := apiretry.After(err); passes {
		e.retry = retryIn(after)
		e.msg += fmt.Sprintf("; send it again in %s: with the same requestState it runs once if its use was not recorded, and is refused as used already if it was; without requestState it is asked about afresh", after)
	}
	return e
}

// eraPhrase names an era in a refusal.
func eraPhrase(era string) string {
	if era == eraSession {
		return "in a session (2025-11-25 and older)"
	}
	return "without a session (2026-07-28)"
}

// useOnce records a sealed state as used until it expires; false when it
// was used already, in any spelling (both key on what was sealed): on
// this replica (its memory answers a replay here without a round trip),
// then on every replica (Config.Once, when set). An error is not a use:
// the state is refused, and may be sent again.
func (b *Bridge) useOnce(ctx context.Context, state string, expires int64) (bool, error) {
	until := time.UnixMilli(expires)
	if !b.spent.Use(state, until, b.now()) {
		return false, nil
	}
	if b.cfg.Once == nil {
		return true, nil
	}
	tag, _ := signed.Tag(state) // Use accepted it: it is a sealed value
	fresh, err := b.cfg.Once.Claim(ctx, onceKindState, tag, until)
	if err != nil {
		// Not used after all: a retry here may claim it again.
		b.spent.Forget(state)
	}
	return fresh, err
}

// onceKindState names the one-time records of sealed states.
const onceKindState = "state"

// OnceLedger records one-time uses for every replica (once.Ledger): Claim
// is false when key of kind was claimed before, on any replica.
type OnceLedger interface {
	Claim(ctx context.Context, kind string, key []byte, until time.Time) (bool, error)
}
