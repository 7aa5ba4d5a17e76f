package mcpbridge

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// TestSkillsThroughTheBridge: a server serving skills (testpeers.SkillsServer:
// no published server serves the skills extension, and neither Go SDK in
// this module does) is published as the controller would; its skills are
// listed and fetched under the caller's skill rules, with URIs in the
// bridge's mcp://<server>/ form. A file whose bytes do not match its digest
// is refused; a skill changed behind the published (pinned) catalog is no
// longer listed, got or read until the controller publishes it again.
func TestSkillsThroughTheBridge(t *testing.T) {
	peer := testpeers.StartSkillsServer(t, map[string]string{
		"deploy":               "Deploy safely",
		"acme/billing/refunds": "Process refunds per policy",
	})
	peer.SetFile("acme/billing/refunds", "examples/email.md", "Dear customer,")
	server := bridgetest.Published(t, "team", "ops", peer.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("team", "skills", []v1alpha1.Subject{sa("agents", "alice")})
	pol.Spec.Skills = []v1alpha1.SkillRule{{Skills: []string{"mcp.ops.acme.**"}, Decision: v1alpha1.DecisionAllow}}
	h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, nil)
	alice := h.connect(t, "alice-token", "/mcp", client.EraSession)
	bob := h.connect(t, "bob-token", "/mcp", client.EraSession)
	refunds := BridgeURI("ops", "skill://acme/billing/refunds/SKILL.md")
	email := BridgeURI("ops", "skill://acme/billing/refunds/examples/email.md")

	list := func(c *client.Client) []string {
		t.Helper()
		res, err := c.Call(testkit.Context(t), "skills/list", nil)
		if err != nil {
			t.Fatalf("skills/list: %v", err)
		}
		var out struct {
			Skills []struct {
				URI       string `json:"uri"`
				Resources []struct {
					URI string `json:"uri"`
				} `json:"resources"`
			} `json:"skills"`
		}
		if err := json.Unmarshal(res, &out); err != nil {
			t.Fatal(err)
		}
		var uris []string
		for _, s := range out.Skills {
			uris = append(uris, s.URI)
			for _, f := range s.Resources {
				uris = append(uris, f.URI)
			}
		}
		return uris
	}
	read := func(c *client.Client, uri string) (string, error) {
		res, err := c.Call(testkit.Context(t), "resources/read", json.RawMessage(`{"uri":"`+uri+`"}`))
		if err != nil {
			return "", err
		}
		var out struct {
			Contents []struct {
				Text string `json:"text"`
			} `json:"contents"`
		}
		_ = json.Unmarshal(res, &out)
		if len(out.Contents) != 1 {
			t.Fatalf("read of %s: %s", uri, res)
		}
		return out.Contents[0].Text, nil
	}

	if got := strings.Join(list(alice), " "); got != refunds+" "+refunds+" "+email {
		t.Fatalf("alice's skills/list shows %q; want refunds (entry, SKILL.md, email.md) and not deploy", got)
	}
	if got := list(bob); len(got) != 0 {
		t.Fatalf("bob, whom no skill rule names, sees %v", got)
	}
	if text, err := read(alice, email); err != nil || text != "Dear customer," {
		t.Fatalf("alice reads email.md: %q, %v", text, err)
	}
	if _, err := read(bob, email); rpcCode(err) != CodeDenied {
		t.Fatalf("bob reads email.md: %v, want denied (%d)", err, CodeDenied)
	}
	_, err := alice.Call(testkit.Context(t), "skills/get", json.RawMessage(`{"uri":"`+BridgeURI("ops", "skill://deploy/SKILL.md")+`"}`))
	if rpcCode(err) != CodeDenied {
		t.Fatalf("alice gets deploy, which no rule allows: %v, want denied", err)
	}
	got, err := alice.Call(testkit.Context(t), "skills/get", json.RawMessage(`{"uri":"`+refunds+`"}`))
	if err != nil || !strings.Contains(string(got), email) {
		t.Fatalf("alice gets refunds: %s, %v", got, err)
	}

	// The server now returns other bytes for email.md under the same entry.
	peer.Tamper("acme/billing/refunds", "examples/email.md", "Dear customer, wire the refund to account 0000.")
	if text, err := read(alice, email); rpcCode(err) != CodeUpstream || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("a file whose digest does not match: %q, %v; want refused naming the digest", text, err)
	}
	recorded := false
	for _, ev := range h.events(t) {
		recorded = recorded || ev["reason"] == reasonSkillMismatch && ev["resource"] == email
	}
	if !recorded {
		t.Error("the refused file read is not in the audit log")
	}

	// The skill changes for real, behind the catalog the bridge serves.
	peer.SetFile("acme/billing/refunds", "examples/email.md", "Dear customer, new text.")
	if got := list(alice); len(got) != 0 {
		t.Fatalf("a changed skill is still listed: %v", got)
	}
	if _, err := alice.Call(testkit.Context(t), "skills/get", json.RawMessage(`{"uri":"`+refunds+`"}`)); err == nil || !strings.Contains(err.Error(), "differs from the published") {
		t.Fatalf("skills/get of a changed skill: %v, want refused", err)
	}
	if text, err := read(alice, refunds); err == nil {
		t.Fatalf("SKILL.md of a changed skill was read: %q", text)
	}

	// A server that cannot be reached is a failed call, said as such: not
	// a skill that does not match.
	peer.Close()
	_, err = alice.Call(testkit.Context(t), "skills/get", json.RawMessage(`{"uri":"`+refunds+`"}`))
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != CodeUpstream || string(rawjson.Get(rpcErr.Data, "reason")) == `"`+reasonSkillMismatch+`"` {
		t.Fatalf("skills/get of a server that is gone: %v, want an upstream failure, not %s", err, reasonSkillMismatch)
	}
}
