package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcp/injection"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// Outcomes of a server's request (mcp.server_request) besides the client's
// own answer.
const (
	relayAnswered = "answered"
	relayError    = "error"
	relayRefused  = "refused"
	relayTimeout  = "timeout"
	// relayForwarded: passed to a 2026-07-28 agent in an input_required
	// result; its answer comes with the retry.
	relayForwarded = "forwarded"
)

// relayRequests answers the requests a server sends during call c
// (elicitation/create, sampling/createMessage) by asking c's agent: the
// request goes on the call's response stream, marked with the server and
// tool it comes from and with the server's secrets redacted, and the
// agent's answer goes back to the server. Nothing else is relayed, and
// nothing to anyone but the caller.
func (b *Bridge) relayRequests(c *call) streamhttp.RequestHandler {
	var n atomic.Int64
	return func(ctx context.Context, req *jsonrpc.Message) *jsonrpc.Message {
		if req.Method == "ping" {
			return jsonrpc.NewResult(req.ID, json.RawMessage(`{}`))
		}
		ev := audit.ServerRequest{Server: c.tool.Server.Name, ToolCallID: c.id, Method: req.Method}
		reply := b.relay(ctx, c, req, n.Add(1), &ev)
		_, _ = b.audit(c.rq, ev)
		return reply
	}
}

func (b *Bridge) relay(ctx context.Context, c *call, req *jsonrpc.Message, n int64, ev *audit.ServerRequest) *jsonrpc.Message {
	refuse := func(code int, why string) *jsonrpc.Message {
		ev.Outcome, ev.Reason = relayRefused, why
		return jsonrpc.NewErrorResponse(req.ID, code, "the bridge did not pass this request to the agent: "+why)
	}
	rq := c.rq
	if code, why := b.refusal(c, req); why != "" {
		return refuse(code, why)
	}
	if rq.stateless && c.parkable != nil {
		return b.relayParked(ctx, c, req, ev)
	}
	if rq.stateless || rq.sess == nil || !rq.out.canStream {
		// A 2026-07-28 client is asked with an input_required result and a
		// retry, which cannot hold the server's call open meanwhile.
		return refuse(jsonrpc.CodeMissingClientCapability, "the agent's client cannot be asked during a call (it has no session with a response stream)")
	}
	params, findings, err := b.relayedParams(c, req)
	ev.Injection = findings
	if err != nil {
		return refuse(jsonrpc.CodeInvalidParams, err.Error())
	}

	id := rawjson.AppendString(nil, "relay-"+c.id+"-"+strconv.FormatInt(n, 10))
	answer, done := rq.sess.Await(string(id))
	defer done()
	if !rq.out.send(&jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: id, Method: req.Method, Params: params}) {
		ev.Outcome, ev.Reason = relayError, "the request could not be sent to the agent"
		return jsonrpc.NewErrorResponse(req.ID, jsonrpc.CodeInternalError, ev.Reason)
	}
	select {
	case m := <-answer:
		if m.Error != nil {
			ev.Outcome, ev.Reason = relayError, m.Error.Message
			return &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: req.ID, Error: m.Error}
		}
		ev.Outcome = relayAnswered
		if action, _ := rawjson.String(rawjson.Get(m.Result, "action")); req.Method == "elicitation/create" && action != "" {
			ev.Outcome = action
		}
		return jsonrpc.NewResult(req.ID, m.Result)
	case <-ctx.Done():
		ev.Outcome, ev.Reason = relayTimeout, "the call ended before the agent answered: "+context.Cause(ctx).Error()
		return jsonrpc.NewErrorResponse(req.ID, jsonrpc.CodeInternalError, ev.Reason)
	}
}

// relayParked asks a 2026-07-28 agent: the call parks until the agent's
// retry brings the answer (parked.go).
func (b *Bridge) relayParked(ctx context.Context, c *call, req *jsonrpc.Message, ev *audit.ServerRequest) *jsonrpc.Message {
	params, findings, err := b.relayedParams(c, req)
	ev.Injection = findings
	if err != nil {
		ev.Outcome, ev.Reason = relayRefused, err.Error()
		return jsonrpc.NewErrorResponse(req.ID, jsonrpc.CodeInvalidParams, err.Error())
	}
	m, err := askParked(ctx, c.parkable, req.Method, params)
	if err != nil {
		ev.Outcome, ev.Reason = relayTimeout, err.Error()
		return jsonrpc.NewErrorResponse(req.ID, jsonrpc.CodeInternalError, err.Error())
	}
	ev.Outcome = relayAnswered
	if action, _ := rawjson.String(rawjson.Get(m.Result, "action")); req.Method == "elicitation/create" && action != "" {
		ev.Outcome = action
	}
	return jsonrpc.NewResult(req.ID, m.Result)
}

// refusal says why a server's request during call c may not go to the
// agent ("" when it may), with the JSON-RPC code for the server: the
// method is not relayed, the MCPServer does not allow it, or the agent's
// client did not declare it can answer.
func (b *Bridge) refusal(c *call, req *jsonrpc.Message) (int, string) {
	server := c.tool.Server
	switch req.Method {
	case "elicitation/create", "sampling/createMessage":
	default:
		return jsonrpc.CodeMethodNotFound, req.Method + " is not relayed"
	}
	if !server.ServerRequests.Relays(req.Method) {
		return jsonrpc.CodeMethodNotFound, fmt.Sprintf("MCPServer %s/%s does not allow it (spec.serverRequests)", server.Namespace, server.Name)
	}
	if !agentOffers(c.rq, req) {
		return jsonrpc.CodeMissingClientCapability, "the agent's client did not declare the capability for it"
	}
	return 0, ""
}

// agentOffers says whether the agent's client declared it can answer req.
func agentOffers(rq *request, req *jsonrpc.Message) bool {
	if req.Method == "sampling/createMessage" {
		return rq.sampling
	}
	if mode, _ := rawjson.String(rawjson.Get(req.Params, "mode")); mode == "url" {
		return rq.elicitationURL
	}
	return rq.elicitation
}

// relayedParams are req's params as the agent gets them: the server's
// secrets redacted, an elicitation's message prefixed with where it comes
// from (the user must know which server asks), and the text the agent's
// user or model will read scanned for injection.
func (b *Bridge) relayedParams(c *call, req *jsonrpc.Message) (json.RawMessage, []injection.Finding, error) {
	redactor := b.redactor(c.tool.Server)
	params, err := redactor.JSON(req.Params, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("malformed %s params: %w", req.Method, err)
	}
	var findings []injection.Finding
	scan := func(where string, raw json.RawMessage) {
		if s, ok := rawjson.String(raw); ok {
			findings = append(findings, injection.Scan(where, s)...)
		}
	}
	// Text a rule (or the bridge's flag) withholds from results is not
	// passed on through a question either.
	blocked := func() error {
		if c.blockInjection && len(findings) > 0 {
			return fmt.Errorf("%s: its text looks like instructions to the model (%s)", reasonInjection, findings[0].Pattern)
		}
		return nil
	}
	if req.Method == "elicitation/create" {
		msg, _ := rawjson.String(rawjson.Get(params, "message"))
		scan("message", rawjson.Get(params, "message"))
		prefixed := rawjson.AppendString(nil, output.Prefix(c.tool.Server.Name, c.tool.Upstream)+output.EscapeMarkers(msg))
		return rawjson.Set(params, "message", prefixed), findings, blocked()
	}
	// To the agent the bridge is one server: context "thisServer" or
	// "allServers" would be the whole bridge session's, other servers'
	// results included, handed to this server through the model's answer.
	if ctx, _ := rawjson.String(rawjson.Get(params, "includeContext")); ctx != "" && ctx != "none" {
		params = rawjson.Set(params, "includeContext", rawjson.AppendString(nil, "none"))
	}
	scan("systemPrompt", rawjson.Get(params, "systemPrompt"))
	var messages []struct {
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(rawjson.Get(params, "messages"), &messages)
	for i, m := range messages {
		// content is one block, or (2025-11-25) a list of them.
		blocks := []json.RawMessage{m.Content}
		if len(m.Content) > 0 && m.Content[0] == '[' {
			_ = json.Unmarshal(m.Content, &blocks)
		}
		for _, block := range blocks {
			scan(fmt.Sprintf("messages[%d].content", i), rawjson.Get(block, "text"))
		}
	}
	// The model reads the messages: no marker of another source in them,
	// and none passed on unescaped.
	escaped, err := output.EscapeMarkersJSON(params)
	if err != nil {
		return nil, nil, fmt.Errorf("malformed %s params: %w", req.Method, err)
	}
	return escaped, findings, blocked()
}
