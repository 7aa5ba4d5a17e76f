package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
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

// relay passes req, a server's request during call c, to c's agent and
// waits for the answer it gives the server: asked on the session's
// response stream (askInSession), or, for a 2026-07-28 agent's parked
// call, with an input_required answer and the agent's retry (relayParked).
// ev records how it went. n numbers the call's relayed requests.
func (b *Bridge) relay(ctx context.Context, c *call, req *jsonrpc.Message, n int64, ev *audit.ServerRequest) *jsonrpc.Message {
	rq := c.rq
	parked := rq.stateless && c.parkable != nil
	// A 2026-07-28 client is otherwise asked with an input_required result
	// and a retry, which cannot hold the server's call open meanwhile.
	reachable := parked || (!rq.stateless && rq.sess != nil && rq.out.canStream)
	params, refused := b.passOn(c, req, reachable, ev)
	if refused != nil {
		return jsonrpc.NewErrorResponse(req.ID, refused.Code, "the bridge did not pass this request to the agent: "+refused.Message)
	}
	var result json.RawMessage
	var failed *relayFailure
	if parked {
		result, failed = relayParked(ctx, c.parkable, req.Method, params)
	} else {
		result, failed = relayInSession(ctx, c, n, req.Method, params)
	}
	if failed != nil {
		ev.Outcome, ev.Reason = failed.outcome, failed.err.Message
		return &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: req.ID, Error: failed.err}
	}
	ev.Outcome = relayAnswered
	if action, _ := rawjson.String(rawjson.Get(result, "action")); req.Method == "elicitation/create" && action != "" {
		ev.Outcome = action
	}
	return jsonrpc.NewResult(req.ID, result)
}

// relayFailure is why a relayed request got no answer from the agent: the
// event's outcome (relayError or relayTimeout), and the error the server
// gets, whose message is the event's reason.
type relayFailure struct {
	outcome string
	err     *jsonrpc.Error
}

// relayInSession asks call c's session-era agent on its response stream:
// the agent's own error passes to the server as it is.
func relayInSession(ctx context.Context, c *call, n int64, method string, params json.RawMessage) (json.RawMessage, *relayFailure) {
	id := rawjson.AppendString(nil, "relay-"+c.id+"-"+strconv.FormatInt(n, 10))
	m, err := askInSession(ctx, c.rq, id, method, params)
	switch {
	case errors.Is(err, errNotSent):
		return nil, &relayFailure{relayError, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}}
	case err != nil:
		return nil, &relayFailure{relayTimeout, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the call ended before the agent answered: " + err.Error()}}
	case m.Error != nil:
		return nil, &relayFailure{relayError, m.Error}
	}
	return m.Result, nil
}

// passOn is the check every server's request passes on its way to the
// agent, however the agent is asked: the params the agent gets (cleaned,
// relayedParams), or why the request does not go to the agent with the
// JSON-RPC code for the server (refusal, or reachable false: the agent
// cannot be asked during the call). ev records a refusal, and the
// injection findings in the request's text.
func (b *Bridge) passOn(c *call, req *jsonrpc.Message, reachable bool, ev *audit.ServerRequest) (json.RawMessage, *jsonrpc.Error) {
	notPassed := func(code int, why string) (json.RawMessage, *jsonrpc.Error) {
		ev.Outcome, ev.Reason = relayRefused, why
		return nil, &jsonrpc.Error{Code: code, Message: why}
	}
	if code, why := b.refusal(c, req); why != "" {
		return notPassed(code, why)
	}
	if !reachable {
		return notPassed(jsonrpc.CodeMissingClientCapability, "the agent's client cannot be asked during a call (it has no session with a response stream)")
	}
	params, findings, err := b.relayedParams(c, req)
	ev.Injection = findings
	if err != nil {
		return notPassed(jsonrpc.CodeInvalidParams, err.Error())
	}
	return params, nil
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
