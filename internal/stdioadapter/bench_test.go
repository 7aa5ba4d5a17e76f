package stdioadapter

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// stdioClient talks to a stdio server directly, the way the adapter does:
// the baseline the adapter's cost is measured against.
type stdioClient struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startStdio(b *testing.B, argv []string) *stdioClient {
	cmd := exec.Command(argv[0], argv[1:]...)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &stdioClient{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	b.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	c.call(b, 0, `"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`)
	fmt.Fprintln(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

// call sends request id with the given method and params (a fragment) and
// reads until its response.
func (c *stdioClient) call(b *testing.B, id int, methodAndParams string) {
	fmt.Fprintf(c.in, `{"jsonrpc":"2.0","id":%d,"method":%s}`+"\n", id, methodAndParams)
	want := fmt.Sprintf(`"id":%d`, id)
	for {
		line, err := c.out.ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		if strings.Contains(line, want) && !strings.Contains(line, `"method"`) {
			return
		}
	}
}

// BenchmarkCallOverhead makes the same tools/call directly over stdio and
// through the adapter over HTTP, alternating, one at a time, and reports the
// median of each, the time the adapter adds, and their ratio.
func BenchmarkCallOverhead(b *testing.B) {
	goServer, err := testpeers.EverythingServer()
	if err != nil {
		b.Fatal(err)
	}
	for _, srv := range []struct {
		name, tool string
		argv       []string
	}{
		{"go-everything-server", `{"name":"test_simple_text","arguments":{}}`, []string{goServer}},
		{"node-server-everything", `{"name":"echo","arguments":{"message":"hi"}}`, []string{peer(b, "mcp-server-everything")}},
	} {
		b.Run(srv.name, func(b *testing.B) {
			direct := startStdio(b, srv.argv)
			a := startAdapter(b, srv.argv, nil)
			c := &rawClient{url: a.url}
			c.initialize(b)
			params := `"tools/call","params":` + srv.tool
			for i := range 50 { // warm up both paths
				direct.call(b, i+1, params)
				c.post(b, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%s}`, i+1, params))
			}
			var viaStdio, viaAdapter []time.Duration
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				t0 := time.Now()
				direct.call(b, 1000+i, params)
				t1 := time.Now()
				c.post(b, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%s}`, 1000+i, params))
				viaStdio = append(viaStdio, t1.Sub(t0))
				viaAdapter = append(viaAdapter, time.Since(t1))
			}
			d, h := median(viaStdio), median(viaAdapter)
			b.ReportMetric(float64(d.Microseconds()), "stdio-µs/call")
			b.ReportMetric(float64(h.Microseconds()), "adapter-µs/call")
			b.ReportMetric(float64((h - d).Microseconds()), "added-µs/call")
			b.ReportMetric(float64(h)/float64(d), "ratio")
		})
	}
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}
