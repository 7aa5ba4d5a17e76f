package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/mcp-operator/mcp-operator/internal/mcp/toolname"
)

// The skills extension's per-skill limits: a host must accept a skill up to
// them, and a skill over them is not guaranteed to load anywhere, so the
// catalog leaves it out rather than publish what it will not serve.
const (
	MaxSkillFiles = 512
	MaxSkillBytes = 16 << 20
	// maxSkillPathLen keeps mcp.<server>.<skill path> within the status field.
	maxSkillPathLen = 256
)

// Skill is one skill a server serves (an entry of skills/list or skills/get).
type Skill struct {
	// Name is the namespaced name mcp.<server>.<skill path> with the path's
	// '/' written '.' (acme/billing/refunds: mcp.<server>.acme.billing.refunds),
	// so policy globs match skills as they match tools. The path is unique
	// within a server where the frontmatter name need not be.
	Name string `json:"name"`
	// Path is the skill path of the URI (acme/billing/refunds); its last
	// segment is the frontmatter name.
	Path        string      `json:"path"`
	URI         string      `json:"uri"`
	Description string      `json:"description"`
	Files       []SkillFile `json:"files"`
	// Digest is "sha256:<hex>" of the canonical entry: URI, frontmatter and
	// every file's URI, digest and size. A changed file, an added or removed
	// one, or a changed frontmatter changes it.
	Digest string `json:"digest"`
}

// SkillFile is one file of a skill as its entry describes it.
type SkillFile struct {
	URI    string `json:"uri"`
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// Bytes is the sum of the files' sizes.
func (s Skill) Bytes() int64 {
	var n int64
	for _, f := range s.Files {
		n += f.Size
	}
	return n
}

// File is the entry of uri, if the skill lists it.
func (s Skill) File(uri string) (SkillFile, bool) {
	i := slices.IndexFunc(s.Files, func(f SkillFile) bool { return f.URI == uri })
	if i < 0 {
		return SkillFile{}, false
	}
	return s.Files[i], true
}

var (
	fileDigest   = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	skillSegment = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// SkillPath is the skill path of the URI of a skill's SKILL.md
// (skill://acme/billing/refunds/SKILL.md: acme/billing/refunds), or why it
// has none a name can be made of.
func SkillPath(uri string) (string, error) {
	root, ok := strings.CutSuffix(uri, "/SKILL.md")
	scheme, path, hasScheme := strings.Cut(root, "://")
	if !ok || !hasScheme || scheme == "" || path == "" {
		return "", fmt.Errorf("skill uri %q is not <scheme>://<skill path>/SKILL.md", uri)
	}
	if len(path) > maxSkillPathLen {
		return "", fmt.Errorf("skill path must be at most %d bytes", maxSkillPathLen)
	}
	for _, seg := range strings.Split(path, "/") {
		if !skillSegment.MatchString(seg) {
			// A '.' in a segment would make two paths share a name.
			return "", fmt.Errorf("skill path segment %q cannot be part of a name: use letters, digits, '_' and '-'", seg)
		}
	}
	return path, nil
}

// SkillName is the namespaced name of a skill at path on server.
func SkillName(server, path string) string {
	return toolname.Namespaced(server, strings.ReplaceAll(path, "/", "."))
}

// ParseSkill reads one skill entry for server. An entry the bridge could
// not verify is an error: one with "dynamic" resources (no digests to bind
// to), one without SKILL.md in its manifest, one over the limits.
func ParseSkill(server string, raw json.RawMessage) (Skill, error) {
	var e struct {
		URI         string                     `json:"uri"`
		Frontmatter map[string]json.RawMessage `json:"frontmatter"`
		Resources   json.RawMessage            `json:"resources"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return Skill{}, fmt.Errorf("malformed skill: %w", err)
	}
	path, err := SkillPath(e.URI)
	if err != nil {
		return Skill{}, err
	}
	root := strings.TrimSuffix(e.URI, "/SKILL.md")
	var name, description string
	if json.Unmarshal(e.Frontmatter["name"], &name) != nil || name == "" {
		return Skill{}, errors.New("skill frontmatter has no name")
	}
	if json.Unmarshal(e.Frontmatter["description"], &description) != nil || description == "" {
		return Skill{}, errors.New("skill frontmatter has no description")
	}
	if path != name && !strings.HasSuffix(path, "/"+name) {
		return Skill{}, fmt.Errorf("skill path %q does not end in its name %q", path, name)
	}
	if string(e.Resources) == `"dynamic"` {
		return Skill{}, errors.New("skill resources are \"dynamic\": no digests to verify its files against")
	}
	var files []SkillFile
	if err := json.Unmarshal(e.Resources, &files); err != nil || files == nil {
		return Skill{}, errors.New("skill resources are neither a list of files nor \"dynamic\"")
	}
	if len(files) > MaxSkillFiles {
		return Skill{}, fmt.Errorf("skill has %d files, over the limit of %d", len(files), MaxSkillFiles)
	}
	s := Skill{Name: SkillName(server, path), Path: path, URI: e.URI, Description: description, Files: files}
	seen := map[string]bool{}
	for _, f := range files {
		switch {
		case f.URI != e.URI && !strings.HasPrefix(f.URI, root+"/"):
			return Skill{}, fmt.Errorf("skill file %q is outside the skill", f.URI)
		case seen[f.URI]:
			return Skill{}, fmt.Errorf("skill file %q is listed twice", f.URI)
		case !fileDigest.MatchString(f.Digest):
			return Skill{}, fmt.Errorf("skill file %q: digest is not sha256:<64 lowercase hex>", f.URI)
		case f.Size < 0:
			return Skill{}, fmt.Errorf("skill file %q: negative size", f.URI)
		}
		seen[f.URI] = true
	}
	if !seen[e.URI] {
		return Skill{}, errors.New("skill resources do not list its SKILL.md")
	}
	if n := s.Bytes(); n > MaxSkillBytes {
		return Skill{}, fmt.Errorf("skill files total %d bytes, over the limit of %d", n, MaxSkillBytes)
	}
	slices.SortFunc(s.Files, func(a, b SkillFile) int { return strings.Compare(a.URI, b.URI) })
	s.Digest = skillDigest(e.URI, e.Frontmatter, s.Files)
	return s, nil
}

func skillDigest(uri string, frontmatter map[string]json.RawMessage, files []SkillFile) string {
	return digestOf(struct {
		URI         string                     `json:"uri"`
		Frontmatter map[string]json.RawMessage `json:"frontmatter"`
		Files       []SkillFile                `json:"files"`
	}{uri, frontmatter, files})
}

// Skills reads skills/list items: sorted by name; an entry ParseSkill
// refuses, or a second entry for the same URI, is left out with a reason.
func Skills(server string, items []json.RawMessage) ([]Skill, []Rejected) {
	skills := []Skill{}
	var rejected []Rejected
	seen := map[string]bool{}
	for i, raw := range items {
		s, err := ParseSkill(server, raw)
		if err != nil {
			var head struct {
				URI string `json:"uri"`
			}
			_ = json.Unmarshal(raw, &head)
			rejected = append(rejected, Rejected{Index: i, UpstreamName: head.URI, Reason: err.Error()})
			continue
		}
		if seen[s.Name] {
			rejected = append(rejected, Rejected{Index: i, UpstreamName: s.URI, Reason: "duplicate skill"})
			continue
		}
		seen[s.Name] = true
		skills = append(skills, s)
	}
	slices.SortFunc(skills, func(a, b Skill) int { return strings.Compare(a.Name, b.Name) })
	return skills, rejected
}

// WithSkills is the catalog digest covering skills too: toolsDigest itself
// when there are none (so a pinned digest of a server without skills stays
// valid), else the digest of the tools' digest and every skill's name and
// digest. Pinning a catalog therefore pins its skills.
func WithSkills(toolsDigest string, skills []Skill) string {
	if len(skills) == 0 {
		return toolsDigest
	}
	type entry struct {
		Name   string `json:"name"`
		Digest string `json:"digest"`
	}
	entries := make([]entry, len(skills))
	for i, s := range skills {
		entries[i] = entry{s.Name, s.Digest}
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.Name, b.Name) })
	return digestOf(struct {
		Tools  string  `json:"tools"`
		Skills []entry `json:"skills"`
	}{toolsDigest, entries})
}
