package probe_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/mcp/probe"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// A probe's error is what the controller puts in a server's conditions
// and Events: it names the URL without the credentials in its userinfo
// and query.
func TestProbeErrorHidesTheURLsCredentials(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testpeers.FreePort(t)) // nothing listens there
	target := probe.Target{HTTP: &streamhttp.Options{URL: "http://urluser:pa55word@" + addr + "/mcp?token=s3cret-token&sig=Zq81xw"}}
	_, err, _ := probeFault(t, target, probe.Options{})
	wantErr(t, err, "probing http://REDACTED@"+addr+"/mcp?token=REDACTED&sig=REDACTED", "connection refused")
	for _, s := range []string{"urluser", "pa55word", "s3cret-token", "Zq81xw"} {
		if strings.Contains(err.Error(), s) {
			t.Fatalf("the probe's error %q shows %q of the URL", err, s)
		}
	}
}
