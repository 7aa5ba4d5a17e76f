package mcpbridge

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/redact"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
	"github.com/mcp-operator/mcp-operator/internal/tokencorpus"
)

// TestBareTokensAndEncodedSecretsRedacted: a real server (server-everything's
// echo tool, which prints what it is sent) prints one token of each kind of
// internal/redact's bare-token corpus, alone on its line with no name beside
// it, and each encoding of its own Secret value (hex, upper case, base64,
// URL and JSON escapes). Neither the agent's answer nor the audit log (the
// call's arguments, in full, and the result's preview) holds any of them
// intact.
func TestBareTokensAndEncodedSecretsRedacted(t *testing.T) {
	const value = `s3rver/Own"Secret+välue`
	b := []byte(value)
	jsonEscaped, _ := json.Marshal(value)
	said := map[string]string{ // what the server prints, by what it is
		"secret as is":               value,
		"secret upper case":          strings.ToUpper(value),
		"secret hex":                 hex.EncodeToString(b),
		"secret HEX":                 strings.ToUpper(hex.EncodeToString(b)),
		"secret base64":              base64.StdEncoding.EncodeToString(b),
		"secret base64url raw":       base64.RawURLEncoding.EncodeToString(b),
		"secret query-escaped":       url.QueryEscape(value),
		"secret path-escaped":        url.PathEscape(value),
		"secret JSON-escaped":        string(jsonEscaped[1 : len(jsonEscaped)-1]),
		"secret JSON-escaped, ASCII": `s3rver/Own\"Secret+v\u00e4lue`,
	}
	corpus, err := tokencorpus.Load("../redact/testdata/bare-tokens.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range corpus {
		if _, ok := said[e.Kind]; !ok {
			said[e.Kind] = e.Token
		}
	}
	if len(said) < 60+10 {
		t.Fatalf("%d texts to print, want a token of each of at least 60 kinds and the secret's 10 forms", len(said))
	}

	red := redact.New(value)
	up := testpeers.NodeEverything(t)
	server := bridgetest.Published(t, "redact", "everything", up.URL, v1alpha1.ToolsSpec{})
	pol := toolPolicy("redact", "alice", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.echo"))
	h := newHarness(t, []v1alpha1.MCPServer{server}, []v1alpha1.ToolPolicy{pol}, func(c *Config) {
		c.Redactor = func(string, string) *redact.Redactor { return red }
	})
	h.audit.SetRedactor(red) // as the bridge's own writer gets every server's values
	c := h.connect(t, "alice-token", "/mcp", client.EraSession)

	// leaked says whether text holds s as it is or as JSON writes it.
	leaked := func(text, s string) bool {
		j, _ := json.Marshal(s)
		return strings.Contains(text, s) || strings.Contains(text, string(j[1:len(j)-1]))
	}
	for what, s := range said {
		args, _ := json.Marshal(map[string]string{"message": "config:\n" + s + "\nend"})
		res, err := c.CallTool(testkit.Context(t), "mcp.everything.echo", args)
		if err != nil {
			t.Fatalf("%s: echo: %v", what, err)
		}
		text := firstText(t, res)
		if leaked(string(res), s) || !strings.Contains(text, "[REDACTED:") || !strings.HasSuffix(text, "\nend") {
			t.Errorf("%s reached the agent as %s", what, res)
		}
	}
	h.events(t) // flushes
	log := h.sink.String()
	for what, s := range said {
		if leaked(log, s) {
			t.Errorf("the audit log holds the %s", what)
		}
	}
	if n := strings.Count(log, `"mcp.everything.echo"`); n < len(said) {
		t.Errorf("the audit log names the echo tool %d times for %d calls: the calls were not recorded", n, len(said))
	}
}
