package canonjson

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// benchArgs are arguments of the sizes a tools/call carries: three keys as
// an agent's JSON library orders them (and already sorted), a file of 1 MiB
// to write (one long string with escapes), and 1 MiB of records.
func benchArgs() map[string][]byte {
	text := strings.Repeat("func main() {\n\tfmt.Println(\"hello, <world> & é\")\n}\n", 1<<20/52)
	file, _ := json.Marshal(map[string]string{"path": "/src/main.go", "content": text})
	var recs strings.Builder
	recs.WriteString(`{"rows":[`)
	for i := 0; recs.Len() < 1<<20; i++ {
		if i > 0 {
			recs.WriteByte(',')
		}
		recs.WriteString(`{"name":"row ` + strconv.Itoa(i) + `","id":` + strconv.Itoa(i) + `,"tags":["a","b"],"score":1.5,"active":true}`)
	}
	recs.WriteString(`],"table":"t"}`)
	return map[string][]byte{
		"small":           []byte(`{"path":"/tmp/x","mode":"w","count":3}`),
		"small-canonical": []byte(`{"count":3,"mode":"w","path":"/tmp/x"}`),
		"1MiB-file":       file,
		"1MiB-records":    []byte(recs.String()),
	}
}

// go test ./internal/mcp/canonjson -run x -bench Digest -benchmem
func BenchmarkDigest(b *testing.B) {
	for _, name := range []string{"small", "small-canonical", "1MiB-file", "1MiB-records"} {
		args := benchArgs()[name]
		b.Run(name+"/reference", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(args)))
			for range b.N {
				c, err := referenceMarshal(args)
				if err != nil {
					b.Fatal(err)
				}
				_ = SHA256(c)
			}
		})
		b.Run(name+"/now", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(args)))
			for range b.N {
				if _, err := Digest(args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The benchmarks' arguments canonicalize as the reference does.
func TestBenchArgsMatchReference(t *testing.T) {
	for _, args := range benchArgs() {
		sameAsReference(t, args)
	}
}
