package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/artifact"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/translate"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
	"github.com/mcp-operator/mcp-operator/internal/policy"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
	"github.com/mcp-operator/mcp-operator/internal/redact"
)

// callParams are the tools/call params the bridge reads.
type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      struct {
		ProgressToken json.RawMessage `json:"progressToken"`
	} `json:"_meta"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
	RequestState   string                     `json:"requestState"`
}

// call is the tools adapter of the pipeline: one tools/call as it goes
// through the bridge.
type call struct {
	*exchange
	tool   *routes.Tool
	params callParams
	// answersServer: the call is the retry of a 2026-07-28 agent answering
	// the server's question (inputrequired.go); upstreamState is the
	// server's requestState to send back with the answers.
	answersServer bool
	upstreamState string
	// parkable: the call runs detached from the agent's request, and may be
	// parked while the server waits for the agent (parked.go).
	parkable *parkable
	// up is the call as it goes upstream (describe): how its answer is
	// handled whenever it comes.
	up *upstreamCall
}

func (c *call) resolve(b *Bridge, x *exchange) *jsonrpc.Message {
	c.exchange = x
	rq := x.rq
	if err := json.Unmarshal(rq.msg.Params, &c.params); err != nil || c.params.Name == "" {
		return rpcError(rq, jsonrpc.CodeInvalidParams, "tools/call needs params with a tool name", retryNever.with(nil))
	}
	p := &c.params
	// The request is valid JSON (rawjson.Check) and a raw member starts
	// at its value: its first byte says whether it is an object.
	if len(p.Arguments) > 0 && string(p.Arguments) != "null" && p.Arguments[0] != '{' {
		return rpcError(rq, jsonrpc.CodeInvalidParams, "tools/call arguments must be a JSON object", retryNever.with(nil))
	}
	tool, errResp := b.resolveTool(rq, p.Name)
	if errResp != nil {
		b.countToolCall(nil, v1alpha1.DecisionDeny, "unknown_tool")
		return errResp
	}
	c.tool, x.tool = tool, tool
	x.method, x.target, x.args, x.what = methodCall, tool.Name, p.Arguments, "call of "+tool.Name
	x.inputResponses, x.requestState = p.InputResponses, p.RequestState
	x.server, x.progressToken = tool.Server, p.Meta.ProgressToken
	return nil
}

func (c *call) decide(b *Bridge, x *exchange) (policy.Result, *jsonrpc.Message) {
	res := b.engine.Load().DecideTool(x.rq.id.Subject(), toolCall(c.tool, c.params.Arguments))
	x.action = fmt.Sprintf("call %s (risk %s)", c.tool.Name, res.RiskAtDecision)
	return res, nil
}

// describe describes the call: a new one, the retry answering a
// 2026-07-28 server's question, or the retry continuing a parked call.
// Its strategy is how it is sent: a 2026-07-28 agent's call runs detached
// and may park while its server waits for the agent (parked.go); any other
// waits, asking a session-era agent what its server asks
// (inputrequired.go).
func (c *call) describe(b *Bridge, x *exchange) (*upstreamCall, *jsonrpc.Message) {
	rq, tool := x.rq, c.tool
	server := tool.Server.Name
	c.up = &upstreamCall{
		method: methodCall, name: tool.Upstream, recordAnswer: true,
		output: func(raw json.RawMessage) (json.RawMessage, output.Summary, error) {
			return b.cfg.Pipeline.ToolResult(output.Call{
				Server: server, Name: tool.Upstream, Subject: rq.id.Username,
				Redactor: b.redactor(tool.Server), Block: x.blockInjection,
			}, raw)
		},
		closing: func(raw json.RawMessage, sum output.Summary, _ time.Duration, err error) (audit.Payload, string) {
			if err != nil {
				return nil, ""
			}
			isError := string(rawjson.Get(raw, "isError")) == "true"
			done := audit.ToolCompleted{
				ResultPreview: sum.Preview, ResultSize: sum.SizeIn, ToolCallID: x.id, Tool: tool.Name,
				IsError: isError, Redactions: sum.Redactions.Map(), Injection: sum.Findings, Blocked: sum.Blocked,
			}
			if sum.Capped {
				done.Artifact = artifact.URI(sum.Artifact)
			}
			if isError {
				return done, "tool_error"
			}
			return done, ""
		},
	}
	up := c.up
	if pc := x.parked; pc != nil {
		up.continued = func() *jsonrpc.Message { return b.continueParked(c, pc) }
		return up, nil
	}
	if x.resumed != nil && x.resumed.Kind == resumeUpstream {
		c.answersServer, c.upstreamState = true, x.resumed.Upstream
	}
	up.started = audit.MCPCallStarted{Server: server, ToolCallID: x.id, Method: methodCall, Args: c.params.Arguments, ArgsDigest: b.eventArgsDigest(x), Credential: string(x.credKind)}
	up.begun = audit.ToolStarted{Tool: tool.Name, ToolCallID: x.id, Server: server}
	if _, served, ok := b.cfg.Registry.Server(server); ok {
		up.conn = x.callConn(served)
	}
	params := translate.CallParams(tool.Upstream, c.params.Arguments, rq.msg.Params)
	if c.answersServer {
		params = translate.WithInputResponses(params, c.params.InputResponses, c.upstreamState)
	}
	hooks := upstream.CallHooks{Request: b.relayRequests(c), Agent: rq.upstreamAgent()}
	if tok := c.params.Meta.ProgressToken; tok != nil && rq.out.canStream {
		hooks.Progress = func(p json.RawMessage) {
			// A progress message is the server's output too.
			if clean, _, err := output.JSON(b.redactor(tool.Server), "notifications/progress", p); err == nil {
				rq.out.send(jsonrpc.NewNotification("notifications/progress", rawjson.Set(c.offsetProgress(clean), "progressToken", tok)))
			}
		}
	}
	if agentLevel := rq.logLevel(); rq.out.canStream && agentLevel != "" {
		// A stateless server reads the level from the request; a session
		// server was set to debug when the connection was made.
		params = translate.SetMeta(params, metaLogLevel, rawjson.AppendString(nil, "debug"))
		redactor := b.redactor(tool.Server)
		hooks.Log = func(p json.RawMessage) {
			level, _ := rawjson.String(rawjson.Get(p, "level"))
			if !wantsLog(agentLevel, level) {
				return
			}
			if clean, _, err := output.JSON(redactor, "notifications/message", p); err == nil {
				rq.out.send(jsonrpc.NewNotification("notifications/message", clean))
			}
		}
	}
	up.params = params
	if rq.stateless {
		// The server may ask the agent something mid-call: the call then
		// waits, parked, for the agent's retry (parked.go).
		up.park = func(ctx context.Context, sent func(error), stop context.CancelFunc) *jsonrpc.Message {
			return b.await(c, b.startParkable(ctx, c, sent, stop, up.conn, params, hooks))
		}
		return up, nil
	}
	up.send = func(ctx context.Context) (json.RawMessage, *jsonrpc.Message, error) {
		params := params
		res, err := up.conn.CallTool(ctx, params, hooks)
		for round := 0; err == nil && isInputRequired(res); round++ {
			if round == maxInputRounds {
				return nil, nil, fmt.Errorf("the server asked for input %d times within one call", maxInputRounds)
			}
			next, answer := b.answerInputRequests(ctx, c, params, res)
			if answer != nil {
				return nil, answer, nil
			}
			params = next
			res, err = up.conn.CallTool(ctx, params, hooks)
		}
		return res, nil, err
	}
	return up, nil
}

// upstreamAgent is the agent session the request's calls to a server are
// made for: a session-era agent session takes an upstream session of its
// own where the server keeps sessions (upstream/agents.go), closed when the
// agent session ends. nil in the stateless era.
func (rq *request) upstreamAgent() *upstream.Agent {
	if rq.sess == nil {
		return nil
	}
	return &upstream.Agent{ID: rq.sess.ID, Caller: rq.id.Username, AtEnd: rq.sess.AtEnd}
}

// upstreamError answers the agent for a request that failed upstream: the
// server's own JSON-RPC error passes through, anything else is
// CodeUpstream with the reason and whether it is safe to send again
// (retryable). mayHaveRun says the request went to the server as a call
// that may have run there (and runs again if sent again); a list, a
// catalog lookup or a request that never left the bridge is safe to send
// again.
//
// red is the server's own redactor (its Secret values and the shapes), nil
// where the server is not known. Either way the text is the server's (its
// error, or its answer quoted in ours when it was not JSON-RPC), so it goes
// through what the server's output goes through: invisible characters
// removed, redacted, marker look-alikes escaped.
func upstreamError(rq *request, err error, toolCallID string, red *redact.Redactor, mayHaveRun bool) *jsonrpc.Message {
	if red == nil {
		red = redact.Shapes() // the server is not known
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		msg, data, _ := serverError(red, rpcErr)
		resp := jsonrpc.NewErrorResponse(rq.msg.ID, rpcErr.Code, msg)
		resp.Error.Data = data
		return resp
	}
	reason := upstream.ReasonUnavailable
	var ue *upstream.Error
	if errors.As(err, &ue) {
		reason = ue.Reason
	}
	// A request that runs nothing on its server (not a call), and a call
	// the bridge held back or its server refused unrun (neverRan), may be
	// sent again; any other call may have reached its server, a call whose
	// connection failed included: the bridge cannot tell a connection that
	// could not be opened from one that failed after the call was written.
	hint := retryAnytime
	if mayHaveRun && !neverRan(err) {
		hint = retryNever
	}
	data := map[string]any{"reason": reason}
	if toolCallID != "" {
		data["toolCallId"] = toolCallID
	}
	why, _ := output.Text(red, "error.message", err.Error())
	switch {
	case reason == ReasonStopping && !hint.retryable:
		// errStopping's advice (send it again) holds for a request that
		// had not gone upstream; this one had.
		why = "this bridge replica stopped while the call was with its server: it may have run there; send it again only if running it twice does no harm"
	case !hint.retryable:
		why += "; the call may have run there: send it again only if running it twice does no harm"
	case mayHaveRun:
		why += "; the call was not sent to the server: sending it again is safe"
	}
	return rpcError(rq, CodeUpstream, "the MCP server gave no answer: "+why, hint.with(data))
}

// serverError is a server's JSON-RPC error as the agent may get it: its
// message and data cleaned as output (data that is not valid JSON is
// dropped), with how many injection findings the two hold.
func serverError(red *redact.Redactor, rpcErr *jsonrpc.Error) (string, json.RawMessage, int) {
	msg, sum := output.Text(red, "error.message", rpcErr.Message)
	findings := len(sum.Findings)
	if len(rpcErr.Data) == 0 {
		return msg, nil, findings
	}
	data, dataSum, err := output.JSON(red, "error.data", rpcErr.Data)
	if err != nil {
		return msg, nil, findings
	}
	return msg, data, findings + len(dataSum.Findings)
}
