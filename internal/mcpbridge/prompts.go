package mcpbridge

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcp/catalog"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/toolname"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/translate"
	"github.com/mcp-operator/mcp-operator/internal/policy"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// livePrompts lists a server's prompts now, raw and parsed.
// fresh is how long the server said the list is fresh.
func (b *Bridge) livePrompts(rq *request, s *routes.Server, conn upstreamConn) ([]json.RawMessage, []catalog.Prompt, client.Freshness, error) {
	ctx, cancel := b.contextWithCallTimeout(rq.ctx)
	defer cancel()
	items, fresh, err := conn.ListAllFresh(ctx, "prompts/list", "prompts")
	if err != nil {
		return nil, nil, fresh, err
	}
	parsed, _ := catalog.Prompts(s.Name, items)
	return items, parsed, fresh, nil
}

func (b *Bridge) promptName(rq *request, namespaced string) string {
	if rq.endpoint != "" {
		return ""
	}
	if b.cfg.ToolNameStyle == StyleUnderscore {
		return toolname.Underscore(namespaced)
	}
	return namespaced
}

func (b *Bridge) listPrompts(rq *request) *jsonrpc.Message {
	eng := b.engine.Load()
	var items [][]byte
	f := newFreshness()
	for _, name := range b.servers(rq) {
		s, conn, ok := b.cfg.Registry.Server(name)
		if !ok || !s.Capabilities.Prompts {
			continue
		}
		raw, _, fresh, err := b.livePrompts(rq, s, conn)
		if err != nil {
			b.cfg.Log.Info("a server's prompts are left out of the list", "server", name, "error", b.redactor(s).String(err.Error(), nil))
			continue
		}
		f.server(fresh)
		items = append(items, shownItems(b, "prompts/list", raw, func(item json.RawMessage) (*routes.Server, []byte, bool) {
			upstreamName, _ := rawjson.String(rawjson.Get(item, "name"))
			if upstreamName == "" {
				return nil, nil, false
			}
			full := toolname.Namespaced(s.Name, upstreamName)
			get := policy.PromptGet{Name: full, Server: s.Name, Namespace: s.Namespace}
			if eng.DecidePrompt(rq.id.Subject(), get).Decision == v1alpha1.DecisionDeny {
				return nil, nil, false
			}
			if shown := b.promptName(rq, full); shown != "" {
				item = rawjson.Set(item, "name", rawjson.AppendString(nil, shown))
			}
			return s, item, true
		})...)
	}
	return listResult(rq, "prompts", items, f)
}

// resolvePrompt finds a prompt's server and upstream name, strictly. An
// underscore-style name is found by listing the servers' prompts: listed is
// then the prompts of the server it names, which decide needs and need not
// list again.
func (b *Bridge) resolvePrompt(rq *request, name string) (server, upstreamName string, listed []catalog.Prompt, ok bool) {
	if rq.endpoint != "" {
		return rq.endpoint, name, nil, true
	}
	if s, p, ok := toolname.SplitNamespaced(name); ok {
		return s, p, nil, true
	}
	if b.cfg.ToolNameStyle != StyleUnderscore {
		return "", "", nil, false
	}
	for _, sname := range b.cfg.Registry.Names() {
		s, conn, found := b.cfg.Registry.Server(sname)
		if !found || !s.Capabilities.Prompts {
			continue
		}
		_, parsed, _, err := b.livePrompts(rq, s, conn)
		if err != nil {
			continue
		}
		for _, p := range parsed {
			if toolname.Underscore(p.Name) == name {
				return sname, p.UpstreamName, parsed, true
			}
		}
	}
	return "", "", nil, false
}

// prompt is the prompts adapter of the pipeline: one prompts/get.
type prompt struct {
	*exchange
	conn         upstreamConn
	upstreamName string
	// name is the prompt's name as the agent sent it.
	name      string
	arguments map[string]string
	// listed are the server's prompts when resolve listed them already.
	listed []catalog.Prompt
	// checkWhenBack: decide met the server away; the arguments are checked
	// when resolve runs again with the server back.
	checkWhenBack bool
}

func (b *Bridge) getPrompt(rq *request) *jsonrpc.Message { return b.serve(rq, &prompt{}) }

func (pr *prompt) resolve(b *Bridge, x *exchange) *jsonrpc.Message {
	pr.exchange = x
	rq := x.rq
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      progressMeta    `json:"_meta"`
	}
	if err := json.Unmarshal(rq.msg.Params, &p); err != nil || p.Name == "" {
		return rpcError(rq, jsonrpc.CodeInvalidParams, "prompts/get needs params with a prompt name", nil)
	}
	pr.arguments = map[string]string{}
	if len(p.Arguments) > 0 && string(p.Arguments) != "null" {
		if err := json.Unmarshal(p.Arguments, &pr.arguments); err != nil {
			return rpcError(rq, jsonrpc.CodeInvalidParams, "prompt arguments must be an object of strings", nil)
		}
	}
	serverName, upstreamName, listed, ok := b.resolvePrompt(rq, p.Name)
	s, conn, known := b.target(serverName)
	if !ok || !known || !s.Capabilities.Prompts {
		return rpcError(rq, jsonrpc.CodeInvalidParams, fmt.Sprintf("unknown prompt %q", p.Name), nil)
	}
	x.server, x.progressToken = s, p.Meta.ProgressToken
	pr.conn, pr.upstreamName, pr.name, pr.listed = conn, upstreamName, p.Name, listed
	x.resolvedAway = conn == nil
	full := toolname.Namespaced(s.Name, upstreamName)
	if string(p.Arguments) != "null" {
		x.args = p.Arguments
	}
	x.method, x.target, x.action, x.what = methodPrompt, full, "get the prompt "+full, "prompt "+full
	x.readRetry()
	if pr.checkWhenBack && conn != nil {
		return pr.checkArgs(b, x)
	}
	return nil
}

// decide also holds the arguments to the prompt's declaration before
// anyone is asked (nobody should approve what cannot run), and only for a
// caller who may get the prompt at all.
func (pr *prompt) decide(b *Bridge, x *exchange) (policy.Result, *jsonrpc.Message) {
	rq, s := x.rq, pr.server
	res := b.engine.Load().DecidePrompt(rq.id.Subject(), policy.PromptGet{Name: x.target, Server: s.Name, Namespace: s.Namespace})
	if res.Decision == v1alpha1.DecisionDeny {
		return res, nil
	}
	if pr.conn == nil {
		// The server is away: its declaration is checked once it is back
		// (resolve, called again by the available stage), before anyone is
		// asked.
		pr.checkWhenBack = true
		return res, nil
	}
	return res, pr.checkArgs(b, x)
}

// checkArgs holds the arguments to the prompt's declaration, as the server
// lists it now.
func (pr *prompt) checkArgs(b *Bridge, x *exchange) *jsonrpc.Message {
	rq, s := x.rq, pr.server
	parsed := pr.listed
	if parsed == nil {
		var err error
		if _, parsed, _, err = b.livePrompts(rq, s, pr.conn); err != nil {
			return upstreamError(rq, err, "", b.redactor(s), false)
		}
	}
	i := slices.IndexFunc(parsed, func(c catalog.Prompt) bool { return c.UpstreamName == pr.upstreamName })
	if i < 0 {
		return rpcError(rq, jsonrpc.CodeInvalidParams, fmt.Sprintf("unknown prompt %q", pr.name), nil)
	}
	if err := checkPromptArgs(parsed[i], pr.arguments); err != nil {
		return rpcError(rq, jsonrpc.CodeInvalidParams, fmt.Sprintf("prompt %s: %v", x.target, err), nil)
	}
	return nil
}

func (pr *prompt) describe(b *Bridge, x *exchange) (*upstreamCall, *jsonrpc.Message) {
	rq, s := x.rq, pr.server
	return &upstreamCall{
		method: methodPrompt, name: pr.upstreamName, conn: x.callConn(pr.conn), what: "prompt " + x.target,
		params:  rawjson.Set(translate.UpstreamParams(rq.msg.Params), "name", rawjson.AppendString(nil, pr.upstreamName)),
		started: audit.PromptInvoked{Server: s.Name, Prompt: pr.upstreamName, Args: x.args, ArgsDigest: b.eventArgsDigest(x), ToolCallID: x.id, Credential: string(x.credKind)},
		output: func(raw json.RawMessage) (json.RawMessage, output.Summary, error) {
			return b.cfg.Pipeline.PromptResult(output.Call{
				Server: s.Name, Name: pr.upstreamName, Subject: rq.id.Username, Redactor: b.redactor(s), Block: x.blockInjection,
			}, raw)
		},
		closing: func(raw json.RawMessage, sum output.Summary, _ time.Duration, _ error) (audit.Payload, string) {
			expanded := audit.PromptExpanded{Server: s.Name, Prompt: pr.upstreamName, SizeBytes: len(raw), Injection: sum.Findings, Blocked: sum.Blocked, ToolCallID: x.id}
			if msgs, e := rawjson.Elements(rawjson.Get(raw, "messages")); e == nil {
				expanded.Messages = len(msgs)
			}
			return expanded, ""
		},
	}, nil
}

// checkPromptArgs holds arguments to the prompt's declaration: none unknown,
// none required missing.
func checkPromptArgs(p catalog.Prompt, args map[string]string) error {
	declared := map[string]bool{}
	var missing []string
	for _, a := range p.Arguments {
		declared[a.Name] = true
		if _, given := args[a.Name]; a.Required && !given {
			missing = append(missing, a.Name)
		}
	}
	var unknown []string
	for k := range args {
		if !declared[k] {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	switch {
	case len(unknown) > 0:
		return fmt.Errorf("unknown argument(s) %s", strings.Join(unknown, ", "))
	case len(missing) > 0:
		return fmt.Errorf("missing required argument(s) %s", strings.Join(missing, ", "))
	}
	return nil
}
