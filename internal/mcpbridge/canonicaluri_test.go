package mcpbridge

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// TestResourceURIsDecidedCanonical tries other spellings of a denied
// resource URI, in raw HTTP against the go-sdk everything-server, whose
// template resource test://template/{id}/data answers with the URI it was sent. Rules allow
// test://template/** and deny test://template/secret/**: every other
// spelling of the denied URI is denied, and what reaches the server is the
// URI that was decided, not the agent's spelling.
func TestResourceURIsDecidedCanonical(t *testing.T) {
	up := testpeers.GoEverything(t, true)
	server := bridgetest.Published(t, "tools", "files", up.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice")})
	pol.Spec.Resources = []v1alpha1.ResourceRule{
		{Servers: []string{"files"}, URIs: []string{"test://template/**"}, Decision: "allow"},
		{Servers: []string{"files"}, URIs: []string{"test://template/secret/**"}, Decision: "deny"},
	}
	h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, nil)

	type answer struct {
		Result struct {
			Contents []struct {
				URI  string `json:"uri"`
				Text string `json:"text"`
			} `json:"contents"`
		} `json:"result"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	read := func(uri string) answer {
		t.Helper()
		var a answer
		data := statelessPost(t, h.url, "alice-token", "resources/read", `"uri":`+jsonString("mcp://files/"+uri))
		if err := json.Unmarshal(data, &a); err != nil {
			t.Fatalf("%s: %v: %s", uri, err, data)
		}
		return a
	}

	for _, spelling := range []string{
		"test://template/secret/data",
		"test://template/./secret/data",
		"test://template//secret/data",
		"test://template/%73ecret/data",
		"test://template/public/../secret/data",
		"test://template/public/%2e%2e/secret/data",
		"TEST://template/secret/data",
		"test://TEMPLATE/secret/data",
	} {
		if a := read(spelling); a.Error == nil || a.Error.Code != CodeDenied {
			t.Errorf("%s: %+v, want denied (%d): it names the denied test://template/secret/data", spelling, a, CodeDenied)
		}
	}
	for _, spelling := range []string{"test://template/..%2Fsecret/data", "test://template/a b/data", `test://template\secret/data`} {
		if a := read(spelling); a.Error == nil || a.Error.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("%s: %+v, want refused (-32602): it has no canonical form", spelling, a)
		}
	}

	a := read("test://template/%61b%63/./data")
	if a.Error != nil || len(a.Result.Contents) != 1 || a.Result.Contents[0].URI != "mcp://files/test://template/abc/data" ||
		!strings.Contains(a.Result.Contents[0].Text, "abc") {
		t.Fatalf("an allowed read in another spelling must reach the server as the canonical URI it was decided as: %+v", a)
	}

	var requested []string
	for _, ev := range h.events(t) {
		if ev["type"] == "mcp.resource.requested" {
			requested = append(requested, ev["uri"].(string))
		}
	}
	if strings.Join(requested, " ") != "test://template/abc/data" {
		t.Errorf("mcp.resource.requested uris %q, want only the canonical test://template/abc/data", requested)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestCompletionURIsDecidedCanonical: a completion of a resource template's
// argument is decided as a read of its URI, in the canonical form, and that
// form is what reaches the server. Deciding and forwarding the raw ref.uri
// would let test://template//secret/… escape a rule denying
// test://template/secret/**.
func TestCompletionURIsDecidedCanonical(t *testing.T) {
	up := testpeers.GoEverything(t, true)
	tapURL, tp := newTap(t, up.URL)
	server := bridgetest.Published(t, "tools", "files", tapURL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("tools", "alice", []v1alpha1.Subject{sa("agents", "alice")})
	pol.Spec.Resources = []v1alpha1.ResourceRule{
		{Servers: []string{"files"}, URIs: []string{"test://template/**"}, Decision: "allow"},
		{Servers: []string{"files"}, URIs: []string{"test://template/secret/**"}, Decision: "deny"},
	}
	h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, nil)
	complete := func(uri string) *jsonrpc.Message {
		t.Helper()
		params := `"ref":{"type":"ref/resource","uri":` + jsonString(uri) + `},"argument":{"name":"id","value":"a"}`
		var m jsonrpc.Message
		if data := statelessPost(t, h.url+"/servers/files", "alice-token", "completion/complete", params); json.Unmarshal(data, &m) != nil {
			t.Fatalf("%s: not JSON-RPC: %s", uri, data)
		}
		return &m
	}
	for _, spelling := range []string{
		"test://template/secret/{id}",
		"test://template//secret/{id}",
		"test://template/./secret/{id}",
		"test://template/%73ecret/{id}",
		"TEST://template/secret/{id}",
	} {
		if m := complete(spelling); m.Error == nil || m.Error.Code != CodeDenied {
			t.Errorf("completion for %s: %+v, want denied (%d)", spelling, m, CodeDenied)
		}
	}
	if m := complete(`test://template\secret/{id}`); m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("a URI with no canonical form: %+v, want refused (-32602)", m)
	}
	complete("test://template/./{id}//data")
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var reached []string
	for _, c := range tp.calls {
		if strings.HasPrefix(c, "completion/complete ") {
			reached = append(reached, strings.TrimPrefix(c, "completion/complete "))
		}
	}
	if strings.Join(reached, " ") != "test://template/{id}/data" {
		t.Fatalf("completions reached the server for %q, want only the canonical test://template/{id}/data", reached)
	}
}
