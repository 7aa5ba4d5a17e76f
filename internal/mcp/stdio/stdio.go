// Package stdio runs an MCP server as a child process and speaks JSON-RPC
// with it over stdin/stdout, one message per line. The child runs in its own
// process group so that closing the connection stops, kills and reaps
// everything it started: no zombies, no orphans. Its exit status and the tail
// of its stderr explain a server that dies.
package stdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
)

// Options says what to run and how patiently.
type Options struct {
	// Command and Args are run directly (no shell).
	Command string
	Args    []string
	// Env is the child's whole environment; nil inherits this process's.
	Env []string
	// Dir is the child's working directory; "" is ours.
	Dir string
	// StderrTailBytes is how much of the end of stderr is kept for error
	// messages (default 4 KiB).
	StderrTailBytes int
	// StderrTo also receives everything the child writes to stderr.
	StderrTo io.Writer
	// MaxMessageBytes bounds one line on stdout (default 32 MiB).
	MaxMessageBytes int
	// StopGrace is how long Close waits after closing stdin before SIGTERM,
	// and after SIGTERM before SIGKILL (default 2s).
	StopGrace time.Duration
	// WriteTimeout bounds a write to stdin when the context has no deadline
	// (default 30s): a child that stops reading must not block us forever.
	WriteTimeout time.Duration
}

func (o *Options) defaults() {
	if o.StderrTailBytes <= 0 {
		o.StderrTailBytes = 4 << 10
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 32 << 20
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 2 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 30 * time.Second
	}
}

// ExitError says the server process ended, how, and what it said last.
type ExitError struct {
	Command    string
	ExitCode   int    // -1 when killed by a signal
	Signal     string // the signal that killed it, if any
	StderrTail string
}

func (e *ExitError) Error() string {
	how := fmt.Sprintf("exit status %d", e.ExitCode)
	if e.Signal != "" {
		how = "killed by signal " + e.Signal
	}
	msg := fmt.Sprintf("server process %q exited (%s)", e.Command, how)
	if e.StderrTail != "" {
		msg += "; last stderr: " + e.StderrTail
	}
	return msg
}

// ErrClosed is returned by calls on a connection this side closed.
var ErrClosed = errors.New("stdio connection closed")

// Conn is a running stdio server. It implements jsonrpc.Conn.
type Conn struct {
	opts    Options
	cmd     *exec.Cmd
	stdin   *os.File
	stdout  *os.File
	stderrR *os.File
	stderr  *tail

	pending jsonrpc.Pending
	writeMu sync.Mutex

	handlerMu sync.RWMutex
	handler   jsonrpc.NotificationHandler

	deadOnce sync.Once
	dead     chan struct{} // closed when no more responses can come
	deadErr  error

	exited     chan struct{} // closed once the child is reaped
	exitErr    *ExitError
	readerDone chan struct{}
	stderrDone chan struct{}
	closeOnce  sync.Once
}

// Start runs the command. The child outlives ctx: only Close stops it (a
// start-up context that ends must not kill a server in use).
func Start(opts Options) (*Conn, error) {
	opts.defaults()
	if opts.Command == "" {
		return nil, errors.New("while starting the stdio server: no command given")
	}
	cmd := exec.Command(opts.Command, opts.Args...)
	cmd.Env = opts.Env
	cmd.Dir = opts.Dir
	// Own process group, so Close can signal everything the server spawned
	// (npx → node, shells → their children). Pdeathsig kills the child if
	// this process dies without closing it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	// Our own pipes as *os.File: exec then starts no copying goroutines, so
	// Wait returns when the child exits even if a grandchild keeps a pipe open.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("while creating the stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, fmt.Errorf("while creating the stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, fmt.Errorf("while creating the stderr pipe: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, fmt.Errorf("while starting the stdio server %q: %w", opts.Command, err)
	}
	closeAll(inR, outW, errW) // the child's ends

	c := &Conn{
		opts: opts, cmd: cmd, stdin: inW, stdout: outR, stderrR: errR,
		stderr: &tail{max: opts.StderrTailBytes},
		dead:   make(chan struct{}), exited: make(chan struct{}),
		readerDone: make(chan struct{}), stderrDone: make(chan struct{}),
	}
	go c.readStderr()
	go c.readStdout()
	go c.wait()
	return c, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// PID is the child's process id (and process group id).
func (c *Conn) PID() int { return c.cmd.Process.Pid }

// Exited is closed once the child has exited and been reaped.
func (c *Conn) Exited() <-chan struct{} { return c.exited }

// ExitErr says how the child ended; nil while it runs.
func (c *Conn) ExitErr() *ExitError {
	select {
	case <-c.exited:
		return c.exitErr
	default:
		return nil
	}
}

// StderrTail is the end of what the child wrote to stderr so far.
func (c *Conn) StderrTail() string { return c.stderr.String() }

// SetProtocolVersion is a no-op: stdio carries no headers.
func (c *Conn) SetProtocolVersion(string) {}

// SetNotificationHandler sets who receives the server's notifications.
func (c *Conn) SetNotificationHandler(h jsonrpc.NotificationHandler) {
	c.handlerMu.Lock()
	c.handler = h
	c.handlerMu.Unlock()
}

// Call sends req (its id is assigned here) and waits for the response, the
// context's end, or the server's death, whichever comes first.
func (c *Conn) Call(ctx context.Context, req *jsonrpc.Message) (*jsonrpc.Message, error) {
	select {
	case <-c.dead:
		return nil, c.deadErr
	default:
	}
	ch := c.pending.Add(req)
	if err := c.write(ctx, req); err != nil {
		c.pending.Remove(req.ID)
		return nil, err
	}
	select {
	case resp := <-ch:
		return resp, nil
	case <-c.dead:
		// The response may have been read just before the stream ended.
		select {
		case resp := <-ch:
			return resp, nil
		default:
		}
		c.pending.Remove(req.ID)
		return nil, fmt.Errorf("while waiting for the answer to %s: %w", req.Method, c.deadErr)
	case <-ctx.Done():
		c.pending.Remove(req.ID)
		if req.Method != "initialize" { // the spec forbids cancelling initialize
			c.sendCancelled(req.ID, ctx.Err())
		}
		return nil, fmt.Errorf("while waiting for the answer to %s: %w", req.Method, ctx.Err())
	}
}

func (c *Conn) sendCancelled(id json.RawMessage, why error) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = c.Notify(ctx, jsonrpc.NewNotification("notifications/cancelled", jsonrpc.CancelledParams(id, why.Error())))
	}()
}

// Notify sends a notification.
func (c *Conn) Notify(ctx context.Context, n *jsonrpc.Message) error {
	return c.write(ctx, n)
}

func (c *Conn) write(ctx context.Context, m *jsonrpc.Message) error {
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("while encoding %s: %w", m.Method, err)
	}
	data = append(data, '\n')
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(c.opts.WriteTimeout)
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	select {
	case <-c.dead:
		return c.deadErr
	default:
	}
	_ = c.stdin.SetWriteDeadline(deadline)
	if _, err := c.stdin.Write(data); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("while writing %s to the server's stdin: the server stopped reading: %w", m.What(), err)
		}
		// A broken pipe usually means the child died: say how, if we know.
		select {
		case <-c.exited:
			return fmt.Errorf("while writing %s to the server's stdin: %w", m.What(), c.exitErr)
		case <-time.After(50 * time.Millisecond):
		}
		return fmt.Errorf("while writing %s to the server's stdin: %w", m.What(), err)
	}
	return nil
}

// fail marks the connection dead: pending and future calls get err.
func (c *Conn) fail(err error) {
	c.deadOnce.Do(func() {
		c.deadErr = err
		close(c.dead)
	})
}

func (c *Conn) readStdout() {
	defer close(c.readerDone)
	r := bufio.NewReaderSize(c.stdout, 64<<10)
	for {
		line, err := readLine(r, c.opts.MaxMessageBytes)
		if len(bytes.TrimSpace(line)) > 0 {
			if derr := c.dispatch(line); derr != nil {
				// A server must write only MCP messages on stdout; anything
				// else means we can no longer trust what follows.
				c.fail(fmt.Errorf("while reading the server's stdout: %w", derr))
				return
			}
		}
		if err != nil {
			c.fail(c.streamEnd(err))
			return
		}
	}
}

// streamEnd explains why stdout ended: the child's exit when it has one.
func (c *Conn) streamEnd(err error) error {
	if errors.Is(err, errLineTooLong) {
		return fmt.Errorf("while reading the server's stdout: %w", err)
	}
	select {
	case <-c.exited:
		return c.exitErr
	case <-time.After(500 * time.Millisecond):
	}
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("server %q closed its stdout", c.opts.Command)
	}
	return fmt.Errorf("while reading the server's stdout: %w", err)
}

var errLineTooLong = errors.New("message too long")

// readLine reads up to '\n', refusing lines longer than limit bytes.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > limit {
			return nil, fmt.Errorf("%w: a line on stdout is longer than %d bytes (bound maxMessageBytes)", errLineTooLong, limit)
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, err
	}
}

func (c *Conn) dispatch(line []byte) error {
	m, err := jsonrpc.Decode(line)
	if err != nil {
		return err
	}
	switch {
	case m.IsResponse():
		c.pending.Deliver(m)
	case m.IsRequest():
		go c.answer(m)
	default:
		c.handlerMu.RLock()
		h := c.handler
		c.handlerMu.RUnlock()
		if h != nil {
			h(m)
		}
	}
	return nil
}

// answer replies to a request from the server.
func (c *Conn) answer(m *jsonrpc.Message) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.write(ctx, jsonrpc.ReplyTo(m))
}

func (c *Conn) readStderr() {
	defer close(c.stderrDone)
	var w io.Writer = c.stderr
	if c.opts.StderrTo != nil {
		w = io.MultiWriter(c.stderr, c.opts.StderrTo)
	}
	_, _ = io.Copy(w, c.stderrR)
}

func (c *Conn) wait() {
	err := c.cmd.Wait()
	e := &ExitError{Command: c.opts.Command, ExitCode: c.cmd.ProcessState.ExitCode()}
	if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Signal = ws.Signal().String()
	}
	_ = err // the ProcessState says all Wait's error would
	// Give stderr a moment to drain so the tail holds the last words.
	select {
	case <-c.stderrDone:
	case <-time.After(200 * time.Millisecond):
	}
	e.StderrTail = c.stderr.String()
	c.exitErr = e
	close(c.exited)
	// Responses written just before the exit are still in the pipe: let the
	// reader deliver them before calls are failed.
	select {
	case <-c.readerDone:
	case <-time.After(200 * time.Millisecond):
	}
	c.fail(e)
}

// Close stops the server: stdin is closed (a well-behaved server exits), then
// SIGTERM and SIGKILL go to its process group after StopGrace each. It returns
// once the child is reaped and nothing of its group is left running.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.fail(ErrClosed)
		c.writeMu.Lock()
		_ = c.stdin.Close()
		c.writeMu.Unlock()
		pgid := c.cmd.Process.Pid
		if !c.waitExit(c.opts.StopGrace) {
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			if !c.waitExit(c.opts.StopGrace) {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				<-c.exited
			}
		}
		// The leader is gone; whatever it left behind in its group goes too.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		_ = c.stdout.Close()
		_ = c.stderrR.Close()
		<-c.readerDone
		<-c.stderrDone
	})
	return nil
}

func (c *Conn) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.exited:
		return true
	case <-t.C:
		return false
	}
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(bytes.ToValidUTF8(t.buf, []byte("?"))))
}
