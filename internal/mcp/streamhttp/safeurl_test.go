package streamhttp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// urlSecrets are the parts of secretURL that no error may show.
var urlSecrets = []string{"alice", "pa55word", "s3cret-token", "k3y"}

// secretURL is a URL of a port nothing listens on, with a credential in
// its userinfo and two in its query, as a remote server's URL may carry.
func secretURL(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("http://alice:pa55word@127.0.0.1:%d/mcp?token=s3cret-token&api_key=k3y", testpeers.FreePort(t))
}

func assertNoSecret(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	for _, s := range urlSecrets {
		if strings.Contains(err.Error(), s) {
			t.Fatalf("%s: the error %q shows %q of the URL", what, err, s)
		}
	}
}

// A request that cannot reach the server fails with an error naming the
// URL without its credentials (net/http's own error names the user and
// the query).
func TestRequestErrorHidesTheURLsCredentials(t *testing.T) {
	raw := secretURL(t)
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
		"ftp://alice:pa55word@h/mcp?token=s3cret-token&api_key=k3y",
		"http://alice:pa55word@h:port/mcp?token=s3cret-token&api_key=k3y",
	} {
		_, err := New(Options{URL: raw})
		assertNoSecret(t, raw, err)
	}
}
