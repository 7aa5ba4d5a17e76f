// Package mcpstatus converts what a probe found into the MCPServer status
// types, so the controller publishes exactly what `manager probe` shows.
// Every function is pure.
package mcpstatus

import (
	"regexp"
	"slices"
	"strings"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/catalog"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/invisible"
	"github.com/mcp-operator/mcp-operator/internal/redact"
	"github.com/mcp-operator/mcp-operator/internal/textcut"
)

// Field limits of the status types (their CRD maxLength, in characters).
const (
	MaxDescription   = 512
	MaxTitle         = 256
	MaxInfoField     = 256
	MaxPromptArgs    = 64
	MaxPromptName    = 512
	MaxPromptArgName = 128
	MaxSkillURI      = 2048
	MaxToolArgs      = 64
	MaxToolArgName   = 64
	// MaxStatusArgs bounds the arguments of all tools together: 1000 tools
	// of 64 arguments would add megabytes to an object etcd stores whole.
	// With names of at most MaxToolArgName characters from toolArgName's
	// alphabet (one byte each in JSON), they take under 400 KB.
	MaxStatusArgs = 4000
)

// toolArgName is the names status lists: a name of anything else (a
// character JSON writes in several bytes, one cleaning changed) makes the
// tool's arguments unknown, so that MaxStatusArgs bounds bytes too.
var toolArgName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Tools converts a catalog's tools, sorted by name. Descriptions and titles
// are cleaned with r (see Clean), then cut on a character boundary to fit
// the status fields: cut first, a secret at the cut would leave its start.
func Tools(c *catalog.Catalog, r *redact.Redactor) []v1alpha1.ToolStatus {
	out := make([]v1alpha1.ToolStatus, 0, len(c.Tools))
	budget := MaxStatusArgs
	for _, t := range sortedByName(c.Tools) {
		var ann *v1alpha1.ToolAnnotations
		if t.Annotations != nil {
			ann = t.Annotations.DeepCopy()
		}
		out = append(out, v1alpha1.ToolStatus{
			Name:         t.Name,
			UpstreamName: t.UpstreamName,
			Title:        textcut.Chars(Clean(r, t.Title), MaxTitle),
			Description:  textcut.Chars(Clean(r, t.Description), MaxDescription),
			Risk:         t.Risk,
			Annotations:  ann,
			SchemaDigest: t.SchemaDigest,
			Flags:        slices.Clone(t.Flags),
			Arguments:    toolArguments(t.InputSchema, r, &budget),
		})
	}
	return out
}

// toolArguments are the top-level properties of a tool's input schema, for
// ToolPolicy lints, sorted, at most MaxToolArgs (a lint reads a full list
// as possibly cut). A lint reads none as not known, which is what a tool
// gets whose schema may admit others (catalog.Arguments), one with a name
// outside toolArgName (after cleaning: a secret in a name is not listed
// either), and every tool from the first that does not fit in what is
// left of the status's budget on.
func toolArguments(schema []byte, r *redact.Redactor, budget *int) []v1alpha1.ToolArgument {
	args, closed := catalog.Arguments(schema)
	if !closed {
		return nil
	}
	out := make([]v1alpha1.ToolArgument, 0, len(args))
	for _, a := range args {
		name := Clean(r, a.Name)
		if name != a.Name || !toolArgName.MatchString(name) {
			return nil
		}
		out = append(out, v1alpha1.ToolArgument{Name: name, Holds: a.Holds})
	}
	out = out[:min(len(out), MaxToolArgs)]
	if len(out) > *budget {
		*budget = 0
		return nil
	}
	*budget -= len(out)
	return out
}

// sortedByName is the catalog's tools in the order status lists them, so
// that the argument budget goes to the same tools whatever order the server
// listed them in.
func sortedByName(tools []catalog.Tool) []catalog.Tool {
	return slices.SortedFunc(slices.Values(tools), func(a, b catalog.Tool) int { return strings.Compare(a.Name, b.Name) })
}

// Prompts converts prompts (names and arguments), sorted by name. Names are
// cleaned with r and cut as descriptions are: a server may put anything in
// them, and both lists are keyed by name, so a name that cleaning or
// cutting makes equal to an earlier one is left out.
func Prompts(prompts []catalog.Prompt, r *redact.Redactor) []v1alpha1.PromptStatus {
	out := make([]v1alpha1.PromptStatus, 0, len(prompts))
	seen := map[string]bool{}
	for _, p := range prompts {
		ps := v1alpha1.PromptStatus{Name: textcut.Chars(Clean(r, p.Name), MaxPromptName)}
		if seen[ps.Name] {
			continue
		}
		seen[ps.Name] = true
		args := map[string]bool{}
		for _, a := range p.Arguments {
			if len(ps.Arguments) == MaxPromptArgs {
				break
			}
			name := textcut.Chars(Clean(r, a.Name), MaxPromptArgName)
			if args[name] {
				continue
			}
			args[name] = true
			ps.Arguments = append(ps.Arguments, v1alpha1.PromptArgument{Name: name, Required: a.Required})
		}
		out = append(out, ps)
	}
	slices.SortFunc(out, func(a, b v1alpha1.PromptStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ServerInfo converts the server's self-description, cleaned with r, and the
// version agreed.
func ServerInfo(info client.Implementation, protocolVersion string, r *redact.Redactor) *v1alpha1.ServerInfo {
	return &v1alpha1.ServerInfo{
		Name:            textcut.Chars(Clean(r, info.Name), MaxInfoField),
		Version:         textcut.Chars(Clean(r, info.Version), MaxInfoField),
		ProtocolVersion: protocolVersion,
	}
}

// Capabilities converts the advertised capabilities.
func Capabilities(c client.Capabilities) *v1alpha1.ServerCapabilities {
	return &v1alpha1.ServerCapabilities{
		Tools:              c.Tools,
		ToolsListChanged:   c.ToolsListChanged,
		Resources:          c.Resources,
		ResourcesSubscribe: c.ResourcesSubscribe,
		Prompts:            c.Prompts,
		Logging:            c.Logging,
		Completions:        c.Completions,
		Skills:             c.Skills,
	}
}

// Skills are skills as status lists them: name, URI and description
// cleaned and cut like prompts, file count, bytes and digest as probed.
func Skills(skills []catalog.Skill, r *redact.Redactor) []v1alpha1.SkillStatus {
	out := make([]v1alpha1.SkillStatus, 0, len(skills))
	seen := map[string]bool{}
	for _, s := range skills {
		ss := v1alpha1.SkillStatus{
			Name: textcut.Chars(Clean(r, s.Name), MaxPromptName), URI: textcut.Chars(Clean(r, s.URI), MaxSkillURI),
			Description: textcut.Chars(Clean(r, s.Description), MaxDescription),
			Files:       int32(len(s.Files)), Bytes: s.Bytes(), Digest: s.Digest,
		}
		if seen[ss.Name] {
			continue
		}
		seen[ss.Name] = true
		out = append(out, ss)
	}
	slices.SortFunc(out, func(a, b v1alpha1.SkillStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Clean is the text of a server published in status: without invisible
// characters (the catalog's findings record them and what they spelled) and
// redacted with r, the server's own Secret values and the credential shapes
// (the shapes alone when r is nil). Status is read by anyone who may read
// MCPServers, and a server may put anything in its descriptions, its API key
// included.
func Clean(r *redact.Redactor, s string) string {
	if r == nil {
		r = redact.Shapes()
	}
	s, _ = invisible.Strip(s)
	return r.String(s, nil)
}
