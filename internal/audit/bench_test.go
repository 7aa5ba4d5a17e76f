package audit

import (
	"encoding/json"
	"io"
	"testing"
	"time"
)

func BenchmarkWrite(b *testing.B) {
	w := New(Options{Sink: io.Discard, BlockTimeout: time.Second})
	defer w.Close(b.Context())
	ev := PermissionRequested{Tool: "mcp.fs.read_file", Args: json.RawMessage(`{"path":"/srv/app/main.go","offset":0,"limit":4096}`),
		RiskAtDecision: "read", SourcedFrom: "mcp", ToolCallID: "4f1c9a7e-5b2d"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := w.Write("3f1c9a7e-5b2d-4e8a", "system:serviceaccount:agents:researcher", ev); err != nil {
			b.Fatal(err)
		}
	}
}
