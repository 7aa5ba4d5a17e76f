package mcpbridge

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// forwardedCases are a request of every method that reaches a server, as
// a caller sends it on /servers/everything/mcp (the go-sdk
// everything-server's names).
var forwardedCases = map[string]string{
	"tools/call":               `{"name":"test_simple_text","arguments":{}}`,
	"resources/read":           `{"uri":"test://static-text"}`,
	"prompts/get":              `{"name":"test_simple_prompt"}`,
	"resources/subscribe":      `{"uri":"` + watched + `"}`,
	"subscriptions/listen":     `{"notifications":{"resourceSubscriptions":["` + watched + `"]}}`,
	"completion/complete":      `{"ref":{"type":"ref/prompt","name":"test_prompt_with_arguments"},"argument":{"name":"arg1","value":"a"}}`,
	"tools/list":               `{}`,
	"resources/list":           `{}`,
	"resources/templates/list": `{}`,
	"prompts/list":             `{}`,
	"skills/list":              `{}`,
	"skills/get":               `{"uri":"skill://deploy/SKILL.md"}`,
}

// TestEveryForwardedMethodIsDecided: every method whose handling reaches a
// server (the bridge's own table, so a method added there is covered here) is
// decided for a caller no ToolPolicy names: a request is refused with
// CodeDenied, its decision recorded, and it never reaches the server; a list
// is empty.
func TestEveryForwardedMethodIsDecided(t *testing.T) {
	up := testpeers.GoEverything(t, false)
	tapURL, tp := newTap(t, up.URL)
	server := bridgetest.Published(t, "tools", "everything", tapURL, v1alpha1.ToolsSpec{})
	h := newHarness(t, []v1alpha1.MCPServer{server}, nil, nil)
	session := h.connect(t, "bob-token", "/servers/everything/mcp", client.EraSession)
	stateless := h.connect(t, "bob-token", "/servers/everything/mcp", client.EraStateless)

	for name, m := range methods {
		if m.reach == bridgeOnly {
			continue
		}
		params, ok := forwardedCases[name]
		if !ok {
			t.Errorf("%s reaches a server: add a request of it to forwardedCases", name)
			continue
		}
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			before := len(h.events(t))
			c := session
			if name == "subscriptions/listen" {
				c = stateless
			}
			res, err := callOrListen(c, name, json.RawMessage(params))
			if m.reach == decidedPerItem {
				if err != nil || !emptyList(res) {
					t.Fatalf("%s for a caller with no policy: %s %v, want an empty list", name, res, err)
				}
				return
			}
			if name == "subscriptions/listen" {
				if err != nil || !strings.Contains(string(res), `"resourceSubscriptions":[]`) {
					t.Fatalf("subscriptions/listen for a caller with no policy acknowledged %s (%v), want none", res, err)
				}
			} else if rpcCode(err) != CodeDenied {
				t.Fatalf("%s for a caller with no policy: %s %v, want error %d", name, res, err, CodeDenied)
			}
			var types []string
			for _, ev := range h.events(t)[before:] {
				types = append(types, ev["type"].(string)+"/"+str(ev["decision"]))
			}
			if want := []string{"permission.requested/", "permission.resolved/deny"}; len(types) < 2 || !slices.Equal(types[:2], want) {
				t.Fatalf("%s recorded %q, want %q", name, types, want)
			}
			tp.mu.Lock()
			defer tp.mu.Unlock()
			for _, call := range tp.calls {
				if strings.HasPrefix(call, name+" ") {
					t.Fatalf("a denied %s reached the server", name)
				}
			}
		})
	}
}

// callOrListen sends one request; for subscriptions/listen it returns the
// acknowledgement and closes the stream.
func callOrListen(c *client.Client, method string, params json.RawMessage) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if method != "subscriptions/listen" {
		return c.Call(ctx, method, params)
	}
	ack := make(chan json.RawMessage, 1)
	ctx = streamhttp.WithCallNotifications(ctx, func(m *jsonrpc.Message) {
		if m.Method == "notifications/subscriptions/acknowledged" {
			ack <- m.Params
		}
	})
	done := make(chan error, 1)
	go func() { _, err := c.Call(ctx, method, params); done <- err }()
	select {
	case a := <-ack:
		cancel()
		<-done
		return a, nil
	case err := <-done:
		// A stream that ends at once (it acknowledged nothing) carried its
		// acknowledgement before its answer.
		select {
		case a := <-ack:
			return a, err
		default:
			return nil, err
		}
	}
}

// emptyList: a list result whose one array member is empty.
func emptyList(res json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(res, &m) != nil {
		return false
	}
	for k, v := range m {
		if k != "nextCursor" && k != "_meta" && k != "resultType" && string(v) != "[]" {
			return false
		}
	}
	return len(m) > 0
}
