package upstreamcred_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstreamcred"
	"github.com/mcp-operator/mcp-operator/internal/redact"
)

// BenchmarkCacheHit1000Callers: what a call costs the Store once a
// thousand callers of one server each have an exchanged token: the
// credential lookup and the server's redactor, both from memory. It
// reports too how long one rebuild of that redactor takes (the cost a new
// caller's first call adds, once, outside the Store's lock).
func BenchmarkCacheHit1000Callers(b *testing.B) {
	const n = 1000
	subjects := map[string]string{}
	callers := make([]upstreamcred.Caller, n)
	for i := range callers {
		callers[i] = upstreamcred.Caller{Username: fmt.Sprintf("oidc:user-%04d@example.com", i), Token: fmt.Sprintf("caller-%04d-own-access-token", i)}
		subjects[callers[i].Token] = fmt.Sprintf("user-%04d", i)
	}
	te := bridgetest.NewTokenEndpoint(b, "github", subjects)
	srv := exchangeServer(b, te)
	st := upstreamcred.New(upstreamcred.Options{Secrets: k8s, TokenEndpoints: []string{te.URL}})
	ctx := context.Background()
	for _, c := range callers {
		if _, err := st.Credential(ctx, srv, c, ""); err != nil {
			b.Fatal(err)
		}
	}
	server := srv.Namespace + "/" + srv.Name
	start := time.Now()
	st.Redactor(server, redact.Shapes())
	b.Logf("one rebuild of the server's redactor with %d callers' values: %v", n, time.Since(start).Round(time.Microsecond))

	b.Run("credential", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := st.Credential(ctx, srv, callers[i%n], ""); err != nil {
				b.Fatal(err)
			}
		}
		if x := te.Exchanges("user-0000"); x != 1 {
			b.Fatalf("%d exchanges of one caller, want 1: not a cache hit", x)
		}
	})
	b.Run("redactor", func(b *testing.B) {
		for b.Loop() {
			st.Redactor(server, redact.Shapes())
		}
	})
}
