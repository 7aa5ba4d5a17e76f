package mcpbridge

import (
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/artifact"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// TestArtifactReadsAuditedAndStoreBounded (issue 13, item 8), in raw HTTP:
// a resources/read of an artifact:// writes mcp.resource.requested and
// mcp.resource.fetched like any read (a refused one, the request), and a
// full store fails the capped call with a reason instead of growing.
func TestArtifactReadsAuditedAndStoreBounded(t *testing.T) {
	up := testpeers.GoEverything(t, true)
	server := bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "callers", []v1alpha1.Subject{sa("agents", "alice"), sa("agents", "bob")}, rule("allow", "mcp.everything.*"))
	var store *artifact.Store
	h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, func(c *Config) {
		var err error
		if store, err = artifact.New(t.TempDir(), artifact.Limits{MaxBytes: 300}); err != nil {
			t.Fatal(err)
		}
		c.Pipeline = &output.Pipeline{Store: store, MaxResultBytes: 20, PreviewBytes: 8}
		c.Artifacts = store
	})
	call := func(tool string) string {
		return string(statelessPost(t, h.url, "alice-token", "tools/call", `"name":"mcp.everything.`+tool+`","arguments":{}`))
	}
	res := call("test_simple_text")
	i := strings.Index(res, "artifact://")
	if i < 0 {
		t.Fatalf("no artifact for a result over the cap: %s", res)
	}
	uri := res[i : i+len("artifact://")+64]

	read := string(statelessPost(t, h.url, "alice-token", "resources/read", `"uri":"`+uri+`"`))
	if !strings.Contains(read, "This is a simple text response for testing") {
		t.Fatalf("the owner's read: %s", read)
	}
	if bobs := string(statelessPost(t, h.url, "bob-token", "resources/read", `"uri":"`+uri+`"`)); !strings.Contains(bobs, `"code":-32002`) {
		t.Fatalf("another caller's read: %s, want -32002", bobs)
	}
	var got []string
	for _, ev := range h.events(t) {
		if ev["uri"] == uri {
			got = append(got, ev["type"].(string)+" "+ev["subject"].(string))
			if ev["type"] == "mcp.resource.fetched" && (ev["contentHash"] != "sha256:"+strings.TrimPrefix(uri, "artifact://") || ev["sizeBytes"].(float64) <= 20) {
				t.Errorf("fetched event %v: want the artifact's hash and size", ev)
			}
		}
	}
	want := []string{
		"mcp.resource.requested system:serviceaccount:agents:alice", "mcp.resource.fetched system:serviceaccount:agents:alice",
		"mcp.resource.requested system:serviceaccount:agents:bob",
	}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("events of the artifact reads:\n got %q\nwant %q", got, want)
	}

	// The store holds at most 300 bytes: a second, different capped result
	// does not fit, and its call says so.
	before := store.Stats()
	full := call("test_image_content")
	if !strings.Contains(full, "artifact store is full") {
		t.Fatalf("a result that does not fit the store: %s", full)
	}
	if st := store.Stats(); st.Refused != before.Refused+1 || st.Bytes != before.Bytes {
		t.Fatalf("stats %+v after a refused result (before %+v)", st, before)
	}
}
