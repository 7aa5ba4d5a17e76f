package mcpbridge

import (
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
)

// shownItems are the items of a list answer (tools/list, resources/list,
// resources/templates/list, prompts/list) the caller is shown, as the agent
// gets them. view gives an item's server and the item in the agent's view
// (its name or URI as the agent uses it), or false for one the caller may
// not use, or one that has no such view. Each item then goes through
// listedItem. Items come grouped by server; a server counts as active only
// when the list shows something of it: a caller who sees none of a
// server's items keeps it no more awake than one that did not ask.
func shownItems[T any](b *Bridge, where string, items []T, view func(T) (*routes.Server, []byte, bool)) [][]byte {
	var out [][]byte
	last := ""
	for _, it := range items {
		s, doc, ok := view(it)
		if !ok {
			continue
		}
		clean, ok := b.listedItem(s, where, doc)
		if !ok {
			continue
		}
		out = append(out, clean)
		if s.Name != last {
			b.touchServed(s.Name)
			last = s.Name
		}
	}
	return out
}

// listedItem is one item of server s's list as the agent gets it: the one
// pass of the output pipeline over it, with the server's redactor (the
// credential shapes and the server's own Secret values) and invisible text
// removed, as from every listing. An item the pipeline refuses (not valid
// JSON, or two keys that escaping makes one) is left out (ok false): shown
// as it is, it would carry past the pipeline whatever a server chose to
// hide in it, a secret or invisible text.
func (b *Bridge) listedItem(s *routes.Server, where string, item []byte) ([]byte, bool) {
	clean, _, err := output.JSON(b.redactor(s), where, item)
	if err != nil {
		return nil, false
	}
	return clean, true
}
