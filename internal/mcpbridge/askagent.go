package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
)

// The bridge asks an agent something in one of two ways, chosen by the
// agent's era, whoever's question it is (the bridge's own approval
// question, or a server's request relayed to the agent):
//
//   - a 2026-07-28 agent gets an input_required answer (inputRequired):
//     the requests keyed by name, and a sealed requestState (state.go) that
//     its retry brings back with inputResponses under the same keys;
//   - a session-era agent gets the request on its response stream
//     (askInSession), and posts its answer back in its session.

// inputRequest is one entry of an input_required answer's inputRequests,
// a server's or the bridge's.
type inputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// inputRequiredResult is an input_required answer, its members in key
// order, as encoding/json writes a map (inputRequests, requestState,
// resultType); TestInputRequiredAnswer pins it.
type inputRequiredResult struct {
	InputRequests map[string]inputRequest `json:"inputRequests"`
	RequestState  string                  `json:"requestState"`
	ResultType    string                  `json:"resultType"`
}

// inputRequired is the input_required answer that asks rq's agent requests,
// with st sealed as the requestState its retry brings back. When st cannot
// be sealed, the answer is the bridge's internal error, and err says why
// (a caller that owes someone else an answer tells them too).
func (b *Bridge) inputRequired(rq *request, st requestState, requests map[string]inputRequest) (*jsonrpc.Message, error) {
	state, err := b.sealState(st)
	if err != nil {
		return rpcError(rq, jsonrpc.CodeInternalError, err.Error(), nil), err
	}
	return rpcResult(rq, inputRequiredResult{InputRequests: requests, RequestState: state, ResultType: "input_required"}), nil
}

// errNotSent: the request could not be put on the agent's response stream
// (it is not streaming, or it broke or finished).
var errNotSent = errors.New("the request could not be sent to the agent")

// askInSession puts a request to a session-era agent on rq's response
// stream, under id, and waits for the answer the agent posts back in its
// session: its result or its error. err is errNotSent, or ctx's cause when
// ctx ends first.
func askInSession(ctx context.Context, rq *request, id json.RawMessage, method string, params json.RawMessage) (*jsonrpc.Message, error) {
	answer, done := rq.sess.Await(string(id))
	defer done()
	if !rq.out.send(&jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: id, Method: method, Params: params}) {
		return nil, errNotSent
	}
	select {
	case m := <-answer:
		return m, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}
