package mcpbridge

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/session"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// serverName is the bridge's name in serverInfo.
const serverName = "mcp-operator-bridge"

// instructions tell a model how names work here.
const instructions = "Tools of several MCP servers, named mcp.<server>.<tool>. Call tools by these full names: bare names are never guessed. Only the tools your identity may use are listed."

// reach says whether, and how, a method's handling reaches a server.
type reach int

const (
	// bridgeOnly: answered by the bridge itself.
	bridgeOnly reach = iota
	// decidedPerRequest: the request is decided (and the decision recorded
	// as permission.requested and permission.resolved) before anything
	// goes to the server.
	decidedPerRequest
	// decidedPerItem: a list; the caller is shown only the items the
	// engine lets it see.
	decidedPerItem
)

// method is how the bridge serves one JSON-RPC method.
type method struct {
	serve func(b *Bridge, rq *request) *jsonrpc.Message
	reach reach
	// when, if set, says on which endpoint or era the method exists.
	when func(rq *request) bool
}

// methods are every method the bridge answers. A method that reaches a
// server must say how it is decided: TestEveryForwardedMethodIsDecided
// sends each such method from a caller no policy names and requires a
// refusal (or an empty list) and the records.
var methods = map[string]method{
	"initialize":      {serve: (*Bridge).initialize},
	"server/discover": {serve: (*Bridge).discover},
	"ping": {serve: func(_ *Bridge, rq *request) *jsonrpc.Message {
		return rpcResult(rq, json.RawMessage(`{}`))
	}},
	"logging/setLevel":      {serve: (*Bridge).setLogLevel},
	"resources/unsubscribe": {serve: (*Bridge).unsubscribe},

	"tools/list": {serve: (*Bridge).listTools, reach: decidedPerItem},
	"resources/list": {serve: func(b *Bridge, rq *request) *jsonrpc.Message {
		return b.listResources(rq, "resources/list", "resources", "uri")
	}, reach: decidedPerItem},
	"resources/templates/list": {serve: func(b *Bridge, rq *request) *jsonrpc.Message {
		return b.listResources(rq, "resources/templates/list", "resourceTemplates", "uriTemplate")
	}, reach: decidedPerItem},
	"prompts/list": {serve: (*Bridge).listPrompts, reach: decidedPerItem},
	"skills/list":  {serve: (*Bridge).listSkills, reach: decidedPerItem},

	"tools/call":          {serve: (*Bridge).callTool, reach: decidedPerRequest},
	"resources/read":      {serve: (*Bridge).readResource, reach: decidedPerRequest},
	"prompts/get":         {serve: (*Bridge).getPrompt, reach: decidedPerRequest},
	"skills/get":          {serve: (*Bridge).getSkill, reach: decidedPerRequest},
	"resources/subscribe": {serve: (*Bridge).subscribe, reach: decidedPerRequest},
	"subscriptions/listen": {serve: (*Bridge).listen, reach: decidedPerRequest,
		when: func(rq *request) bool { return rq.stateless }},
	"completion/complete": {serve: (*Bridge).complete, reach: decidedPerRequest,
		when: func(rq *request) bool { return rq.endpoint != "" }},
}

// dispatch answers one request.
func (b *Bridge) dispatch(rq *request) *jsonrpc.Message {
	m, ok := methods[rq.msg.Method]
	if !ok || (m.when != nil && !m.when(rq)) {
		return rpcError(rq, jsonrpc.CodeMethodNotFound, "method not found: "+rq.msg.Method, nil)
	}
	return m.serve(b, rq)
}

func (b *Bridge) serverInfo() map[string]string {
	return map[string]string{"name": serverName, "version": b.cfg.Version}
}

// capabilities are what the bridge offers on an endpoint: on /mcp, tools,
// resources and prompts; on /servers/<name>/mcp, what that server offers.
func (b *Bridge) capabilities(endpoint string) map[string]any {
	// resources.subscribe: resources/subscribe in a session,
	// notifications.resourceSubscriptions of subscriptions/listen in the
	// stateless era.
	caps := map[string]any{"tools": map[string]any{}, "resources": map[string]any{"subscribe": true}, "prompts": map[string]any{}, "logging": map[string]any{},
		"extensions": map[string]any{client.SkillsExtension: map[string]any{}}}
	if endpoint == "" {
		return caps
	}
	s, _, ok := b.target(endpoint)
	if !ok {
		return caps
	}
	caps = map[string]any{"tools": map[string]any{}}
	if s.Capabilities.Resources {
		caps["resources"] = map[string]any{"subscribe": s.Capabilities.ResourcesSubscribe}
	}
	if s.Capabilities.Prompts {
		caps["prompts"] = map[string]any{}
	}
	if s.Capabilities.Logging {
		caps["logging"] = map[string]any{}
	}
	if s.Capabilities.Completions {
		caps["completions"] = map[string]any{}
	}
	if s.Capabilities.Skills && s.Capabilities.Resources {
		caps["extensions"] = map[string]any{client.SkillsExtension: map[string]any{}}
	}
	return caps
}

// initialize opens a legacy-era session.
func (b *Bridge) initialize(rq *request) *jsonrpc.Message {
	if rq.sess != nil {
		return rpcError(rq, jsonrpc.CodeInvalidRequest, "the session is initialized already", nil)
	}
	var p struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(rq.msg.Params, &p); err != nil {
		return rpcError(rq, jsonrpc.CodeInvalidParams, "malformed initialize params: "+err.Error(), nil)
	}
	if rq.endpoint != "" {
		if _, _, ok := b.target(rq.endpoint); !ok {
			return rpcError(rq, jsonrpc.CodeInvalidParams, "server "+rq.endpoint+" is not served here (unknown, never Ready, or not in the bridge's namespaces)", nil)
		}
	}
	version := client.LatestLegacy
	if slices.Contains(client.LegacyVersions, p.ProtocolVersion) {
		version = p.ProtocolVersion
	}
	sess, err := b.cfg.Sessions.Open(session.Claims{
		Subject: rq.id.Username, Endpoint: rq.endpoint, Version: version,
		Elicitation:    hasFormElicitation(rawjson.Get(p.Capabilities, "elicitation")),
		ElicitationURL: hasURLElicitation(rawjson.Get(p.Capabilities, "elicitation")),
		Sampling:       declared(rawjson.Get(p.Capabilities, "sampling")),
	})
	if errors.Is(err, session.ErrTooMany) {
		return rpcError(rq, jsonrpc.CodeInvalidRequest, err.Error(), nil)
	}
	if err != nil {
		return rpcError(rq, jsonrpc.CodeInternalError, "while opening the session: "+err.Error(), nil)
	}
	rq.sess = sess
	return rpcResult(rq, map[string]any{
		"protocolVersion": version,
		"capabilities":    b.capabilities(rq.endpoint),
		"serverInfo":      b.serverInfo(),
		"instructions":    instructionsFor(rq),
	})
}

// discover answers server/discover (2026-07-28).
func (b *Bridge) discover(rq *request) *jsonrpc.Message {
	data, err := json.Marshal(map[string]any{
		"supportedVersions": supportedVersions(),
		"capabilities":      b.capabilities(rq.endpoint),
		"instructions":      instructionsFor(rq),
		"_meta":             map[string]any{metaServerInfo: b.serverInfo()},
	})
	if err != nil {
		return rpcError(rq, jsonrpc.CodeInternalError, "the bridge could not encode its answer", nil)
	}
	// The same for every caller of the aggregate endpoints. A server's own
	// endpoint tells that the server is served and what it offers, which
	// not every caller may learn: a shared cache keeps it from no one.
	scope := scopePublic
	if rq.endpoint != "" {
		scope = scopePrivate
	}
	return rpcResult(rq, withCacheHints(rq, data, newFreshness(), scope))
}

// logLevels are the syslog levels of MCP logging, least severe first.
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// setLogLevel records the level of the log messages the agent wants from
// the calls of its session. The upstream connection is shared and takes
// every level; the bridge filters per agent.
func (b *Bridge) setLogLevel(rq *request) *jsonrpc.Message {
	level, _ := rawjson.String(rawjson.Get(rq.msg.Params, "level"))
	if !slices.Contains(logLevels, level) {
		return rpcError(rq, jsonrpc.CodeInvalidParams, "logging/setLevel needs a level, one of "+strings.Join(logLevels, ", "), nil)
	}
	if rq.sess != nil {
		rq.sess.SetLogLevel(level)
	}
	return rpcResult(rq, json.RawMessage(`{}`))
}

// logLevel is the level of log messages the request's agent wants: its
// session's, or in the stateless era the request's _meta logLevel; "" for
// none.
func (rq *request) logLevel() string {
	if rq.sess != nil {
		return rq.sess.LogLevel()
	}
	if meta := rawjson.Get(rq.msg.Params, "_meta"); meta != nil {
		level, _ := rawjson.String(rawjson.Get(meta, metaLogLevel))
		return level
	}
	return ""
}

// wantsLog says whether a message at level passes the agent's level.
func wantsLog(agentLevel, level string) bool {
	least, at := slices.Index(logLevels, agentLevel), slices.Index(logLevels, level)
	return least >= 0 && at >= least
}
