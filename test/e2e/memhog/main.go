// Command memhog allocates memory until the kernel kills it: the e2e tests
// run it as an MCP server's container to make a real OOM kill on demand,
// which no real MCP server does when asked.
package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	var chunks [][]byte
	for {
		chunk := make([]byte, 8<<20)
		for j := range chunk {
			chunk[j] = byte(j) // touch every page, so it is really resident
		}
		chunks = append(chunks, chunk)
		fmt.Fprintf(os.Stderr, "memhog: %d MiB\n", len(chunks)*8)
		time.Sleep(50 * time.Millisecond)
	}
}
