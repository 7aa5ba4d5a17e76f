package catalog

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mcp-operator/mcp-operator/internal/mcp/toolname"
)

// Prompt is one prompt a server offers.
type Prompt struct {
	// Name is the namespaced name mcp.<server>.<prompt>.
	Name         string           `json:"name"`
	UpstreamName string           `json:"upstreamName"`
	Title        string           `json:"title,omitempty"`
	Description  string           `json:"description,omitempty"`
	Arguments    []PromptArgument `json:"arguments"`
}

// PromptArgument is one declared argument of a prompt.
type PromptArgument struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required"`
}

// Resource is one resource a server lists.
type Resource struct {
	URI         string `json:"uri"`
	Name        string `json:"name,omitempty"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType,omitempty"`
	Size        *int64 `json:"size,omitempty"`
}

// maxPromptNameLen keeps mcp.<server>.<prompt> within the status field.
const maxPromptNameLen = 256

// Prompts reads prompts/list items: sorted by name; malformed or duplicated
// prompts are left out with a reason, as tools are.
func Prompts(server string, items []json.RawMessage) ([]Prompt, []Rejected) {
	prompts := []Prompt{}
	var rejected []Rejected
	seen := map[string]int{}
	for i, raw := range items {
		var p struct {
			Name        string `json:"name"`
			Title       string `json:"title"`
			Description string `json:"description"`
			Arguments   []struct {
				Name        string `json:"name"`
				Description string `json:"description"`
				Required    bool   `json:"required"`
			} `json:"arguments"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			rejected = append(rejected, Rejected{Index: i, Reason: "malformed prompt: " + err.Error()})
			continue
		}
		if p.Name == "" || len(p.Name) > maxPromptNameLen {
			rejected = append(rejected, Rejected{Index: i, UpstreamName: p.Name, Reason: fmt.Sprintf("prompt name must be 1 to %d bytes", maxPromptNameLen)})
			continue
		}
		if _, dup := seen[p.Name]; dup {
			rejected = append(rejected, Rejected{Index: i, UpstreamName: p.Name, Reason: "duplicate prompt name"})
			continue
		}
		seen[p.Name] = i
		out := Prompt{Name: toolname.Namespaced(server, p.Name), UpstreamName: p.Name, Title: p.Title, Description: p.Description, Arguments: []PromptArgument{}}
		argSeen := map[string]bool{}
		for _, a := range p.Arguments {
			if a.Name == "" || argSeen[a.Name] {
				continue // a nameless or repeated argument cannot be passed anyway
			}
			argSeen[a.Name] = true
			out.Arguments = append(out.Arguments, PromptArgument{Name: a.Name, Description: a.Description, Required: a.Required})
		}
		prompts = append(prompts, out)
	}
	slices.SortFunc(prompts, func(a, b Prompt) int { return strings.Compare(a.Name, b.Name) })
	return prompts, rejected
}

// Resources reads resources/list items, sorted by URI; an item without a
// URI is left out.
func Resources(items []json.RawMessage) ([]Resource, []Rejected) {
	resources := []Resource{}
	var rejected []Rejected
	for i, raw := range items {
		var r Resource
		if err := json.Unmarshal(raw, &r); err != nil {
			rejected = append(rejected, Rejected{Index: i, Reason: "malformed resource: " + err.Error()})
			continue
		}
		if r.URI == "" {
			rejected = append(rejected, Rejected{Index: i, UpstreamName: r.Name, Reason: "resource without a uri"})
			continue
		}
		resources = append(resources, r)
	}
	slices.SortFunc(resources, func(a, b Resource) int { return strings.Compare(a.URI, b.URI) })
	return resources, rejected
}
