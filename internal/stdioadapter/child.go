package stdioadapter

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// errChildGone: the child's stdin can no longer be written.
var errChildGone = errors.New("the stdio server is gone")

// child is the stdio MCP server process. It runs in a process group of its
// own, so that signals and the final kill reach everything it started, and
// so that a terminal's Ctrl-C reaches it only through the adapter.
type child struct {
	cmd    *exec.Cmd
	stdin  *os.File // the adapter's end of the child's stdin
	stdout *os.File // the adapter's end of the child's stdout
	stderr *os.File // the adapter's end of the child's stderr; nil when the child writes to a file directly

	stderrDone chan struct{} // closed when the child's stderr has been copied to its end

	in     chan []byte   // messages for the writer goroutine
	broken chan struct{} // closed when writing to the child's stdin failed
	exited chan struct{} // closed once the child has exited and been reaped
	code   int           // the exit code, valid after exited is closed
}

// startChild starts argv with stdin and stdout connected to the adapter and
// stderr going to stderr unchanged.
func startChild(argv []string, stderr io.Writer) (*child, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("while creating the stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("while creating the stdout pipe: %w", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = inR
	cmd.Stdout = outW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// stderr: a file (the adapter's own stderr, in a pod) is handed to the
	// child as is. Anything else is fed from a pipe of ours, not by os/exec,
	// whose Wait would wait for every process holding that pipe open and so
	// see the exit late.
	var errR *os.File
	if f, ok := stderr.(*os.File); ok {
		cmd.Stderr = f
	} else {
		var errW *os.File
		if errR, errW, err = os.Pipe(); err != nil {
			inR.Close()
			inW.Close()
			outR.Close()
			outW.Close()
			return nil, fmt.Errorf("while creating the stderr pipe: %w", err)
		}
		cmd.Stderr = errW
		defer errW.Close()
	}
	err = cmd.Start()
	inR.Close() // the child holds its own copies now
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		if errR != nil {
			errR.Close()
		}
		return nil, err
	}
	c := &child{
		cmd:        cmd,
		stdin:      inW,
		stdout:     outR,
		stderr:     errR,
		stderrDone: make(chan struct{}),
		in:         make(chan []byte, 64),
		broken:     make(chan struct{}),
		exited:     make(chan struct{}),
	}
	if errR != nil {
		go func() {
			defer close(c.stderrDone)
			_, _ = io.Copy(stderr, errR)
		}()
	} else {
		close(c.stderrDone)
	}
	go c.writeLoop()
	go c.wait()
	return c, nil
}

// startExitCode is the adapter's exit code when the command cannot be
// started at all, as shells report it: 127 not found, 126 not executable.
func startExitCode(err error) int {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return 127
	case errors.Is(err, fs.ErrPermission):
		return 126
	}
	return 1
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// wait reaps the child. Whatever it started and left behind in its group
// goes with it, killed while the child's pid still names the group.
func (c *child) wait() {
	waitExited(c.pid())
	c.signal(syscall.SIGKILL)
	_ = c.cmd.Wait() // the status is in ProcessState; err only repeats it
	c.code = exitCode(c.cmd.ProcessState)
	close(c.exited)
}

// exitCode maps a wait status to a process exit code: a death by signal N
// becomes 128+N, as shells and container runtimes report it.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// send queues one message for the child's stdin.
func (c *child) send(ctx context.Context, b []byte) error {
	select {
	case c.in <- b:
		return nil
	case <-c.broken:
		return errChildGone
	case <-c.exited:
		return errChildGone
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writeLoop is the only writer of the child's stdin, so messages never
// interleave; each is one line.
func (c *child) writeLoop() {
	defer c.stdin.Close()
	for {
		select {
		case b := <-c.in:
			line := make([]byte, 0, len(b)+1)
			line = append(append(line, b...), '\n')
			if _, err := c.stdin.Write(line); err != nil {
				close(c.broken)
				return
			}
		case <-c.exited:
			return
		}
	}
}

// readLoop calls handle with each line the child writes to stdout, until
// stdout ends. A line longer than maxBytes is dropped (with a note on
// stderr through onDrop) rather than buffered without bound.
func (c *child) readLoop(maxBytes int, handle func([]byte), onDrop func(size int)) {
	br := bufio.NewReaderSize(c.stdout, 64*1024)
	var line []byte
	dropping := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !dropping {
			if len(line)+len(chunk) > maxBytes+2 { // +2: the line break itself
				dropping = true
				onDrop(len(line) + len(chunk))
				line = nil
			} else {
				line = append(line, chunk...)
			}
		}
		switch {
		case err == nil:
			if !dropping {
				if l := bytes.TrimRight(line, "\r\n"); len(bytes.TrimSpace(l)) > 0 {
					handle(l)
				}
			}
			line, dropping = nil, false
		case errors.Is(err, bufio.ErrBufferFull):
			// part of a long line: keep reading
		default:
			if !dropping && len(bytes.TrimSpace(line)) > 0 {
				handle(line) // the last line had no line break
			}
			return
		}
	}
}

// signal sends sig to the child's whole process group.
func (c *child) signal(sig syscall.Signal) {
	_ = syscall.Kill(-c.pid(), sig) // ESRCH: the group is already gone
}

// drain waits up to timeout for the output the child wrote before it exited,
// then stops reading: a process that escaped the group may hold the pipes
// open for ever.
func (c *child) drain(stdoutDone <-chan struct{}, timeout time.Duration) {
	deadline := time.After(timeout)
	for _, done := range []<-chan struct{}{stdoutDone, c.stderrDone} {
		select {
		case <-done:
		case <-deadline:
		}
	}
	c.stdout.Close()
	if c.stderr != nil {
		c.stderr.Close()
	}
	<-stdoutDone
	<-c.stderrDone
}
