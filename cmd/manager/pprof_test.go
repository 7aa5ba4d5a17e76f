package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// --pprof-bind-address serves the heap profile on its own listener, and
// nothing else there.
func TestPprofServesProfiles(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testkit.FreePort(t))
	go servePprof(addr, logr.Discard())
	var body string
	testkit.Eventually(t, "the heap profile is served", func() bool {
		resp, err := http.Get("http://" + addr + "/debug/pprof/heap?debug=1")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK
	})
	if !strings.Contains(body, "heap profile") {
		t.Errorf("the heap profile: %.200q", body)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/metrics on the profiles' listener: %d, want 404", resp.StatusCode)
	}
}

// Profiles served off loopback are warned about; on loopback they are not.
func TestPprofWarnsOffLoopback(t *testing.T) {
	for addr, warned := range map[string]bool{"127.0.0.1:6060": false, "[::1]:6060": false, "localhost:6060": false, ":6060": true, "0.0.0.0:6060": true, "10.0.0.5:6060": true} {
		var logged []string
		log := funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{})
		warnOffLoopback(addr, log)
		if got := len(logged) > 0 && strings.Contains(logged[0], "not a loopback address"); got != warned {
			t.Errorf("%s: warned %v (%q), want %v", addr, got, logged, warned)
		}
	}
}
