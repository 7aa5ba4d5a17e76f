package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcp-operator/mcp-operator/internal/stdioadapter"
)

// runStdioAdapter serves a stdio MCP server over Streamable HTTP. It is the
// entrypoint of stdio server containers, so it usually runs as PID 1.
func runStdioAdapter(args []string, _, stderr io.Writer) int {
	fs := flag.NewFlagSet("manager stdio-adapter", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: manager stdio-adapter --listen :PORT [flags] -- COMMAND [ARGS...]")
		fs.PrintDefaults()
	}
	var cfg stdioadapter.Config
	fs.StringVar(&cfg.Listen, "listen", "", "TCP address to serve Streamable HTTP on, e.g. :8080 (required)")
	fs.StringVar(&cfg.Path, "path", "/mcp", "path of the MCP endpoint")
	fs.DurationVar(&cfg.GracePeriod, "grace-period", stdioDefault.GracePeriod, "time the server has to exit after SIGTERM/SIGINT is forwarded before its process group is killed")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", stdioDefault.MaxBodyBytes, "largest accepted POST body")
	fs.IntVar(&cfg.MaxMessageBytes, "max-message-bytes", stdioDefault.MaxMessageBytes, "largest message accepted from the server's stdout")
	fs.DurationVar(&cfg.SessionIdleTimeout, "session-idle-timeout", stdioDefault.SessionIdleTimeout, "end client sessions unused for this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg.Command = fs.Args()
	if cfg.Listen == "" || len(cfg.Command) == 0 {
		fs.Usage()
		return 2
	}
	cfg.Stderr = stderr
	// As PID 1 the adapter inherits every orphan in the container; elsewhere
	// it asks to, so the server's leftovers are its to reap and kill.
	if os.Getpid() == 1 {
		cfg.ReapOrphans = true
	} else if err := stdioadapter.BecomeSubreaper(); err == nil {
		cfg.ReapOrphans = true
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(signals)
	cfg.Signals = signals
	return stdioadapter.Run(context.Background(), cfg)
}

// stdioDefault holds the flag defaults, which are the package's defaults.
var stdioDefault = stdioadapter.Defaults()
