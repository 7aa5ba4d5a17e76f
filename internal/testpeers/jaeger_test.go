package testpeers

import (
	"net"
	"net/http"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// TestStartJaegerOnATakenPort: a port that another process took between
// being picked and being bound (here: a listener this test holds) makes the
// first start fail to bind; StartJaeger starts again on other ports, and
// the Jaeger it returns is the one that answers.
func TestStartJaegerOnATakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port

	picks := 0
	j := startJaeger(t, func(t testkit.TB) (int, int, int, int) {
		picks++
		q, qg, og, oh := jaegerPorts(t)
		if picks == 1 {
			oh = takenPort // the receiver binds last: the query API is up by then
		}
		return q, qg, og, oh
	})
	if picks != 2 {
		t.Fatalf("ports were picked %d times, want 2 (one start on the taken port, one after)", picks)
	}
	if j.OTLPHTTP == "http://"+taken.Addr().String() {
		t.Fatalf("the Jaeger returned claims the taken port %s", j.OTLPHTTP)
	}
	resp, err := http.Get(j.Query + "/api/v3/services")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the query API answered %d", resp.StatusCode)
	}
	if _, err := JaegerTrace(j.Query, "0af7651916cd43dd8448eb211c80319c"); err != nil {
		t.Fatalf("querying an unknown trace: %v", err)
	}
}
