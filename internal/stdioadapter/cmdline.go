package stdioadapter

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

// Main is the adapter's command line, the same in both binaries that carry
// it: `stdio-adapter` (the small binary stdio server pods run) and
// `manager stdio-adapter`. prog names the command in messages. It returns
// the exit code.
func Main(prog string, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s --listen :PORT [flags] -- COMMAND [ARGS...]\n", prog)
		fs.PrintDefaults()
	}
	defaults := Defaults()
	var cfg Config
	fs.StringVar(&cfg.Listen, "listen", "", "TCP address to serve Streamable HTTP on, e.g. :8080 (required)")
	fs.StringVar(&cfg.Path, "path", "/mcp", "path of the MCP endpoint")
	fs.DurationVar(&cfg.GracePeriod, "grace-period", defaults.GracePeriod, "time the server has to exit after SIGTERM/SIGINT is forwarded before its process group is killed")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", defaults.MaxBodyBytes, "largest accepted POST body")
	fs.IntVar(&cfg.MaxMessageBytes, "max-message-bytes", defaults.MaxMessageBytes, "largest message accepted from the server's stdout")
	fs.DurationVar(&cfg.SessionIdleTimeout, "session-idle-timeout", defaults.SessionIdleTimeout, "end client sessions unused for this long")
	install := fs.String("install", "", "copy this binary to the given path and exit: a stdio server pod puts the adapter next to the server this way")
	terminationLog := fs.String("termination-log", "/dev/termination-log", "with --install: an existing file the install's error is also written to (the kubelet's termination message of the container the install runs in)")
	hold := fs.Bool("hold", false, "do nothing until SIGTERM or SIGINT, then exit 0: the adapter's own container in a stdio server pod (a sidecar whose postStart hook runs --install) stays up this way")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *hold {
		signals := make(chan os.Signal, 1)
		signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
		<-signals
		return 0
	}
	if *install != "" {
		if err := installSelf(*install); err != nil {
			msg := fmt.Sprintf("%s --install: %v", prog, err)
			fmt.Fprintln(stderr, msg)
			writeTerminationMessage(*terminationLog, msg)
			return 1
		}
		return 0
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
	} else if err := BecomeSubreaper(); err == nil {
		cfg.ReapOrphans = true
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(signals)
	cfg.Signals = signals
	return Run(context.Background(), cfg)
}

// installSelf copies the running binary to dst (executable), atomically, so
// a half-copied adapter is never started.
func installSelf(dst string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("while finding this binary: %w", err)
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".stdio-adapter-*")
	if err != nil {
		return fmt.Errorf("while creating %s: %w", dst, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return fmt.Errorf("while copying to %s: %w", dst, err)
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// writeTerminationMessage writes msg to the container's termination log,
// which the kubelet creates (writable on a read-only root filesystem) and
// reads when the container ends. The install runs as the adapter
// container's postStart hook: when it fails, the kubelet stops that
// container, whose own process then exits 0, so this message is all its
// status says of the failure. A missing file (outside a pod) is left
// missing.
func writeTerminationMessage(path, msg string) {
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return
	}
	_, _ = f.WriteString(msg)
	_ = f.Close()
}
