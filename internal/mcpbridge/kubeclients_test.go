package mcpbridge

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestKubeClientsSendAUserAgent: the API server's audit log names the
// bridge. The clients share one HTTP client built from the bridge's config,
// so that config must carry the User-Agent (an httptest server stands in
// for the API server: only the request's header is looked at).
func TestKubeClientsSendAUserAgent(t *testing.T) {
	var mu sync.Mutex
	var agents []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		agents = append(agents, r.UserAgent())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}))
	defer api.Close()
	kc, err := newKubeClients(Options{Rest: &rest.Config{Host: api.URL}, Scheme: Scheme(), Namespaces: []string{"tools"}})
	if err != nil {
		t.Fatal(err)
	}
	err = kc.direct.Get(context.Background(), client.ObjectKey{Namespace: "tools", Name: "creds"}, &corev1.Secret{})
	if err == nil {
		t.Fatal("the stand-in API server answered 404, but the Get succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(agents) == 0 {
		t.Fatal("the Secret Get did not reach the API server")
	}
	for _, ua := range agents {
		if ua == "" || strings.HasPrefix(ua, "Go-http-client") {
			t.Fatalf("User-Agent %q: the bridge's requests must name it", ua)
		}
	}
}
