package client

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// paramBinding is one input-schema property a tool mirrors into an HTTP
// header (the 2026 revision's x-mcp-header, SEP-2243): a server that
// declares one refuses a tools/call whose Mcp-Param-<Header> is missing.
type paramBinding struct {
	path   []string
	header string
}

type schemaProps struct {
	XMCPHeader json.RawMessage        `json:"x-mcp-header"`
	Properties map[string]schemaProps `json:"properties"`
}

// learnParamHeaders records the x-mcp-header bindings of listed tools.
func (c *Client) learnParamHeaders(items []json.RawMessage) {
	learned := map[string][]paramBinding{}
	for _, raw := range items {
		var t struct {
			Name        string      `json:"name"`
			InputSchema schemaProps `json:"inputSchema"`
		}
		if json.Unmarshal(raw, &t) != nil || t.Name == "" {
			continue
		}
		if b := collectBindings(t.InputSchema.Properties, nil, nil, 0); len(b) > 0 {
			learned[t.Name] = b
		}
	}
	c.paramMu.Lock()
	c.paramHeaders = learned
	c.paramMu.Unlock()
}

func collectBindings(props map[string]schemaProps, prefix []string, out []paramBinding, depth int) []paramBinding {
	if depth > 16 {
		return out
	}
	for name, p := range props {
		path := append(append([]string(nil), prefix...), name)
		var header string
		if json.Unmarshal(p.XMCPHeader, &header) == nil && header != "" && validToken(header) {
			out = append(out, paramBinding{path: path, header: header})
		}
		out = collectBindings(p.Properties, path, out, depth+1)
	}
	return out
}

func validToken(s string) bool {
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return true
}

// paramHeadersFor computes the Mcp-Param-* headers of a call to tool.
func (c *Client) paramHeadersFor(tool string, arguments json.RawMessage) http.Header {
	c.paramMu.Lock()
	bindings := c.paramHeaders[tool]
	c.paramMu.Unlock()
	if len(bindings) == 0 {
		return nil
	}
	var args map[string]json.RawMessage
	if json.Unmarshal(arguments, &args) != nil {
		return nil
	}
	h := http.Header{}
	for _, b := range bindings {
		if v, ok := headerValue(lookup(args, b.path)); ok {
			h.Set("Mcp-Param-"+b.header, v)
		}
	}
	return h
}

func lookup(args map[string]json.RawMessage, path []string) json.RawMessage {
	cur, ok := args[path[0]]
	for _, part := range path[1:] {
		if !ok {
			return nil
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) != nil {
			return nil
		}
		cur, ok = obj[part]
	}
	return cur
}

// headerValue renders a string, boolean or safe integer argument; values
// that are not plain visible ASCII, or have edge whitespace, go as
// =?base64?…?=.
func headerValue(raw json.RawMessage) (string, bool) {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case bool:
		s = strconv.FormatBool(v)
	case float64:
		if v != math.Trunc(v) || math.Abs(v) > 1<<53-1 {
			return "", false
		}
		s = strconv.FormatInt(int64(v), 10)
	default:
		return "", false
	}
	if needsBase64(s) {
		return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=", true
	}
	return s, true
}

func needsBase64(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t' {
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7E {
			return true
		}
	}
	return false
}
