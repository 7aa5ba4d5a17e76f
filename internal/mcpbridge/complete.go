package mcpbridge

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/toolname"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/translate"
	"github.com/mcp-operator/mcp-operator/internal/policy"
	"github.com/mcp-operator/mcp-operator/internal/policy/resourceuri"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// completion is the completions adapter of the pipeline: one
// completion/complete on a server's own endpoint. It is decided and recorded
// like every request that reaches a server (forwarded with neither, a caller
// with no policy at all would read the completions of prompts nobody may use).
// Completing an argument of a prompt is decided as getting that prompt, of a
// resource template as reading it; a suggestion is not worth a question to the
// user, so where the policy says ask, it is denied. A resource URI is decided
// and forwarded in its canonical form, as a read's is.
type completion struct {
	// exchange.server is the completion's server: the available stage
	// answers for it, or wakes it, as for a read or a prompt.
	*exchange
	conn     upstreamConn
	ref      string // the prompt's upstream name, or the canonical resource URI
	argument json.RawMessage
}

func (b *Bridge) complete(rq *request) *jsonrpc.Message { return b.serve(rq, &completion{}) }

func (c *completion) resolve(b *Bridge, x *exchange) *jsonrpc.Message {
	c.exchange = x
	rq := x.rq
	var p struct {
		Ref struct {
			Type string `json:"type"`
			Name string `json:"name"`
			URI  string `json:"uri"`
		} `json:"ref"`
		Argument json.RawMessage `json:"argument"`
	}
	if err := json.Unmarshal(rq.msg.Params, &p); err != nil {
		return rpcError(rq, jsonrpc.CodeInvalidParams, "completion/complete needs params with a ref", nil)
	}
	s, conn, ok := b.target(rq.endpoint)
	if !ok {
		return rpcError(rq, CodeUpstream, "server "+rq.endpoint+" is not served", nil)
	}
	c.server, c.conn, c.argument, x.noAsk = s, conn, p.Argument, true
	x.resolvedAway = conn == nil
	switch {
	case p.Ref.Type == "ref/prompt" && p.Ref.Name != "":
		c.ref, x.method, x.target = p.Ref.Name, methodPrompt, toolname.Namespaced(s.Name, p.Ref.Name)
	case p.Ref.Type == "ref/resource" && p.Ref.URI != "":
		uri, err := resourceuri.Canonical(p.Ref.URI)
		if err != nil {
			return rpcError(rq, jsonrpc.CodeInvalidParams, fmt.Sprintf("resource URI %q refused: %v", p.Ref.URI, err), nil)
		}
		c.ref, x.method, x.target = uri, methodRead, BridgeURI(s.Name, uri)
	default:
		return rpcError(rq, jsonrpc.CodeInvalidParams, "completion/complete needs ref.type ref/prompt with a name, or ref/resource with a uri", nil)
	}
	x.what = "completion for " + x.target
	return nil
}

func (c *completion) decide(b *Bridge, x *exchange) (policy.Result, *jsonrpc.Message) {
	eng, s := b.engine.Load(), c.server
	if x.method == methodPrompt {
		return eng.DecidePrompt(x.rq.id.Subject(), policy.PromptGet{Name: x.target, Server: s.Name, Namespace: s.Namespace}), nil
	}
	return eng.DecideResource(x.rq.id.Subject(), policy.ResourceRead{Server: s.Name, Namespace: s.Namespace, URI: c.ref}), nil
}

func (c *completion) describe(b *Bridge, x *exchange) (*upstreamCall, *jsonrpc.Message) {
	rq, s := x.rq, c.server
	params := translate.UpstreamParams(rq.msg.Params)
	if x.method == methodRead {
		// The URI decided goes upstream, not the agent's spelling of it.
		ref := rawjson.Set(rawjson.Get(params, "ref"), "uri", rawjson.AppendString(nil, c.ref))
		params = rawjson.Set(params, "ref", ref)
	}
	return &upstreamCall{
		method: "completion/complete", conn: x.callConn(c.conn), params: params, what: x.what,
		started: audit.MCPCallStarted{Server: s.Name, ToolCallID: x.id, Method: "completion/complete", Args: c.argument, Credential: string(x.credKind)},
		// Suggestions are cleaned as the server's output, not run through
		// the pipeline of a result.
		plain: true,
		output: func(raw json.RawMessage) (json.RawMessage, output.Summary, error) {
			clean, _, err := output.JSON(b.redactor(s), "completion/complete", raw)
			return clean, output.Summary{}, err
		},
		closing: func(_ json.RawMessage, _ output.Summary, took time.Duration, err error) (audit.Payload, string) {
			if err != nil {
				return nil, ""
			}
			return audit.MCPCallCompleted{Server: s.Name, ToolCallID: x.id, DurationMs: audit.Ms(took)}, ""
		},
	}, nil
}
