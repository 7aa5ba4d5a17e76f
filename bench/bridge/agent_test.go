package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
)

// TestMCPGoAgentCloseSaysARefusedDelete: mcp-go's Close returns nil
// whatever its DELETE is answered; the bench's mcp-go agent says when the
// bridge refused it. Through the bench's bridge: an agent's Close ends its
// session (204, no error); an agent whose session was ended already gets
// 404 for its DELETE, and Close says so.
func TestMCPGoAgentCloseSaysARefusedDelete(t *testing.T) {
	fast := httptest.NewServer(fastServer())
	defer fast.Close()
	br, stop, err := newBridge(context.Background(), "fast="+fast.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	front := httptest.NewServer(br.Handler())
	defer front.Close()
	url := front.URL + "/mcp"

	ok, err := connect(url, benchToken, client.EraSession)
	if err != nil {
		t.Fatal(err)
	}
	if err := ok.Close(); err != nil {
		t.Fatalf("Close of a live session: %v, want nil", err)
	}

	a, err := connect(url, benchToken, client.EraSession)
	if err != nil {
		t.Fatal(err)
	}
	sid := a.(*mcpgoAgent).c.GetTransport().(*mcpgotransport.StreamableHTTP).GetSessionId()
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("ending the agent's session before its Close: status %d, want 204", resp.StatusCode)
	}
	before := refusedDeletes.Load()
	err = a.Close()
	if err == nil || !strings.Contains(err.Error(), "status 404") {
		t.Fatalf("Close after its session was ended: %v, want its DELETE refused with status 404", err)
	}
	if n := refusedDeletes.Load() - before; n != 1 {
		t.Fatalf("refused DELETEs counted: %d, want 1", n)
	}
}
