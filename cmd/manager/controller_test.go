package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

// freeAddr reserves a loopback port for a server the test starts next.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestControllerManagerServesEndpointsAndElectsLeader runs the controller's
// manager against a real API server: health, readiness and metrics answer,
// and the leader election Lease is taken.
func TestControllerManagerServesEndpointsAndElectsLeader(t *testing.T) {
	cfg := testenv.Start(t)

	f, err := parseControllerFlags([]string{
		"--metrics-bind-address", freeAddr(t),
		"--health-probe-bind-address", freeAddr(t),
		"--leader-elect", "--leader-election-namespace", "default", "--operator-namespace", "mcp-system",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := newControllerManager(cfg, f)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("manager stopped with %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("manager did not stop within 30s")
		}
	})

	for _, check := range []struct{ addr, path, body string }{
		{f.probeAddr, "/healthz", "ok"},
		{f.probeAddr, "/readyz", "ok"},
		{f.metricsAddr, "/metrics", "rest_client_requests_total"},
	} {
		url := fmt.Sprintf("http://%s%s", check.addr, check.path)
		if body := waitFor200(t, url); !strings.Contains(body, check.body) {
			t.Errorf("%s: body does not contain %q", url, check.body)
		}
	}

	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var lease coordinationv1.Lease
		err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "controller.mcp-operator.dev"}, &lease)
		if err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader election Lease held after 30s (last error: %v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The manager's cache keeps objects without managedFields (the
	// namespace has them on the API server, which wrote it).
	var cached, stored corev1.Namespace
	if err := mgr.GetClient().Get(ctx, client.ObjectKey{Name: "default"}, &cached); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "default"}, &stored); err != nil {
		t.Fatal(err)
	}
	if len(stored.ManagedFields) == 0 || len(cached.ManagedFields) != 0 {
		t.Errorf("managedFields: %d stored, %d cached; want some stored and none cached", len(stored.ManagedFields), len(cached.ManagedFields))
	}
}

func waitFor200(t *testing.T, url string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return string(body)
			}
			err = fmt.Errorf("status %d: %s", resp.StatusCode, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestControllerApprovalRetentionFlag(t *testing.T) {
	f, err := parseControllerFlags([]string{"--operator-namespace", "mcp-system"}, io.Discard)
	if err != nil || f.retention != 24*time.Hour {
		t.Fatalf("default retention %s (%v), want 24h", f.retention, err)
	}
	var stderr strings.Builder
	if _, err := parseControllerFlags([]string{"--operator-namespace", "mcp-system", "--approval-retention", "10s"}, &stderr); err == nil ||
		!strings.Contains(stderr.String(), "--approval-retention must be at least 1m") {
		t.Fatalf("a 10s retention: %v, stderr %q", err, stderr.String())
	}
}
