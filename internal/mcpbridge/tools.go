package mcpbridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

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
		b.count(nil, "deny", "unknown_tool")
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

// forward runs the call: a new one, the retry answering a 2026-07-28
// server's question, or the retry continuing a parked call.
func (c *call) forward(b *Bridge, x *exchange) *jsonrpc.Message {
	switch {
	case x.parked != nil:
		return b.continueParked(c, x.parked)
	case x.resumed != nil && x.resumed.Kind == resumeUpstream:
		c.answersServer, c.upstreamState = true, x.resumed.Upstream
	}
	return b.execute(c)
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

// execute forwards an allowed call and runs its result through the output
// pipeline, writing the event chain.
func (b *Bridge) execute(c *call) *jsonrpc.Message {
	rq, tool := c.rq, c.tool
	server := tool.Server.Name
	if _, err := b.audit(rq, audit.MCPCallStarted{Server: server, ToolCallID: c.id, Method: "tools/call", Args: c.params.Arguments, ArgsDigest: b.eventArgsDigest(c.exchange), Credential: string(c.credKind)}); err != nil {
		return b.unrecorded(c.exchange, err)
	}
	_, _ = b.audit(rq, audit.ToolStarted{Tool: tool.Name, ToolCallID: c.id, Server: server})

	_, served, ok := b.cfg.Registry.Server(server)
	if !ok {
		return b.callFailed(c.exchange, c.tool.Server, 0, &notSentError{&upstream.Error{Reason: upstream.ReasonUnavailable, Err: errors.New("the server left the bridge's scope")}})
	}
	conn := c.callConn(served)
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
	if rq.stateless {
		// The server may ask the agent something mid-call: the call then
		// waits, parked, for the agent's retry (parked.go).
		return b.await(c, b.startParkable(c, conn, params, hooks))
	}
	ctx, cancel := b.contextWithCallTimeout(rq.ctx)
	defer cancel()
	start := b.now()
	ctx, span := b.forwardSpan(ctx, c.exchange, methodCall, tool.Upstream)
	res, err := conn.CallTool(ctx, params, hooks)
	for round := 0; err == nil && isInputRequired(res); round++ {
		if round == maxInputRounds {
			err = fmt.Errorf("the server asked for input %d times within one call", maxInputRounds)
			break
		}
		next, answer := b.answerInputRequests(ctx, c, params, res)
		if answer != nil {
			endForward(span, nil)
			return answer
		}
		params = next
		res, err = conn.CallTool(ctx, params, hooks)
	}
	endForward(span, err)
	return b.finish(c, res, err, start)
}

// finish runs a call's answer through the output pipeline and writes the
// end of its event chain.
func (b *Bridge) finish(c *call, res json.RawMessage, err error, start time.Time) *jsonrpc.Message {
	rq, tool := c.rq, c.tool
	server := tool.Server.Name
	took := b.now().Sub(start)
	b.observe(server, "tools/call", took, err)
	if err != nil {
		return b.callFailed(c.exchange, c.tool.Server, took, err)
	}
	_, _ = b.audit(rq, audit.MCPCallCompleted{Server: server, ToolCallID: c.id, DurationMs: audit.Ms(took)})
	_, span := b.stage(c.exchange, spanOutput, trace.SpanKindInternal)
	out, sum, err := b.cfg.Pipeline.ToolResult(output.Call{
		Server: server, Name: tool.Upstream, Subject: rq.id.Username,
		Redactor: b.redactor(tool.Server), Block: c.blockInjection,
	}, res)
	b.outputDone(span, server, sum)
	if err != nil {
		c.traceFailure(upstream.ReasonInvalid)
		_, _ = b.audit(rq, c.failed(upstream.ReasonInvalid, err.Error()))
		b.count(tool, "allow", upstream.ReasonInvalid)
		return rpcError(rq, CodeUpstream, "the server's result could not be passed on (the call ran there): "+err.Error(), retryNever.with(map[string]any{"reason": upstream.ReasonInvalid, "toolCallId": c.id}))
	}
	isError := string(rawjson.Get(res, "isError")) == "true"
	done := audit.ToolCompleted{
		ResultPreview: sum.Preview, ResultSize: sum.SizeIn, ToolCallID: c.id, Tool: tool.Name,
		IsError: isError, Redactions: sum.Redactions.Map(), Injection: sum.Findings, Blocked: sum.Blocked,
	}
	if sum.Capped {
		done.Artifact = artifact.URI(sum.Artifact)
	}
	_, _ = b.audit(rq, done)
	outcome := "ok"
	if isError {
		outcome = "tool_error"
		c.traceFailure(outcome)
	}
	b.count(tool, "allow", outcome)
	return rpcResult(rq, json.RawMessage(out))
}

func (b *Bridge) observe(server, method string, took time.Duration, err error) {
	m := b.cfg.Metrics
	if m == nil {
		return
	}
	m.CallDuration.WithLabelValues(server, method).Observe(took.Seconds())
	var ue *upstream.Error
	if errors.As(err, &ue) && ue.Reason != upstream.ReasonCancelled && ue.Reason != upstream.ReasonBusy {
		m.UpstreamUp.WithLabelValues(server).Set(0)
	} else {
		m.UpstreamUp.WithLabelValues(server).Set(1)
	}
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
