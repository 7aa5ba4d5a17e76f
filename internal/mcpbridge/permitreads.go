package mcpbridge

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/rawjson"
	"github.com/mcp-operator/mcp-operator/internal/policy"
)

// permitRead decides a resources/read of the server's uri (shown is the URI
// as the agent sent it, which the question names) and records the
// decision, asking the user where the policy says ask. It returns the id
// the read's events carry, or the answer that ends the request: a refusal,
// or the input_required of a 2026-07-28 client.
func (b *Bridge) permitRead(rq *request, server, uri, shown string, res policy.Result) (string, *jsonrpc.Message) {
	return b.permitOther(rq, &permission{
		rq: rq, method: methodRead, target: BridgeURI(server, uri), action: "read the resource " + shown,
	}, res, "read of "+shown)
}

// permitPrompt is permitRead for a prompts/get of the prompt named full
// (mcp.<server>.<prompt>) with args.
func (b *Bridge) permitPrompt(rq *request, full string, args json.RawMessage, res policy.Result) (string, *jsonrpc.Message) {
	if string(args) == "null" {
		args = nil
	}
	return b.permitOther(rq, &permission{
		rq: rq, method: methodPrompt, target: full, args: args, action: "get the prompt " + full,
	}, res, "prompt "+full)
}

func (b *Bridge) permitOther(rq *request, p *permission, res policy.Result, what string) (string, *jsonrpc.Message) {
	var retry retryParams
	_ = json.Unmarshal(rq.msg.Params, &retry)
	p.inputResponses, p.requestState = retry.InputResponses, retry.RequestState
	o, err := b.permit(p, res)
	var bad *invalidStateError
	switch {
	case errors.As(err, &bad):
		return "", rpcError(rq, jsonrpc.CodeInvalidParams, bad.Error(), nil)
	case err != nil:
		b.cfg.Log.Error(err, "audit event not recorded: the request is refused", "method", p.method, "target", p.target)
		return "", rpcError(rq, jsonrpc.CodeInternalError, "the "+p.noun()+" was not run: its audit record could not be written", map[string]any{"reason": reasonAudit})
	case o.pending != nil:
		return "", o.pending
	case o.decision != "allow":
		return "", rpcError(rq, CodeDenied, fmt.Sprintf("%s denied: %s", what, o.reason), map[string]any{
			"reason": o.failReason, "sourcedFrom": o.sourcedFrom, "toolCallId": p.id,
		})
	}
	return p.id, nil
}

// upstreamParams are the params of a read or a prompt as they go upstream:
// without the agent's connection _meta, and without the answer to the
// bridge's own question (a 2026-07-28 retry), which is not the server's.
func upstreamParams(params json.RawMessage) json.RawMessage {
	params = stripBridgeMeta(params)
	for _, k := range []string{"inputResponses", "requestState"} {
		if rawjson.Get(params, k) != nil {
			params = removeMember(params, k)
		}
	}
	return params
}
