// Package bench holds the benchmarks that compare the bridge's parts with
// simpler ways of doing the same job, side by side in one run: each
// benchmark alternates short rounds of its variants (so that machine noise
// hits them alike) and reports every variant's ns/op and its ratio to the
// first, the baseline.
//
//	go test ./bench -run x -bench . -benchtime 20x
package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/output"
	"github.com/mcp-operator/mcp-operator/internal/redact"
)

type variant struct {
	name string
	run  func() // one operation
}

// sideBySide runs b.N rounds; each round runs every variant perRound times,
// in turn. It reports ns/op of each variant and its ratio to the first.
func sideBySide(b *testing.B, perRound int, vs ...variant) {
	b.Helper()
	total := make([]time.Duration, len(vs))
	for _, v := range vs { // warm up
		v.run()
	}
	b.ResetTimer()
	for range b.N {
		for i, v := range vs {
			start := time.Now()
			for range perRound {
				v.run()
			}
			total[i] += time.Since(start)
		}
	}
	b.StopTimer()
	ops := float64(b.N * perRound)
	base := float64(total[0]) / ops
	for i, v := range vs {
		ns := float64(total[i]) / ops
		b.ReportMetric(ns, v.name+"-ns/op")
		if i > 0 {
			b.ReportMetric(ns/base, v.name+"/"+vs[0].name)
		}
	}
	b.ReportMetric(0, "ns/op") // the per-variant numbers above are the ones to read
}

// toolResult builds a tools/call result whose text is about n bytes of
// ordinary command output.
func toolResult(n int) []byte {
	line := "-rw-r--r-- 1 app app 1804 Nov 30 10:02 main.go  checksum 9f86d081884c7d65\n"
	text := strings.Repeat(line, max(n/len(line), 1))
	b, _ := json.Marshal(map[string]any{
		"content":           []any{map[string]any{"type": "text", "text": text}},
		"structuredContent": map[string]any{"entries": 3, "path": "/srv/app"},
		"isError":           false,
	})
	return b
}

// roundTrip is the baseline: decoding and re-encoding the result, which a
// proxy that handles results as values (not raw bytes) does on every call.
func roundTrip(raw []byte) {
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		panic(err)
	}
	if _, err := json.Marshal(v); err != nil {
		panic(err)
	}
}

// naiveShapes are the credential shapes as regular expressions run one
// after another, the way the pipeline does not do it.
var naiveShapes = []*regexp.Regexp{
	regexp.MustCompile(`\bsk-(ant-)?[A-Za-z0-9_-]{20,}`),
	regexp.MustCompile(`\bgh[opsur]_[A-Za-z0-9]{30,}`),
	regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{22,}`),
	regexp.MustCompile(`\b(AKIA|ASIA)[A-Z0-9]{16}\b`),
	regexp.MustCompile(`(?i)secret_?access_?key["' \t:=]{1,6}[A-Za-z0-9/+=]{16,}`),
	regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9-]{10,}`),
	regexp.MustCompile(`eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*`),
	regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`),
	regexp.MustCompile(`(?i)\bbearer[ \t]+[A-Za-z0-9._~+/=-]{8,}`),
	regexp.MustCompile(`(?i)authorization["' \t:=]{1,6}[A-Za-z0-9]+ [A-Za-z0-9._~+/=-]+`),
}

func naiveRedact(raw []byte) {
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		panic(err)
	}
	text := v["content"].([]any)[0].(map[string]any)["text"].(string)
	for _, re := range naiveShapes {
		text = re.ReplaceAllString(text, "[REDACTED]")
	}
	_ = text
}

// BenchmarkOutputPipeline: the whole pipeline (redaction with two Secret
// values, injection scan, prefix) against a decode/encode round trip of the
// same result, and against the credential regexps alone run one by one.
func BenchmarkOutputPipeline(b *testing.B) {
	p := &output.Pipeline{}
	c := output.Call{Server: "fs", Name: "list_directory", Subject: "u", Redactor: redact.New("p4ss-w0rd-of-the-db", "another-secret-value")}
	for _, size := range []int{300, 64 << 10, 1 << 20} {
		raw := toolResult(size)
		perRound := max(1, (256<<10)/len(raw))
		b.Run(fmt.Sprintf("%dB", len(raw)), func(b *testing.B) {
			sideBySide(b, perRound,
				variant{"roundtrip", func() { roundTrip(raw) }},
				variant{"pipeline", func() {
					if _, _, err := p.ToolResult(c, raw); err != nil {
						panic(err)
					}
				}},
				variant{"naive-regexps", func() { naiveRedact(raw) }},
			)
		})
	}
}

// BenchmarkAuditWrite: Writer.Write (sequenced, redacted, queued; the bytes
// go to a file in batches) against encoding the same event with json.Marshal
// alone, and against writing each event to the file with its own write call.
func BenchmarkAuditWrite(b *testing.B) {
	dir := b.TempDir()
	direct, err := os.Create(filepath.Join(dir, "direct.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	sink, err := audit.OpenFile(filepath.Join(dir, "writer.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	w := audit.New(audit.Options{Sink: sink, BlockTimeout: time.Second})
	defer w.Close(b.Context())
	ev := audit.PermissionRequested{Tool: "mcp.fs.read_file", Args: json.RawMessage(`{"path":"/srv/app/main.go","offset":0,"limit":4096}`),
		RiskAtDecision: "read", SourcedFrom: "mcp", ToolCallID: "4f1c9a7e-5b2d"}
	type line struct {
		Seq     uint64 `json:"seq"`
		Time    string `json:"time"`
		Session string `json:"session"`
		audit.PermissionRequested
	}
	var seq uint64
	marshal := func() []byte {
		seq++
		out, _ := json.Marshal(line{seq, time.Now().UTC().Format(time.RFC3339Nano), "s", ev})
		return append(out, '\n')
	}
	sideBySide(b, 1000,
		variant{"marshal", func() { _, _ = io.Discard.Write(marshal()) }},
		variant{"writer", func() {
			if _, err := w.Write("3f1c9a7e-5b2d-4e8a", "system:serviceaccount:agents:researcher", ev); err != nil {
				panic(err)
			}
		}},
		variant{"write-per-event", func() { _, _ = direct.Write(marshal()) }},
	)
}
