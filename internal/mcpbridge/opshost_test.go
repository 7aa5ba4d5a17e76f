package mcpbridge

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestOpsHostGuard: the ops listener answers loopback names, IP addresses
// (Prometheus and the kubelet use the pod IP) and configured hosts; a
// rebound DNS name gets 403.
func TestOpsHostGuard(t *testing.T) {
	var b Bridge
	b.cfg.AllowedHosts = []string{"bridge.example"}
	h := b.OpsHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) }))
	for host, want := range map[string]int{
		"localhost:8091":               http.StatusOK,
		"LOCALHOST":                    http.StatusOK,
		"127.0.0.1:8091":               http.StatusOK,
		"[::1]:8091":                   http.StatusOK,
		"10.244.0.7:8091":              http.StatusOK,
		"[fd00::7]:8091":               http.StatusOK,
		"bridge.example:8091":          http.StatusOK,
		"attacker.example":             http.StatusForbidden,
		"rebind.attacker.example:8091": http.StatusForbidden,
		"localhost.attacker.example":   http.StatusForbidden,
	} {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		r.Host = host
		h.ServeHTTP(rec, r)
		if rec.Code != want {
			t.Errorf("Host %q: %d, want %d", host, rec.Code, want)
		}
	}
}
