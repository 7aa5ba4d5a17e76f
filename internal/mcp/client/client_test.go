package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/internal/faultserver"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/stdio"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

func connectHTTP(t *testing.T, url string, opts client.Options) (*client.Client, *streamhttp.Conn) {
	t.Helper()
	conn, err := streamhttp.New(streamhttp.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, conn
}

func everything(t *testing.T, stateless bool) string {
	t.Helper()
	bin, err := testpeers.EverythingServer()
	if err != nil {
		t.Fatal(err)
	}
	port := testkit.FreePort(t)
	testpeers.Start(t, port, nil, bin, "-http=127.0.0.1:"+strconv.Itoa(port), "-stateless="+strconv.FormatBool(stateless))
	return "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp"
}

func textOf(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	if res.IsError {
		t.Fatalf("tool error: %s", raw)
	}
	var parts []string
	for _, c := range res.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

// Calls through both eras of the go-sdk everything-server, which checks the
// 2026 revision's headers (Mcp-Method, Mcp-Name, Mcp-Param-*) strictly.
func TestCallToolBothEras(t *testing.T) {
	for _, stateless := range []bool{true, false} {
		t.Run("stateless="+strconv.FormatBool(stateless), func(t *testing.T) {
			c, conn := connectHTTP(t, everything(t, stateless), client.Options{})
			if got := conn.SessionID() != ""; got == stateless {
				t.Errorf("session id %q in the %s era", conn.SessionID(), c.Era())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := c.Ping(ctx); err != nil {
				t.Fatalf("ping: %v", err)
			}
			if _, err := c.ListTools(ctx, client.Limits{}); err != nil {
				t.Fatal(err)
			}
			raw, err := c.CallTool(ctx, "test_simple_text", nil)
			if err != nil {
				t.Fatal(err)
			}
			if txt := textOf(t, raw); !strings.Contains(txt, "simple text") {
				t.Errorf("test_simple_text said %q", txt)
			}
			// region is mirrored into Mcp-Param-Region; a non-ASCII value
			// goes base64-encoded.
			for _, region := range []string{"us-west1", "東京"} {
				args, _ := json.Marshal(map[string]any{"region": region, "level": 3})
				raw, err = c.CallTool(ctx, "test_x_mcp_header", args)
				if err != nil {
					t.Fatalf("test_x_mcp_header(%q): %v", region, err)
				}
				if txt := textOf(t, raw); stateless && !strings.Contains(txt, region) {
					t.Errorf("test_x_mcp_header(%q) said %q", region, txt)
				}
			}
			_, err = c.CallTool(ctx, "no_such_tool", nil)
			var rpcErr *jsonrpc.Error
			if err == nil || (!errors.As(err, &rpcErr) && !strings.Contains(err.Error(), "no_such_tool")) {
				t.Errorf("unknown tool: %v", err)
			}
		})
	}
}

func TestCallToolOverStdioKeepsResultsRaw(t *testing.T) {
	bin, err := testpeers.EverythingServer()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := stdio.Start(stdio.Options{Command: bin})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, conn, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := c.CallTool(ctx, "test_multiple_content_types", json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil || generic["content"] == nil {
		t.Fatalf("raw result %s", raw)
	}
	if c.Capabilities().Raw == nil || !strings.Contains(string(c.Capabilities().Raw), "listChanged") {
		t.Errorf("raw capabilities lost: %s", c.Capabilities().Raw)
	}
}

func TestForcedEras(t *testing.T) {
	url := everything(t, false)
	c, _ := connectHTTP(t, url, client.Options{Era: client.EraSession})
	if c.Era() != client.EraSession || c.DiscoverNote() != "" {
		t.Errorf("forced session era: %s, note %q (server/discover must not be tried)", c.Era(), c.DiscoverNote())
	}
	conn, _ := streamhttp.New(streamhttp.Options{URL: url})
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := client.Connect(ctx, conn, client.Options{Era: client.EraStateless})
	if err == nil || !strings.Contains(err.Error(), "stateless era was required") {
		t.Errorf("a session-only server accepted a required stateless era: %v", err)
	}
}

func TestUnadvertisedListsAreNotCalled(t *testing.T) {
	h := faultserver.NewHandler(faultserver.Healthy) // advertises tools only
	srv := httptest.NewServer(h)
	defer srv.Close()
	c, _ := connectHTTP(t, srv.URL, client.Options{DiscoverTimeout: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.ListPrompts(ctx, client.Limits{}); !errors.Is(err, client.ErrNotAdvertised) {
		t.Errorf("ListPrompts: %v, want ErrNotAdvertised", err)
	}
	if _, err := c.ListResources(ctx, client.Limits{}); !errors.Is(err, client.ErrNotAdvertised) {
		t.Errorf("ListResources: %v, want ErrNotAdvertised", err)
	}
}

func TestCancelledCallTellsTheServer(t *testing.T) {
	h := faultserver.NewHandler(faultserver.SlowTool)
	srv := httptest.NewServer(h)
	defer srv.Close()
	c, _ := connectHTTP(t, srv.URL, client.Options{DiscoverTimeout: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.CallTool(ctx, "ok", nil)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("slow call ended with %v after %s", err, time.Since(start))
	}
	deadline := time.Now().Add(3 * time.Second)
	for !slices.Contains(h.Notifications(), "notifications/cancelled") {
		if time.Now().After(deadline) {
			t.Fatalf("server got notifications %v, no notifications/cancelled", h.Notifications())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestExpiredSessionIsReported(t *testing.T) {
	srv := httptest.NewServer(faultserver.NewHandler(faultserver.SessionExpired))
	defer srv.Close()
	conn, _ := streamhttp.New(streamhttp.Options{URL: srv.URL})
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// initialize works, notifications/initialized already meets the 404.
	_, err := client.Connect(ctx, conn, client.Options{DiscoverTimeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("connect on an expiring session: %v", err)
	}
	resp, err := conn.Call(ctx, jsonrpc.NewRequest(0, "tools/list", nil))
	if !errors.Is(err, streamhttp.ErrSessionExpired) {
		t.Fatalf("call on an expired session: %v %v, want ErrSessionExpired", resp, err)
	}
}

// A capability json cannot encode is refused by Connect, in either era, rather
// than left as an empty value in every request's _meta (invalid JSON on the
// wire) or as no params at all in initialize.
func TestUnencodableCapabilityIsRefused(t *testing.T) {
	url := everything(t, true)
	for _, era := range []client.Era{"", client.EraSession} {
		conn, err := streamhttp.New(streamhttp.Options{URL: url})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := client.Connect(ctx, conn, client.Options{Era: era, Capabilities: map[string]any{
			"elicitation": map[string]any{"weight": math.Inf(1)},
		}})
		cancel()
		if err == nil {
			c.Close()
		}
		conn.Close()
		if err == nil || !strings.Contains(err.Error(), "capabilities cannot be encoded as JSON") {
			t.Errorf("era %q: Connect = %v; want an error saying the capabilities cannot be encoded", era, err)
		}
	}
}
