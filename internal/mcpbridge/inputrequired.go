package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/translate"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// A 2026-07-28 server asks the client something during a call by answering
// with an input_required result: inputRequests (elicitation/create,
// sampling/createMessage, keyed by names of its own) and an opaque
// requestState; the client calls again with inputResponses under the same
// keys and that state. The bridge treats each input request like a
// session-era server's request (passOn: allowed by spec.serverRequests,
// declared by the agent, cleaned), then audited, and then:
//
//   - a 2026-07-28 agent gets the input_required result, with the server's
//     requestState sealed inside the bridge's own (state.go: bound to the
//     caller, the tool, the arguments and a deadline), so its retry can
//     reach any replica; the retry resumes the pipeline (pipeline.go);
//   - a session-era agent is asked on the call's response stream, and the
//     bridge calls the server again itself with the answers.

// maxInputRounds bounds how often a server may ask within one call.
const maxInputRounds = 8

// upstreamInputTTL is how long an agent has to answer a server's question.
const upstreamInputTTL = 10 * time.Minute

func isInputRequired(res json.RawMessage) bool {
	kind, _ := rawjson.String(rawjson.Get(res, "resultType"))
	return kind == "input_required"
}

// answerInputRequests handles a server's input_required result res for
// call c. For a session-era agent it asks the agent and returns the params
// of the next call to the server; otherwise (a 2026-07-28 agent, or a
// request that can't be passed on) it returns the answer for the agent.
func (b *Bridge) answerInputRequests(ctx context.Context, c *call, params, res json.RawMessage) (json.RawMessage, *jsonrpc.Message) {
	rq, server := c.rq, c.tool.Server.Name
	var asked struct {
		InputRequests map[string]inputRequest `json:"inputRequests"`
		RequestState  string                  `json:"requestState"`
	}
	if err := json.Unmarshal(res, &asked); err != nil || len(asked.InputRequests) == 0 {
		return nil, b.inputFailed(c, "the server's input_required result has no inputRequests")
	}
	keys := make([]string, 0, len(asked.InputRequests))
	for k := range asked.InputRequests {
		keys = append(keys, k)
	}
	slices.Sort(keys)

	if rq.stateless {
		cleaned := make(map[string]inputRequest, len(keys))
		for _, k := range keys {
			ir := asked.InputRequests[k]
			ev := audit.ServerRequest{Server: server, ToolCallID: c.id, Method: ir.Method, Outcome: relayForwarded}
			// The agent is reached by the input_required answer itself.
			clean, refused := b.passOn(c, &jsonrpc.Message{Method: ir.Method, Params: ir.Params}, true, &ev)
			_, _ = b.audit(rq, ev)
			if refused != nil {
				return nil, b.inputRefused(c, refused.Code, refused.Message)
			}
			cleaned[k] = inputRequest{Method: ir.Method, Params: clean}
		}
		st := newState(resumeUpstream, c.exchange, b.now().Add(upstreamInputTTL))
		st.Upstream = asked.RequestState
		answer, _ := b.inputRequired(rq, st, cleaned)
		return nil, answer
	}

	responses := map[string]json.RawMessage{}
	for i, k := range keys {
		ir := asked.InputRequests[k]
		ev := audit.ServerRequest{Server: server, ToolCallID: c.id, Method: ir.Method}
		reply := b.relay(ctx, c, &jsonrpc.Message{ID: json.RawMessage(`0`), Method: ir.Method, Params: ir.Params}, int64(i+1), &ev)
		_, _ = b.audit(rq, ev)
		if reply.Error != nil {
			if ev.Outcome == relayRefused {
				return nil, b.inputRefused(c, reply.Error.Code, ev.Reason)
			}
			return nil, b.inputFailed(c, "the agent did not answer the server's question: "+reply.Error.Message)
		}
		responses[k] = reply.Result
	}
	return translate.WithInputResponses(params, responses, asked.RequestState), nil
}

// inputRefused ends a call whose server asked what the agent can't be
// asked: the server's setting or the agent's client stands in the way.
func (b *Bridge) inputRefused(c *call, code int, why string) *jsonrpc.Message {
	_, _ = b.audit(c.rq, c.failed(reasonServerRequestRefused, why))
	b.countToolCall(c.tool, v1alpha1.DecisionAllow, reasonServerRequestRefused)
	// The server's question stops the call the same way each time: it
	// went no further than the question, and is answered so again.
	return rpcError(c.rq, code, "the server asked for input the bridge did not pass to the agent: "+why, retryNever.with(map[string]any{
		"reason": reasonServerRequestRefused, "toolCallId": c.id,
	}))
}

// inputFailed ends a call whose server's question could not be handled.
func (b *Bridge) inputFailed(c *call, why string) *jsonrpc.Message {
	return b.callFailed(c.exchange, c.tool.Server, 0, errors.New(why))
}
