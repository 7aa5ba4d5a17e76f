package streamhttp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

func assertNoSecret(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	if s := testkit.ShownSecret(err.Error()); s != "" {
		t.Fatalf("%s: the error %q shows %q of the URL", what, err, s)
	}
}

// A request that cannot reach the server fails with an error naming the
// URL without its credentials (net/http's own error names the user and
// the query).
func TestRequestErrorHidesTheURLsCredentials(t *testing.T) {
	raw := testkit.SecretURL(t)
	c, err := New(Options{URL: raw})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Call(context.Background(), &jsonrpc.Message{JSONRPC: "2.0", ID: json.RawMessage(`1`), Method: "ping"})
	assertNoSecret(t, "POST to a closed port", err)
	if !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "REDACTED@") {
		t.Fatalf("POST to a closed port: %q does not say what failed where", err)
	}
}

// A URL the pool refuses is shown without its credentials too.
func TestUnusableURLHidesItsCredentials(t *testing.T) {
	for _, raw := range []string{
		testkit.WithCredentials("ftp://h", "/mcp"),
		testkit.WithCredentials("http://h:port", "/mcp"),
	} {
		_, err := New(Options{URL: raw})
		assertNoSecret(t, raw, err)
	}
}
