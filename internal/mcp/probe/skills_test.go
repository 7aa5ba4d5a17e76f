package probe_test

import (
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/mcp/probe"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// TestProbeFindsSkills: the probe lists the skills of a server that
// declares the skills extension (testpeers.SkillsServer: no published
// server here serves it), namespaced by skill path, with each file's
// digest; the catalog digest covers them, so a changed skill file changes
// it and a pinned catalog no longer matches.
func TestProbeFindsSkills(t *testing.T) {
	peer := testpeers.StartSkillsServer(t, map[string]string{
		"git-workflow":         "Follow the team's Git conventions",
		"acme/billing/refunds": "Process refunds per policy",
	})
	peer.SetFile("acme/billing/refunds", "examples/email.md", "Dear customer,")
	target := probe.Target{HTTP: &streamhttp.Options{URL: peer.URL}}
	res := runProbe(t, target, probe.Options{Server: "skills"})
	if !res.Capabilities.Skills {
		t.Fatal("the probe did not see the skills extension declared")
	}
	if len(res.Skills) != 2 || len(res.RejectedSkills) != 0 {
		t.Fatalf("skills %+v, rejected %+v; want 2 and none", res.Skills, res.RejectedSkills)
	}
	refunds := res.Skills[0]
	if refunds.Name != "mcp.skills.acme.billing.refunds" || refunds.URI != "skill://acme/billing/refunds/SKILL.md" || refunds.Description != "Process refunds per policy" {
		t.Errorf("first skill %+v", refunds)
	}
	email, ok := refunds.File("skill://acme/billing/refunds/examples/email.md")
	if !ok || email.Digest != testpeers.Digest("Dear customer,") || email.Size != int64(len("Dear customer,")) {
		t.Errorf("examples/email.md entry %+v (found %v)", email, ok)
	}
	if res.Skills[1].Name != "mcp.skills.git-workflow" || len(res.Skills[1].Files) != 1 {
		t.Errorf("second skill %+v", res.Skills[1])
	}
	if res.Catalog.Digest == "" || len(res.Catalog.Tools) != 0 {
		t.Fatalf("catalog %+v", res.Catalog)
	}

	peer.SetFile("acme/billing/refunds", "examples/email.md", "Dear customer, changed")
	again := runProbe(t, target, probe.Options{Server: "skills"})
	if again.Catalog.Digest == res.Catalog.Digest {
		t.Errorf("a changed skill file left the catalog digest %s unchanged", res.Catalog.Digest)
	}
	if again.Skills[0].Digest == refunds.Digest || again.Skills[1].Digest != res.Skills[1].Digest {
		t.Errorf("skill digests: refunds %s -> %s (want changed), git-workflow %s -> %s (want same)",
			refunds.Digest, again.Skills[0].Digest, res.Skills[1].Digest, again.Skills[1].Digest)
	}
}
