package probe_test

import (
	"fmt"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/mcp/probe"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// A probe's error is what the controller puts in a server's conditions
// and Events: it names the URL without the credentials in its userinfo
// and query.
func TestProbeErrorHidesTheURLsCredentials(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testkit.FreePort(t)) // nothing listens there
	target := probe.Target{HTTP: &streamhttp.Options{URL: testkit.WithCredentials("http://"+addr, "/mcp")}}
	_, _, err := probeFault(t, target, probe.Options{})
	wantErr(t, err, "probing http://REDACTED@"+addr+"/mcp?token=REDACTED&api_key=REDACTED&sig=REDACTED", "connection refused")
	if s := testkit.ShownSecret(err.Error()); s != "" {
		t.Fatalf("the probe's error %q shows %q of the URL", err, s)
	}
}
