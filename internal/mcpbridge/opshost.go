package mcpbridge

import (
	"net"
	"net/http"
	"strings"
)

// opsHostGuard refuses ops requests (metrics, health) whose Host is a name
// other than localhost or one of allowed: a page on a rebound DNS name
// could otherwise read /metrics from a bridge on a developer's loopback.
// IP literals pass: Prometheus scrapes and the kubelet probes the pod IP,
// and a rebinding attack needs a name.
func opsHostGuard(allowed []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !opsHostAllowed(allowed, r.Host) {
			http.Error(w, "Forbidden: Host "+r.Host+" is not this bridge's (ops endpoints answer loopback names, IP addresses and --allowed-hosts)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func opsHostAllowed(allowed []string, host string) bool {
	name := hostName(host)
	if strings.EqualFold(name, "localhost") || net.ParseIP(name) != nil {
		return true
	}
	for _, h := range allowed {
		if strings.EqualFold(h, host) || strings.EqualFold(h, name) {
			return true
		}
	}
	return false
}
