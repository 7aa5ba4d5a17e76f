// Package catalog turns a server's raw tools/list result into the catalog
// the operator publishes: each tool validated (an invalid one is left out
// with a reason, the rest kept), named mcp.<server>.<tool>, given a risk
// (spec overrides > annotations under the trust rule > network), scanned for
// injection attempts, and digested. Schemas pass through byte for byte.
package catalog

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/canonjson"
	"github.com/mcp-operator/mcp-operator/internal/mcp/injection"
	"github.com/mcp-operator/mcp-operator/internal/mcp/toolname"
)

// RiskSource says which rule set a tool's risk.
type RiskSource string

// Where a tool's risk came from: the MCPServer's override for the tool, the
// tool's own annotations, or DefaultRisk.
const (
	RiskFromOverride   RiskSource = "override"
	RiskFromAnnotation RiskSource = "annotation"
	RiskFromDefault    RiskSource = "default"
)

// DefaultRisk is the risk of an MCP tool nothing else classifies.
const DefaultRisk = v1alpha1.RiskNetwork

// Tool is one published tool.
type Tool struct {
	// Name is the namespaced name mcp.<server>.<tool>.
	Name string `json:"name"`
	// UnderscoreName is mcp__<server>__<tool> for clients that reject dots.
	UnderscoreName string                    `json:"underscoreName"`
	UpstreamName   string                    `json:"upstreamName"`
	Title          string                    `json:"title,omitempty"`
	Description    string                    `json:"description,omitempty"`
	Risk           v1alpha1.Risk             `json:"risk"`
	RiskSource     RiskSource                `json:"riskSource"`
	Annotations    *v1alpha1.ToolAnnotations `json:"annotations,omitempty"`
	// SchemaDigest is the digest of the tool's whole definition as the
	// server sent it, in canonical JSON.
	SchemaDigest string              `json:"schemaDigest"`
	Flags        []v1alpha1.ToolFlag `json:"flags,omitempty"`
	Findings     []injection.Finding `json:"findings,omitempty"`
	InputSchema  json.RawMessage     `json:"inputSchema"`
	OutputSchema json.RawMessage     `json:"outputSchema,omitempty"`
	// Definition is the tool exactly as listed.
	Definition json.RawMessage `json:"-"`
}

// Rejected is a tool left out because it is invalid.
type Rejected struct {
	// Index is the tool's position in the server's list.
	Index int `json:"index"`
	// UpstreamName is the name as listed, if it was a string.
	UpstreamName string `json:"upstreamName,omitempty"`
	Reason       string `json:"reason"`
}

func (r Rejected) String() string {
	if r.UpstreamName == "" {
		return fmt.Sprintf("tool #%d: %s", r.Index, r.Reason)
	}
	return fmt.Sprintf("tool %q: %s", r.UpstreamName, r.Reason)
}

// Catalog is a server's published tools, sorted by name.
type Catalog struct {
	Server string `json:"server"`
	Tools  []Tool `json:"tools"`
	// Rejected are invalid tools, in list order.
	Rejected []Rejected `json:"rejected,omitempty"`
	// Excluded are upstream names spec.tools.exclude left out, sorted.
	Excluded []string `json:"excluded,omitempty"`
	// Digest is "sha256:<hex>" of the canonical catalog: the sorted
	// (upstream name, schema digest) pairs of the published tools. It does
	// not change with list order, key order or whitespace; it does change
	// when any published definition does.
	Digest string `json:"digest"`
}

// Build makes the catalog of server (a DNS label) from its tools/list
// items. spec supplies overrides, excludes and the trust rule. Only a bad
// server name is an error: bad tools are Rejected.
func Build(server string, items []json.RawMessage, spec v1alpha1.ToolsSpec) (*Catalog, error) {
	if err := toolname.ValidateServer(server); err != nil {
		return nil, fmt.Errorf("while building the catalog: %w", err)
	}
	c := &Catalog{Server: server, Tools: []Tool{}}
	names := make([]string, len(items))
	count := map[string]int{}
	for i, raw := range items {
		var head struct {
			Name json.RawMessage `json:"name"`
		}
		if json.Unmarshal(raw, &head) == nil {
			_ = json.Unmarshal(head.Name, &names[i])
		}
		count[names[i]]++
	}
	overrides := map[string]v1alpha1.Risk{}
	for _, o := range spec.RiskOverrides {
		overrides[o.Tool] = o.Risk
	}
	for i, raw := range items {
		name := names[i]
		if name != "" && excluded(name, spec.Exclude) {
			c.Excluded = append(c.Excluded, name)
			continue
		}
		if n := count[name]; n > 1 && name != "" {
			c.Rejected = append(c.Rejected, Rejected{Index: i, UpstreamName: name, Reason: fmt.Sprintf("duplicate name: the server lists it %d times, so which one a call reaches is unknown", n)})
			continue
		}
		t, err := parseTool(raw)
		if err != nil {
			c.Rejected = append(c.Rejected, Rejected{Index: i, UpstreamName: name, Reason: err.Error()})
			continue
		}
		t.Name = toolname.Namespaced(server, t.UpstreamName)
		t.UnderscoreName = toolname.Underscore(t.Name)
		t.Risk, t.RiskSource = classify(t.UpstreamName, t.Annotations, overrides, spec.TrustAnnotations)
		t.Findings = scan(t)
		if len(t.Findings) > 0 {
			t.Flags = append(t.Flags, v1alpha1.ToolFlagInjectionSuspect)
		}
		if contradictory(t.Annotations) {
			t.Flags = append(t.Flags, v1alpha1.ToolFlagContradictoryHints)
		}
		c.Tools = append(c.Tools, t)
	}
	slices.SortFunc(c.Tools, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(c.Excluded)
	c.Excluded = slices.Compact(c.Excluded)
	c.Digest = digest(c.Tools)
	return c, nil
}

func excluded(name string, globs []string) bool {
	for _, g := range globs {
		if toolname.MatchGlob(g, name) {
			return true
		}
	}
	return false
}

// parseTool validates one definition and keeps its raw parts.
func parseTool(raw json.RawMessage) (Tool, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return Tool{}, fmt.Errorf("the definition is not a JSON object")
	}
	var t Tool
	if err := json.Unmarshal(fields["name"], &t.UpstreamName); err != nil || fields["name"] == nil {
		return Tool{}, fmt.Errorf("name is missing or not a string")
	}
	if err := toolname.ValidateUpstream(t.UpstreamName); err != nil {
		return Tool{}, fmt.Errorf("invalid name: %w", err)
	}
	if err := optionalString(fields, "title", &t.Title); err != nil {
		return Tool{}, err
	}
	if err := optionalString(fields, "description", &t.Description); err != nil {
		return Tool{}, err
	}
	schema, err := objectSchema(fields["inputSchema"])
	if err != nil {
		return Tool{}, fmt.Errorf("invalid inputSchema: %w", err)
	}
	t.InputSchema = schema
	if out, ok := fields["outputSchema"]; ok && string(out) != "null" {
		if t.OutputSchema, err = objectSchema(out); err != nil {
			return Tool{}, fmt.Errorf("invalid outputSchema: %w", err)
		}
	}
	if ann, ok := fields["annotations"]; ok && string(ann) != "null" {
		if t.Annotations, err = parseAnnotations(ann); err != nil {
			return Tool{}, err
		}
		if t.Title == "" {
			var a struct {
				Title string `json:"title"`
			}
			_ = json.Unmarshal(ann, &a)
			t.Title = a.Title
		}
	}
	canonical, err := canonjson.Marshal(raw)
	if err != nil {
		return Tool{}, fmt.Errorf("the definition cannot be digested: %w", err)
	}
	t.SchemaDigest = canonjson.SHA256(canonical)
	t.Definition = raw
	return t, nil
}

func optionalString(fields map[string]json.RawMessage, key string, dst *string) error {
	raw, ok := fields[key]
	if !ok || string(raw) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("%s is not a string", key)
	}
	return nil
}

// objectSchema checks a schema is a JSON object with "type": "object" and
// returns it unchanged.
func objectSchema(raw json.RawMessage) (json.RawMessage, error) {
	if raw == nil || string(raw) == "null" {
		return nil, fmt.Errorf("missing")
	}
	var s map[string]json.RawMessage
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	var typ string
	if err := json.Unmarshal(s["type"], &typ); err != nil || typ != "object" {
		return nil, fmt.Errorf(`"type" must be "object"`)
	}
	return raw, nil
}

func parseAnnotations(raw json.RawMessage) (*v1alpha1.ToolAnnotations, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("annotations is not a JSON object")
	}
	a := &v1alpha1.ToolAnnotations{}
	for key, dst := range map[string]**bool{
		"readOnlyHint": &a.ReadOnlyHint, "destructiveHint": &a.DestructiveHint,
		"idempotentHint": &a.IdempotentHint, "openWorldHint": &a.OpenWorldHint,
	} {
		v, ok := fields[key]
		if !ok || string(v) == "null" {
			continue
		}
		var b bool
		if err := json.Unmarshal(v, &b); err != nil {
			return nil, fmt.Errorf("annotations.%s is not a boolean", key)
		}
		*dst = &b
	}
	return a, nil
}

// riskRank orders risks from least to most harmful.
var riskRank = map[v1alpha1.Risk]int{
	v1alpha1.RiskRead: 0, v1alpha1.RiskWrite: 1, v1alpha1.RiskNetwork: 2, v1alpha1.RiskDestructive: 3,
}

// contradictory says whether a tool claims to be read-only and destructive
// at once. Hints come from the server, which may lie: such a tool gets the
// most harmful reading, and the flag says why.
func contradictory(a *v1alpha1.ToolAnnotations) bool {
	return a != nil && a.ReadOnlyHint != nil && *a.ReadOnlyHint && a.DestructiveHint != nil && *a.DestructiveHint
}

// classify applies: an explicit override wins; otherwise the annotations
// (destructiveHint true → destructive, even on a tool that also says it is
// read-only; readOnlyHint → read) where they raise the risk above the
// default, or lower it only when the spec trusts annotations; otherwise
// network. A missing destructiveHint is not taken as true (the MCP
// default): a tool with no hints gets the default risk.
func classify(name string, a *v1alpha1.ToolAnnotations, overrides map[string]v1alpha1.Risk, trust bool) (v1alpha1.Risk, RiskSource) {
	if r, ok := overrides[name]; ok {
		return r, RiskFromOverride
	}
	if a != nil {
		readOnly := a.ReadOnlyHint != nil && *a.ReadOnlyHint
		var hinted v1alpha1.Risk
		switch {
		case a.DestructiveHint != nil && *a.DestructiveHint:
			hinted = v1alpha1.RiskDestructive
		case readOnly:
			hinted = v1alpha1.RiskRead
		}
		if hinted != "" && (riskRank[hinted] > riskRank[DefaultRisk] || trust) {
			return hinted, RiskFromAnnotation
		}
	}
	return DefaultRisk, RiskFromDefault
}

// scan looks for injection attempts in every text of the definition a model
// reads: title, description and the strings of the input schema (parameter
// descriptions are a favourite hiding place).
func scan(t Tool) []injection.Finding {
	var out []injection.Finding
	out = append(out, injection.Scan("title", t.Title)...)
	out = append(out, injection.Scan("description", t.Description)...)
	var schema any
	if json.Unmarshal(t.InputSchema, &schema) == nil {
		walkStrings("inputSchema", schema, 0, func(where, s string) {
			out = append(out, injection.Scan(where, s)...)
		})
	}
	return out
}

func walkStrings(where string, v any, depth int, f func(where, s string)) {
	if depth > 32 {
		return
	}
	switch v := v.(type) {
	case string:
		f(where, v)
	case []any:
		for i, e := range v {
			walkStrings(fmt.Sprintf("%s[%d]", where, i), e, depth+1, f)
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys) // findings in a stable order
		for _, k := range keys {
			f(where+" (key)", k)
			walkStrings(where+"."+k, v[k], depth+1, f)
		}
	}
}

// digest is the catalog digest over the published tools (already sorted).
func digest(tools []Tool) string {
	type entry struct {
		Name         string `json:"name"`
		SchemaDigest string `json:"schemaDigest"`
	}
	entries := make([]entry, len(tools))
	for i, t := range tools {
		entries[i] = entry{t.UpstreamName, t.SchemaDigest}
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.Name, b.Name) })
	return digestOf(entries)
}

// digestOf is "sha256:<hex>" of v in canonical JSON. v is built here from
// plain strings and numbers, so encoding it cannot fail.
func digestOf(v any) string {
	data, _ := json.Marshal(v)
	canonical, _ := canonjson.Marshal(data)
	return canonjson.SHA256(canonical)
}
