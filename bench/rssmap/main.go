// Command rssmap prints which of a running Go process's binary pages are
// resident, by section and by package (package bench/internal/rssmap):
//
//	go run ./bench/rssmap -pid PID -symbols BIN
//
// where BIN is the process's binary built again without -s -w.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/mcp-operator/mcp-operator/bench/internal/rssmap"
)

func main() {
	pid := flag.Int("pid", 0, "the process")
	symbols := flag.String("symbols", "", "an unstripped build of the process's binary (same tree and flags, without -s -w)")
	top := flag.Int("top", 25, "packages listed per section")
	flag.Parse()
	if *pid == 0 || *symbols == "" {
		fmt.Fprintln(os.Stderr, "rssmap: -pid and -symbols are required")
		os.Exit(2)
	}
	r, err := rssmap.Attribute(*pid, *symbols)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rssmap:", err)
		os.Exit(1)
	}
	r.Print(os.Stdout, *top)
}
