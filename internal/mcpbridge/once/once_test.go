package once

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/signed"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

// BenchmarkClaim is what single use costs a retry with a sealed state:
// "replica" is the replica's own memory alone (signed.Spent), "cluster"
// adds the Lease created on envtest's API server (on loopback: in a
// cluster, add the round trip to the API server).
func BenchmarkClaim(b *testing.B) {
	cfg := testenv.Start(b)
	s := runtime.NewScheme()
	_ = coordinationv1.AddToScheme(s)
	_ = corev1.AddToScheme(s)
	k, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}); err != nil {
		b.Fatal(err)
	}
	sealer, err := signed.New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		b.Fatal(err)
	}
	until := time.Now().Add(time.Minute)
	states := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i], _ = sealer.Seal("state", i)
		}
		return out
	}
	b.Run("replica", func(b *testing.B) {
		var spent signed.Spent
		sealed := states(b.N)
		b.ResetTimer()
		for i := range b.N {
			if !spent.Use(sealed[i], until, time.Now()) {
				b.Fatal("a fresh state was refused")
			}
		}
	})
	b.Run("cluster", func(b *testing.B) {
		var spent signed.Spent
		l := &Ledger{Client: k, Namespace: "bench"}
		sealed := states(b.N)
		var key [8]byte
		b.ResetTimer()
		for i := range b.N {
			if !spent.Use(sealed[i], until, time.Now()) {
				b.Fatal("a fresh state was refused")
			}
			tag, _ := signed.Tag(sealed[i])
			// The benchmark runs more than once: each run claims keys of its own.
			binary.BigEndian.PutUint64(key[:], uint64(time.Now().UnixNano()))
			if fresh, err := l.Claim(ctx, "state", append(tag, key[:]...), until); err != nil || !fresh {
				b.Fatalf("claim: %v %v", fresh, err)
			}
		}
	})
}

// BenchmarkEnded is what sharing sessions' ends adds to every request of a
// session: a lookup in the set the watch keeps.
func BenchmarkEnded(b *testing.B) {
	e := &Ends{}
	for i := range 10000 {
		e.ended.Store(Name(KindSessionEnd, binary.BigEndian.AppendUint64(nil, uint64(i))), struct{}{})
	}
	for range b.N {
		if e.Ended("a session id of 32 hexadecimal digits") {
			b.Fatal("a live session is ended")
		}
	}
}
