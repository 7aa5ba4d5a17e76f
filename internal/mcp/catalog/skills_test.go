package catalog

import (
	"strings"
	"testing"
)

const okDigest = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

func TestParseSkill(t *testing.T) {
	for _, tc := range []struct {
		name, entry, err string
	}{
		{"valid", `{"uri":"skill://a/b/SKILL.md","frontmatter":{"name":"b","description":"d"},"resources":[{"uri":"skill://a/b/SKILL.md","digest":"` + okDigest + `","size":3}]}`, ""},
		{"dynamic", `{"uri":"skill://b/SKILL.md","frontmatter":{"name":"b","description":"d"},"resources":"dynamic"}`, "dynamic"},
		{"no resources", `{"uri":"skill://b/SKILL.md","frontmatter":{"name":"b","description":"d"}}`, "neither"},
		{"name differs from path", `{"uri":"skill://a/c/SKILL.md","frontmatter":{"name":"b","description":"d"},"resources":[]}`, "does not end in its name"},
		{"no SKILL.md suffix", `{"uri":"skill://b/README.md","frontmatter":{"name":"b","description":"d"},"resources":[]}`, "is not"},
		{"no description", `{"uri":"skill://b/SKILL.md","frontmatter":{"name":"b"},"resources":[]}`, "no description"},
		{"SKILL.md unlisted", `{"uri":"skill://b/SKILL.md","frontmatter":{"name":"b","description":"d"},"resources":[]}`, "do not list its SKILL.md"},
		{"file outside", `{"uri":"skill://b/SKILL.md","frontmatter":{"name":"b","description":"d"},"resources":[{"uri":"skill://c/x","digest":"` + okDigest + `","size":1}]}`, "outside the skill"},
		{"bad digest", `{"uri":"skill://b/SKILL.md","frontmatter":{"name":"b","description":"d"},"resources":[{"uri":"skill://b/SKILL.md","digest":"sha256:ABC","size":1}]}`, "digest is not"},
		{"over the byte limit", `{"uri":"skill://b/SKILL.md","frontmatter":{"name":"b","description":"d"},"resources":[{"uri":"skill://b/SKILL.md","digest":"` + okDigest + `","size":16777217}]}`, "over the limit"},
		{"dot in a path segment", `{"uri":"skill://v1.2/b/SKILL.md","frontmatter":{"name":"b","description":"d"},"resources":[]}`, "cannot be part of a name"},
		{"not an object", `[1]`, "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSkill("srv", []byte(tc.entry))
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("ParseSkill: %v", err)
			case tc.err == "" && (s.Name != "mcp.srv.a.b" || !strings.HasPrefix(s.Digest, "sha256:")):
				t.Fatalf("skill %+v", s)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			}
		})
	}
}

// TestWithSkills: a catalog without skills keeps its tools' digest (pins
// made before skills existed stay valid); with skills, the digest changes
// when any skill's does, and not with the order they were listed in.
func TestWithSkills(t *testing.T) {
	const tools = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	if got := WithSkills(tools, nil); got != tools {
		t.Errorf("no skills: %s, want the tools' digest", got)
	}
	a, b := Skill{Name: "mcp.s.a", Digest: "sha256:a"}, Skill{Name: "mcp.s.b", Digest: "sha256:b"}
	both := WithSkills(tools, []Skill{a, b})
	if both == tools || WithSkills(tools, []Skill{b, a}) != both {
		t.Errorf("digest with skills %s: must differ from the tools' and not depend on order", both)
	}
	b.Digest = "sha256:c"
	if WithSkills(tools, []Skill{a, b}) == both {
		t.Error("a changed skill left the digest unchanged")
	}
}
