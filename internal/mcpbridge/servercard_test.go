package mcpbridge

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// TestServerCards: the aggregate endpoints' cards are public and name no
// server and no build version; a server's card is served only to a caller
// that may call one of its tools, and to anyone else is as absent as an
// unknown server's. A card's URL is the path alone unless the bridge is
// given its public URL: not built from the request's Host and scheme.
func TestServerCards(t *testing.T) {
	up := testpeers.GoEverything(t, false)
	h := newHarness(t, []v1alpha1.MCPServer{bridgetest.Published(t, "tools", "everything", up.URL, v1alpha1.ToolsSpec{})},
		[]v1alpha1.ToolPolicy{toolPolicy("tools", "agents", []v1alpha1.Subject{sa("agents", "alice")}, rule("allow", "mcp.everything.*"))}, nil)
	get := func(path, token string) (int, http.Header, serverCard, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(testkit.Context(t), http.MethodGet, h.url+path, nil)
		req.Header.Set("Accept", serverCardType)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var card serverCard
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(body, &card); err != nil {
				t.Fatalf("%s: the card is not JSON: %v: %s", path, err, body)
			}
		}
		return resp.StatusCode, resp.Header, card, string(body)
	}

	for _, path := range []string{"/mcp", SearchPath} {
		status, header, card, body := get(path+"/server-card", "")
		switch {
		case status != http.StatusOK || header.Get("Content-Type") != serverCardType || header.Get("Access-Control-Allow-Origin") != "*":
			t.Errorf("%s/server-card: %d %v, want 200 %s with CORS", path, status, header, serverCardType)
		case card.Schema != serverCardSchema || card.Name != serverCardName || card.Description == "":
			t.Errorf("%s/server-card: %s", path, body)
		case len(card.Remotes) != 1 || card.Remotes[0].URL != path || card.Remotes[0].SupportedProtocolVersions[0] != "2026-07-28":
			t.Errorf("%s/server-card names the wrong endpoint (want the path alone): %s", path, body)
		case card.Version != publicCardVersion || strings.Contains(body, h.b.cfg.Version):
			t.Errorf("a public card gives the build version: %s", body)
		case strings.Contains(body, "everything"):
			t.Errorf("a public card names a server: %s", body)
		}
	}

	if status, _, card, body := get("/servers/everything/mcp/server-card", "alice-token"); status != http.StatusOK ||
		card.Name != serverCardName+".everything" || card.Version != h.b.cfg.Version || len(card.Remotes) != 1 || card.Remotes[0].URL != "/servers/everything/mcp" {
		t.Errorf("alice's card of everything: %d %s", status, body)
	}
	if status, _, _, _ := get("/servers/everything/mcp/server-card", ""); status != http.StatusUnauthorized {
		t.Errorf("a server's card without a token: %d, want 401", status)
	}
	for _, path := range []string{"/servers/everything/mcp/server-card", "/servers/nothing/mcp/server-card"} {
		if status, _, _, body := get(path, "bob-token"); status != http.StatusNotFound {
			t.Errorf("bob, whom no policy names, reads %s: %d %s, want 404", path, status, body)
		}
	}
	req, _ := http.NewRequestWithContext(testkit.Context(t), http.MethodPost, h.url+"/mcp/server-card", strings.NewReader("{}"))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST to a card: %v %v, want 405", resp, err)
	} else {
		resp.Body.Close()
	}
}

// TestServerCardsGiveThePublicURL: with a public URL configured (the
// bridge behind an ingress that terminates TLS), a card's URL is under it,
// whatever scheme and Host the request reached the bridge with.
func TestServerCardsGiveThePublicURL(t *testing.T) {
	h := newHarness(t, nil, nil, func(c *Config) { c.PublicURL = "https://bridge.example.com/" })
	req, _ := http.NewRequestWithContext(testkit.Context(t), http.MethodGet, h.url+SearchPath+"/server-card", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var card serverCard
	if err := json.NewDecoder(resp.Body).Decode(&card); err != nil {
		t.Fatal(err)
	}
	if len(card.Remotes) != 1 || card.Remotes[0].URL != "https://bridge.example.com"+SearchPath {
		t.Errorf("the card's remotes: %+v, want https://bridge.example.com%s", card.Remotes, SearchPath)
	}
}
