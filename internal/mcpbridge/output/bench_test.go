package output

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/redact"
)

// smallResult is a typical few-hundred-byte tools/call result.
const smallResult = `{"content":[{"type":"text","text":"total 12\ndrwxr-xr-x 2 app app 4096 Nov 30 10:02 config\n-rw-r--r-- 1 app app  220 Nov 30 10:02 README.md\n-rw-r--r-- 1 app app 1804 Nov 30 10:02 main.go\nThe directory holds 3 entries."}],"structuredContent":{"entries":3,"path":"/srv/app"},"isError":false}`

func BenchmarkToolResult(b *testing.B) {
	c := Call{Server: "fs", Name: "list_directory", Subject: "u", Redactor: redact.New("p4ss-w0rd-of-the-db", "another-secret-value")}
	large := `{"content":[{"type":"text","text":` + string(mustJSON(strings.Repeat("line of ordinary output with numbers 12345 and words\n", 20000))) + `}]}`
	for _, tc := range []struct{ name, in string }{{"small", smallResult}, {"1MB", large}} {
		b.Run(tc.name, func(b *testing.B) {
			var p Pipeline
			b.SetBytes(int64(len(tc.in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := p.ToolResult(c, json.RawMessage(tc.in)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
