package oauth

import "testing"

func TestResourceAccepts(t *testing.T) {
	r, err := NewResource("https://Bridge.Example.com:443/", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.URL != "https://bridge.example.com" {
		t.Fatalf("canonical URL %q", r.URL)
	}
	for aud, want := range map[string]bool{
		"https://bridge.example.com":                  true,
		"https://bridge.example.com/":                 true,
		"HTTPS://BRIDGE.EXAMPLE.COM/mcp":              true,
		"https://bridge.example.com/mcp/search":       true,
		"https://bridge.example.com/servers/gh/mcp":   true,
		"https://bridge.example.com/servers/gh/mcp/":  true,
		"https://bridge.example.com/servers/a/b/mcp":  false,
		"https://bridge.example.com/servers//mcp":     false,
		"https://bridge.example.com/admin":            false,
		"https://bridge.example.com/mcp?x=1":          false,
		"https://bridge.example.com:8443/mcp":         false,
		"http://bridge.example.com/mcp":               false,
		"https://bridge.example.com.evil.example/mcp": false,
		"https://bridge.example.commcp":               false,
		"mcp-operator":                                false,
		"":                                            false,
	} {
		if got := r.Accepts(aud); got != want {
			t.Errorf("Accepts(%q) = %v, want %v", aud, got, want)
		}
	}
}

func TestChallenge(t *testing.T) {
	r, _ := NewResource("https://bridge.example.com", nil, []string{"a", "b"})
	got := r.Challenge("/mcp", "insufficient_scope", `needs "b"`+"\n")
	want := `Bearer resource_metadata="https://bridge.example.com/.well-known/oauth-protected-resource/mcp", scope="a b", error="insufficient_scope", error_description="needs 'b''"`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if _, err := NewResource("bridge.example.com", nil, nil); err == nil {
		t.Fatal("a public URL without a scheme was accepted")
	}
}
