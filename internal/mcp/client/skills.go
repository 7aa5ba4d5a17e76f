package client

import (
	"context"
	"encoding/json"
	"fmt"
)

// SkillsExtension is the identifier under which a server declares the
// skills extension in capabilities.extensions. The extension requires the
// resources capability too: skill files are read with resources/read.
const SkillsExtension = "io.modelcontextprotocol/skills"

// declares is whether an extensions object (raw, possibly absent) holds id
// with an object as its settings; an empty object declares support with no
// optional features, so only the key and the object's presence count.
func declares(extensions json.RawMessage, id string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(extensions, &m) != nil {
		return false
	}
	var settings map[string]json.RawMessage
	return json.Unmarshal(m[id], &settings) == nil && settings != nil
}

// ListSkills lists every skill entry (skills/list), raw.
func (c *Client) ListSkills(ctx context.Context, lim Limits) ([]json.RawMessage, error) {
	if !c.caps.Skills {
		return nil, fmt.Errorf("while listing skills: %w", ErrNotAdvertised)
	}
	return c.ListAll(ctx, "skills/list", "skills", lim)
}
