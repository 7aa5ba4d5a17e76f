// Package stdioadapter makes a stdio MCP server a Streamable HTTP server. It
// runs inside a server's pod as `manager stdio-adapter -- CMD ARGS…`: it starts
// the command, shares that one process among all HTTP clients, relays every
// JSON-RPC message both ways with its bytes unchanged (only ids and progress
// tokens are renamed, and restored on the way back), and exits with the
// command's exit code so that the pod, and the controller, see the crash.
package stdioadapter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/textcut"
)

// Config is what `manager stdio-adapter` is told on its command line.
type Config struct {
	// Command is the stdio server and its arguments.
	Command []string
	// Listen is the TCP address to serve on, such as ":8080". Listener, when
	// set, is used instead.
	Listen   string
	Listener net.Listener
	// Path is the MCP endpoint's path (default /mcp).
	Path string
	// GracePeriod is how long the server has to exit after a forwarded
	// SIGTERM or SIGINT before its process group is killed (default 10s).
	GracePeriod time.Duration
	// MaxBodyBytes bounds a POST body (default 8 MiB).
	MaxBodyBytes int64
	// MaxMessageBytes bounds one message from the server (default 32 MiB).
	MaxMessageBytes int
	// SessionIdleTimeout ends sessions unused this long (default 1h).
	SessionIdleTimeout time.Duration
	// DiscoverTimeout is how long server/discover may wait for an answer
	// before the adapter answers "method not found" itself (default 5s).
	DiscoverTimeout time.Duration
	// Stderr receives the server's stderr unchanged and the adapter's log.
	Stderr io.Writer
	// Signals delivers the signals to forward to the server (the caller
	// subscribes to SIGTERM and SIGINT). Cancelling Run's context acts as a
	// SIGTERM.
	Signals <-chan os.Signal
	// ReapOrphans makes the adapter reap and, at the end, kill processes it
	// adopted: set it when the adapter is PID 1 or a child subreaper.
	ReapOrphans bool
}

// Defaults is the Config a bare command line gets (without Command and
// Listen).
func Defaults() Config {
	var c Config
	c.setDefaults()
	return c
}

func (c *Config) setDefaults() {
	if c.Path == "" {
		c.Path = "/mcp"
	}
	if c.GracePeriod <= 0 {
		c.GracePeriod = 10 * time.Second
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 8 << 20
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 32 << 20
	}
	if c.SessionIdleTimeout <= 0 {
		c.SessionIdleTimeout = time.Hour
	}
	if c.DiscoverTimeout <= 0 {
		c.DiscoverTimeout = 5 * time.Second
	}
	if c.Stderr == nil {
		c.Stderr = os.Stderr
	}
}

// Run starts the server, serves HTTP until the server exits, and returns the
// exit code the adapter should exit with: the server's own (128+N for a death
// by signal N), 126 or 127 when it could not be started, 1 when the adapter
// itself could not start.
func Run(ctx context.Context, cfg Config) int {
	cfg.setDefaults()
	log := slog.New(slog.NewTextHandler(cfg.Stderr, nil)).With("component", "stdio-adapter")
	if len(cfg.Command) == 0 {
		log.Error("no command given: use manager stdio-adapter --listen :PORT -- COMMAND ARGS...")
		return 2
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			log.Error("while opening the listen address", "address", cfg.Listen, "error", err)
			return 1
		}
	}
	ch, err := startChild(cfg.Command, cfg.Stderr)
	if err != nil {
		ln.Close()
		log.Error("while starting the stdio server", "command", cfg.Command[0], "error", err)
		return startExitCode(err)
	}
	log.Info("serving", "address", ln.Addr().String(), "path", cfg.Path, "command", cfg.Command[0], "pid", ch.pid())

	r := newRelay(log, ch.send, cfg.DiscoverTimeout)
	stdoutDone := make(chan struct{})
	go func() {
		defer close(stdoutDone)
		ch.readLoop(cfg.MaxMessageBytes, func(line []byte) {
			msgs, _, err := parseBatch(line)
			if err != nil {
				log.Warn("ignoring a line on the stdio server's stdout that is not a JSON-RPC message", "error", err, "line", preview(line))
				return
			}
			for _, m := range msgs {
				r.fromChild(m)
			}
		}, func(size int) {
			log.Warn("dropping a message from the stdio server larger than the limit", "bytes", size, "limit", cfg.MaxMessageBytes)
		})
	}()

	srv := &http.Server{
		Handler: &handler{
			relay:       r,
			path:        cfg.Path,
			maxBody:     cfg.MaxBodyBytes,
			bodyTimeout: 30 * time.Second,
			keepAlive:   25 * time.Second,
			alive:       func() bool { return !closed(ch.exited) },
		},
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	code := supervise(ctx, cfg, log, ch, r, stdoutDone, serveErr)

	// The group was killed when the server exited (child.wait); what left
	// the group is killed here when it is the adapter's to reap.
	if cfg.ReapOrphans {
		killAdopted(ch.pid(), 2*time.Second)
	}
	// Deliver what the server wrote before it exited, then fail the rest.
	ch.drain(stdoutDone, 2*time.Second)
	r.childGone(fmt.Sprintf("the stdio server exited with code %d", code))
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if srv.Shutdown(shutdownCtx) != nil {
		srv.Close()
	}
	log.Info("stopped", "exitCode", code)
	return code
}

// supervise waits for the server to exit while forwarding signals, and
// returns its exit code.
func supervise(ctx context.Context, cfg Config, log *slog.Logger, ch *child, r *relay, stdoutDone <-chan struct{}, serveErr <-chan error) int {
	var grace, mute <-chan time.Time
	terminate := func(sig syscall.Signal, why string) {
		log.Info("stopping the stdio server", "signal", sig.String(), "reason", why, "gracePeriod", cfg.GracePeriod.String())
		ch.signal(sig)
		if grace == nil {
			grace = time.After(cfg.GracePeriod)
		}
	}
	idle := time.NewTicker(min(cfg.SessionIdleTimeout/2, time.Minute))
	defer idle.Stop()
	var sigchld chan os.Signal
	if cfg.ReapOrphans {
		sigchld = make(chan os.Signal, 1)
		signal.Notify(sigchld, syscall.SIGCHLD)
		defer signal.Stop(sigchld)
	}
	done := ctx.Done()
	for {
		select {
		case <-ch.exited:
			log.Info("the stdio server exited", "exitCode", ch.code)
			return ch.code
		case sig := <-cfg.Signals:
			if s, ok := sig.(syscall.Signal); ok {
				terminate(s, "the adapter got "+s.String())
			}
		case <-done:
			done = nil
			terminate(syscall.SIGTERM, "the adapter was cancelled")
		case <-stdoutDone:
			// Usually the server is exiting; if it is still there a moment
			// later, it can no longer answer anyone and is stopped.
			stdoutDone = nil
			mute = time.After(time.Second)
		case <-mute:
			r.childGone("the stdio server closed its stdout")
			terminate(syscall.SIGTERM, "it closed its stdout")
		case err := <-serveErr:
			if !errors.Is(err, http.ErrServerClosed) {
				log.Error("the HTTP server failed", "error", err)
			}
			terminate(syscall.SIGTERM, "the HTTP server stopped")
		case <-grace:
			log.Warn("the stdio server outlived the grace period; killing its process group")
			ch.signal(syscall.SIGKILL)
		case <-idle.C:
			r.endIdleSessions(cfg.SessionIdleTimeout)
		case <-sigchld:
			reapZombies(ch.pid())
		}
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// preview shortens a line for the log.
func preview(b []byte) string {
	return textcut.CutBytes(b, 200)
}
