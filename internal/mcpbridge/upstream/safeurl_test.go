package upstream

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// A server that cannot be reached: the "while connecting" error a call
// gets, and the line the subscription keeper logs, name the server's URL
// without its credentials.
func TestUnreachableServerErrorsHideTheURLsCredentials(t *testing.T) {
	var log closeLog
	opts := log.options(0)
	opts.Subscribed = func() []string { return []string{"file:///watched"} }
	c := New(Target{Namespace: "ns", Name: "s", URL: testkit.SecretURL(t)}, opts)
	t.Cleanup(c.Close)

	_, err := c.Call(testkit.Context(t), "tools/list", nil)
	// net/http's error names the URL; the bridge's words before it do not
	// name it again.
	if err == nil || !strings.Contains(err.Error(), "while connecting to server ns/s: ") || !strings.Contains(err.Error(), `Post "http://REDACTED@`) {
		t.Fatalf("a call to a closed port: %v; want a connection error naming the URL, in net/http's words only", err)
	}
	if s := testkit.ShownSecret(err.Error()); s != "" {
		t.Fatalf("the call's error %q shows %q of the URL", err, s)
	}

	if err := c.Subscribe(testkit.Context(t), "file:///watched"); err == nil {
		t.Fatal("a subscription on a closed port succeeded")
	}
	_, lines := log.get()
	logged := strings.Join(lines, "\n")
	if !strings.Contains(logged, "resource subscriptions not established") || !strings.Contains(logged, "connection refused") {
		t.Fatalf("the keeper logged %q; want why the subscriptions failed", logged)
	}
	if s := testkit.ShownSecret(logged); s != "" {
		t.Fatalf("the keeper's log %q shows %q of the URL", logged, s)
	}
}

// A dial refused by the server (an HTTP status, no net/http error naming
// the URL): the "while connecting" error names the URL itself, without its
// credentials. The server is a plain HTTP server that refuses everything
// with 401, as one would a client without its token.
func TestRefusedDialNamesTheURLWithoutCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no token", http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	raw := testkit.WithCredentials(srv.URL, "/mcp")
	c := New(Target{Namespace: "ns", Name: "s", URL: raw}, Options{})
	t.Cleanup(c.Close)
	_, err := c.Call(testkit.Context(t), "tools/list", nil)
	if err == nil || !strings.Contains(err.Error(), "401") || strings.Count(err.Error(), "REDACTED@") != 1 {
		t.Fatalf("a call to a server that refuses it: %v; want the 401, naming the URL once", err)
	}
	if s := testkit.ShownSecret(err.Error()); s != "" {
		t.Fatalf("the call's error %q shows %q of the URL", err, s)
	}
}
