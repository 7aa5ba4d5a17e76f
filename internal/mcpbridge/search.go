package mcpbridge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
	"github.com/mcp-operator/mcp-operator/internal/toolsearch"
)

// Tool search: on SearchPath, tools/list offers two meta-tools instead of
// the catalog, and the agent finds the few tools a task needs. It is the
// caller's choice, by the URL it is given, not a policy's: what a caller
// may call is the same on both paths, only how much of it enters the
// model's context differs, and that depends on the client (its context
// size, whether it searches itself), which a ToolPolicy cannot know.
//
// A found tool is called by its real name, directly or through
// metaCallTool; either way the request goes through the whole pipeline
// under that name (callTool unwraps metaCallTool first), so decisions,
// approvals, audit events and traces never name a meta-tool.

// SearchPath is the endpoint with tool search: /mcp's servers and policy.
const SearchPath = "/mcp/search"

// The meta-tools. Their names carry no mcp. prefix, so no tool of a
// server can take them.
const (
	metaFindTools = "find_tools"
	metaCallTool  = "call_tool"
)

// Results of find_tools: defaultFound unless the agent asks, never more
// than maxFound.
const (
	defaultFound = 5
	maxFound     = 20
)

// maxQuery bounds find_tools' query in bytes: a task in a few words is far
// shorter, and a search's cost grows with its query's words.
const maxQuery = 1024

// metaTools is tools/list's answer on SearchPath.
var metaTools = json.RawMessage(`{"tools":[` +
	`{"name":"` + metaFindTools + `","title":"Find tools","description":"Find the tools for a task among every tool you may call here. Describe the task in a few words (what to do, on what); you get the best matching tools with their full input schemas. Then call a tool by its name (directly, or through ` + metaCallTool + `).",` +
	`"inputSchema":{"type":"object","properties":{"query":{"type":"string","maxLength":` + fmt.Sprint(maxQuery) + `,"description":"The task, in natural language."},"limit":{"type":"integer","minimum":1,"maximum":` + fmt.Sprint(maxFound) + `,"description":"How many tools to return (default ` + fmt.Sprint(defaultFound) + `)."}},"required":["query"]},` +
	`"annotations":{"readOnlyHint":true,"openWorldHint":false}},` +
	`{"name":"` + metaCallTool + `","title":"Call a found tool","description":"Call a tool that ` + metaFindTools + ` returned, by its name, with arguments that fit its input schema.",` +
	`"inputSchema":{"type":"object","properties":{"name":{"type":"string","description":"The tool's name as ` + metaFindTools + ` gave it."},"arguments":{"type":"object","description":"The tool's arguments."}},"required":["name"]}}` +
	`]}`)

// searchInstructions tell a model on SearchPath how to find its tools.
const searchInstructions = "Tools of several MCP servers, named mcp.<server>.<tool>, are found with " + metaFindTools + ": describe the task in a few words and you get the best matching tools you may use, with their schemas. Call a found tool by its full name, directly or through " + metaCallTool + "; bare names are never guessed."

// instructionsFor are the instructions for rq's endpoint.
func instructionsFor(rq *request) string {
	if rq.search {
		return searchInstructions
	}
	return instructions
}

// isSearchPath says whether r came in on SearchPath.
func isSearchPath(r *http.Request) bool { return r.URL.Path == SearchPath }

// callTool serves tools/call: a meta-tool on SearchPath, else a tool of a
// server through the pipeline.
func (b *Bridge) callTool(rq *request) *jsonrpc.Message {
	if rq.search {
		name, _ := rawjson.String(rawjson.Get(rq.msg.Params, "name"))
		switch name {
		case metaFindTools:
			return b.findTools(rq)
		case metaCallTool:
			if answer := unwrapCallTool(rq); answer != nil {
				return answer
			}
		}
	}
	return b.serve(rq, &call{})
}

// unwrapCallTool turns a call_tool request into the call it asks for,
// before anything resolves it: params {name, arguments} are those of
// call_tool's arguments, _meta and a retry's members stay.
func unwrapCallTool(rq *request) *jsonrpc.Message {
	args := rawjson.Get(rq.msg.Params, "arguments")
	name, ok := rawjson.String(rawjson.Get(args, "name"))
	if !ok || name == "" {
		return rpcError(rq, jsonrpc.CodeInvalidParams, metaCallTool+" needs arguments with the name of the tool to call", nil)
	}
	if name == metaCallTool || name == metaFindTools {
		return rpcError(rq, jsonrpc.CodeInvalidParams, metaCallTool+" calls a found tool, not "+name, nil)
	}
	inner := rawjson.Get(args, "arguments")
	if inner == nil {
		inner = []byte(`{}`)
	}
	params := rawjson.Set(rq.msg.Params, "name", rawjson.AppendString(nil, name))
	rq.msg.Params = rawjson.Set(params, "arguments", inner)
	return nil
}

// findTools answers find_tools: the best tools for the query among those
// the caller may call, rendered as tools/list renders them.
func (b *Bridge) findTools(rq *request) *jsonrpc.Message {
	var p struct {
		Arguments struct {
			Query string          `json:"query"`
			Limit json.RawMessage `json:"limit"`
		} `json:"arguments"`
	}
	if err := json.Unmarshal(rq.msg.Params, &p); err != nil || strings.TrimSpace(p.Arguments.Query) == "" {
		return toolError(rq, metaFindTools+" needs a query: the task in a few words")
	}
	if len(p.Arguments.Query) > maxQuery {
		return toolError(rq, fmt.Sprintf("%s's query is %d bytes, more than %d: describe the task in a few words", metaFindTools, len(p.Arguments.Query), maxQuery))
	}
	limit := defaultFound
	if l := p.Arguments.Limit; l != nil && string(l) != "null" {
		var n int
		if err := json.Unmarshal(l, &n); err != nil {
			return toolError(rq, fmt.Sprintf("%s's limit must be a whole number from 1 to %d, not %s", metaFindTools, maxFound, l))
		}
		limit = min(max(n, 1), maxFound)
	}
	ix := b.searchIndex(rq)
	eng, subject := b.engine.Load(), rq.id.Subject()
	hits := ix.index.Search(p.Arguments.Query, limit, func(doc int) bool {
		return eng.ToolVisible(subject, toolCall(ix.tools[doc], nil))
	})
	style := b.style(rq)
	items := make([][]byte, 0, len(hits))
	for _, h := range hits {
		if item, ok := b.listedTool(ix.tools[h.Doc], style); ok {
			items = append(items, item)
		}
	}
	return rpcResult(rq, FindResult(items))
}

// SearchTools is tools/list's answer on SearchPath: all an agent is shown
// before it searches.
func SearchTools() json.RawMessage { return metaTools }

// FindResult is find_tools' result for the tools found, each as tools/list
// renders it. The tools are one text block of JSON, {"tools":[...]}, and
// not also structuredContent: a client gives the model one or the other,
// and the model needs the schemas.
func FindResult(tools [][]byte) json.RawMessage {
	text := fmt.Sprintf("%d tools found; call one by its name.", len(tools))
	if len(tools) == 0 {
		text = "No tool you may call matches; try other words."
	}
	found := append([]byte(`{"tools":`), rawjson.AppendArray(nil, tools)...)
	found = append(found, '}')
	out := []byte(`{"content":[{"type":"text","text":`)
	out = rawjson.AppendString(out, text)
	out = append(out, `},{"type":"text","text":`...)
	out = rawjson.AppendString(out, string(found))
	return append(out, "}]}"...)
}

// toolError is a tool result that reports an error to the model (a tool's
// own failure, not the protocol's).
func toolError(rq *request, text string) *jsonrpc.Message {
	out := rawjson.AppendString([]byte(`{"isError":true,"content":[{"type":"text","text":`), text)
	return rpcResult(rq, json.RawMessage(append(out, "}]}"...)))
}

// searchIndex is the index of every served tool, callers' permissions
// aside (they filter each query). It is rebuilt only when a catalog has
// changed: catalogs are replaced, never changed in place, so the same
// catalogs in the same order mean the same index.
type searchIndex struct {
	catalogs []*routes.Catalog
	tools    []*routes.Tool
	index    *toolsearch.Index
}

// searchIndexes keeps the current searchIndex.
type searchIndexes struct {
	mu  sync.Mutex
	cur *searchIndex
}

// searchIndex returns the index of the catalogs served now.
func (b *Bridge) searchIndex(rq *request) *searchIndex {
	catalogs := b.liveCatalogs(rq)
	s := &b.searches
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && slices.Equal(s.cur.catalogs, catalogs) {
		return s.cur
	}
	ix := &searchIndex{catalogs: catalogs}
	var docs []toolsearch.Doc
	for _, c := range catalogs {
		for _, t := range c.Tools {
			// A definition the output pipeline refuses is never listed
			// (listedTool): left out here, it takes no place among a
			// find's hits.
			if _, ok := b.listedTool(t, ""); !ok {
				continue
			}
			ix.tools = append(ix.tools, t)
			docs = append(docs, toolsearch.DocOf(t.Name, t.Definition))
		}
	}
	ix.index = toolsearch.Build(docs)
	s.cur = ix
	return ix
}
