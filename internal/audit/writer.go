// Package audit writes the bridge's audit events (docs/audit.md): one JSON object
// per line, {seq, time, type, session, subject, …payload}, with the event
// types and payloads of events.go. Write gives each event its seq at once,
// in the order of the stream, so the bridge knows a permission decision is
// recorded before it forwards the call; a background goroutine writes the
// bytes to the sink (stdout or a file) in batches, off the call path, with
// no fsync per event. Secrets are redacted from every string of a payload
// before it is queued, and arguments are shown as ArgsMode says.
//
// The queue is bounded. When it is full, Write waits up to BlockTimeout for
// space, then drops the event and says so (ErrDropped); until space returns
// later events are dropped at once, so a stuck sink costs the bridge no
// more than one wait. Nothing is dropped silently: Stats counts drops, and
// an audit.dropped {count} event enters the stream as soon as there is
// space again. Blocking instead would stall every call behind a stuck log
// reader; a caller that must not proceed without its record (the permission
// decision) sees ErrDropped and fails the call.
package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/rawjson"
	"github.com/mcp-operator/mcp-operator/internal/redact"
)

// ArgsMode says how much of a call's arguments an event shows.
type ArgsMode int

const (
	// ArgsPreview shows the (redacted) arguments' JSON text as a string, cut
	// to ArgsPreviewBytes with a note of the full size. The default.
	ArgsPreview ArgsMode = iota
	// ArgsFull shows the (redacted) arguments as they are.
	ArgsFull
	// ArgsNone leaves them out.
	ArgsNone
)

// ParseArgsMode reads "full", "preview" or "none".
func ParseArgsMode(s string) (ArgsMode, error) {
	switch s {
	case "preview", "":
		return ArgsPreview, nil
	case "full":
		return ArgsFull, nil
	case "none":
		return ArgsNone, nil
	}
	return 0, fmt.Errorf("audit arguments mode %q: want full, preview or none", s)
}

// Defaults of Options.
const (
	DefaultArgsPreviewBytes = 256
	DefaultBufferBytes      = 1 << 20
	DefaultBlockTimeout     = 50 * time.Millisecond
	DefaultLinger           = 2 * time.Millisecond
)

var (
	// ErrDropped means the event was not recorded: the queue stayed full.
	ErrDropped = errors.New("audit event dropped: the audit sink is not keeping up")
	// ErrClosed means the Writer is closed.
	ErrClosed = errors.New("audit writer closed")
)

// Options configure a Writer. Zero values mean the defaults.
type Options struct {
	// Sink receives the JSON lines; os.Stdout when nil. If it is an
	// *os.File other than stdout or stderr, Close syncs and closes it.
	Sink io.Writer
	// ArgsMode and ArgsPreviewBytes say how arguments are shown.
	ArgsMode         ArgsMode
	ArgsPreviewBytes int
	// Redactor redacts payload strings; redact.Shapes when nil. SetRedactor
	// replaces it (when servers and their Secrets change).
	Redactor *redact.Redactor
	// BufferBytes bounds the queue of encoded events.
	BufferBytes int
	// BlockTimeout is how long Write waits for space in a full queue.
	BlockTimeout time.Duration
	// Linger is how long the sink goroutine lets events gather before it
	// writes them, so that a busy bridge makes one write (and one wake-up)
	// per batch, not per event. Flush, Close and a half-full queue cut it
	// short.
	Linger time.Duration
	// Clock gives event times; time.Now when nil. Tests fix it.
	Clock func() time.Time
	// Log, when set, is told when dropping starts and ends and when the sink
	// fails (logr.Logger's Info has this signature). It is called with the
	// Writer's lock held: it must not write audit events.
	Log func(msg string, keysAndValues ...any)
}

// Stats are the Writer's counters, for metrics.
type Stats struct {
	// Accepted events got a seq; Written ones reached the sink.
	Accepted, Written uint64
	// Dropped events were refused with ErrDropped.
	Dropped uint64
	// SinkErrors counts failed writes to the sink (their events are lost).
	SinkErrors uint64
	// LastSinkError is the latest of them.
	LastSinkError error
}

// Writer writes audit events. Its methods are safe for concurrent use.
type Writer struct {
	opts     Options
	redactor redactorBox
	ids      idCache // the redacted session ids and subjects

	mu      sync.Mutex
	seq     uint64
	queue   []byte        // encoded events not yet handed to the sink
	changed chan struct{} // closed (and replaced) when the sink took the queue
	// linger is armed by the event that finds the queue empty and wakes
	// the sink goroutine Linger later; kick wakes it at once (Flush,
	// Close, a half-full queue). A batch costs the callers no wake-up of
	// the sink goroutine: waking it at the first event of each batch only
	// for it to wait Linger would, on sequential calls, be a hand-off to
	// another thread per batch.
	linger     *time.Timer
	kick       chan struct{}
	dropping   bool   // events are being dropped until space returns
	lostCount  uint64 // dropped events not yet reported in the stream
	queuedUpTo uint64 // seq of the last event queued
	writtenTo  uint64 // seq of the last event the sink took
	closed     bool
	stats      Stats
	timeSec    int64         // the second timePrefix shows
	timePrefix []byte        // "2006-01-02T15:04:05."
	done       chan struct{} // closed when the sink goroutine ends
}

type redactorBox struct {
	mu sync.RWMutex
	r  *redact.Redactor
}

// New starts a Writer.
func New(o Options) *Writer {
	if o.Sink == nil {
		o.Sink = os.Stdout
	}
	if o.ArgsPreviewBytes <= 0 {
		o.ArgsPreviewBytes = DefaultArgsPreviewBytes
	}
	if o.BufferBytes <= 0 {
		o.BufferBytes = DefaultBufferBytes
	}
	if o.BlockTimeout <= 0 {
		o.BlockTimeout = DefaultBlockTimeout
	}
	if o.Linger <= 0 {
		o.Linger = DefaultLinger
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	w := &Writer{opts: o, changed: make(chan struct{}), linger: time.NewTimer(time.Hour), kick: make(chan struct{}, 1), done: make(chan struct{})}
	w.linger.Stop()
	w.SetRedactor(o.Redactor)
	go w.drain()
	return w
}

// OpenFile opens (creating, mode 0600) a file to append audit events to.
func OpenFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("while opening the audit file: %w", err)
	}
	return f, nil
}

// SetRedactor replaces the redactor (nil: credential shapes only), for
// example with one that knows the Secret values of all current servers.
func (w *Writer) SetRedactor(r *redact.Redactor) {
	if r == nil {
		r = redact.Shapes()
	}
	w.redactor.mu.Lock()
	w.redactor.r = r
	w.redactor.mu.Unlock()
}

func (w *Writer) currentRedactor() *redact.Redactor {
	w.redactor.mu.RLock()
	defer w.redactor.mu.RUnlock()
	return w.redactor.r
}

// Write records one event and returns its seq. When it returns without
// error the event is in the stream at that seq (the bytes reach the sink
// shortly after; Flush waits for them). session is the MCP session id, ""
// for events of no session (server lifecycle); subject is the caller's
// identity, "" likewise.
func (w *Writer) Write(session, subject string, p Payload) (uint64, error) {
	return w.WriteTraced(session, subject, Trace{}, p)
}

// WritesArgsDigest says whether an event carrying these arguments shows
// their digest (argumentsSha256): only a preview does, and only of some
// arguments. A caller hashes arguments for its events only when this says
// so: canonicalizing them costs microseconds per call, and in the full and
// none modes nothing would read the result.
func (w *Writer) WritesArgsDigest(args []byte) bool {
	return len(args) > 0 && w.opts.ArgsMode == ArgsPreview
}

// Trace names the span an event was written in, so that one can go from an
// audit line to its trace: W3C ids in lower-case hex, empty when the
// request was not traced.
type Trace struct {
	TraceID, SpanID string
}

// WriteTraced is Write with the event's traceId and spanId.
func (w *Writer) WriteTraced(session, subject string, t Trace, p Payload) (uint64, error) {
	e := w.encodeBody(session, subject, t, p)
	defer fieldWriters.Put(e)
	body := e.b // copied into the queue: the buffer goes back to the pool
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, ErrClosed
	}
	if !w.makeRoom(len(body) + 64) {
		if w.closed {
			return 0, ErrClosed
		}
		w.stats.Dropped++
		w.lostCount++
		return 0, ErrDropped
	}
	w.reportLost()
	return w.enqueue(body), nil
}

// makeRoom waits (with w.mu held, released while waiting) until the queue
// has room for n more bytes, at most BlockTimeout and not at all while
// dropping. An empty queue always has room, however large the event.
func (w *Writer) makeRoom(n int) bool {
	fits := func() bool { return len(w.queue) == 0 || len(w.queue)+n <= w.opts.BufferBytes }
	if fits() {
		w.dropping = false
		return true
	}
	if w.dropping {
		return false
	}
	deadline := time.NewTimer(w.opts.BlockTimeout)
	defer deadline.Stop()
	for !fits() {
		changed := w.changed
		w.mu.Unlock()
		select {
		case <-changed:
			w.mu.Lock()
		case <-deadline.C:
			w.mu.Lock()
			if fits() {
				return true
			}
			w.dropping = true
			w.log("audit queue full: dropping events until the sink catches up", "waited", w.opts.BlockTimeout.String(), "queuedBytes", len(w.queue))
			return false
		}
		if w.closed {
			return false
		}
	}
	return true
}

// reportLost puts an audit.dropped event in the stream when events were
// dropped since the last one. w.mu is held and the queue has room.
func (w *Writer) reportLost() {
	if w.lostCount == 0 {
		return
	}
	e := w.encodeBody("", "", Trace{}, Dropped{Count: w.lostCount})
	defer fieldWriters.Put(e)
	w.log("audit sink caught up", "droppedEvents", w.lostCount)
	w.lostCount = 0
	w.enqueue(e.b)
}

func (w *Writer) log(msg string, kv ...any) {
	if w.opts.Log != nil {
		w.opts.Log(msg, kv...)
	}
}

// enqueue gives body its seq and time and appends the line to the queue.
// w.mu is held, which makes seq order the stream's order.
func (w *Writer) enqueue(body []byte) uint64 {
	if len(w.queue) == 0 {
		w.linger.Reset(w.opts.Linger)
	}
	w.seq++
	w.queue = append(w.queue, `{"seq":`...)
	w.queue = strconv.AppendUint(w.queue, w.seq, 10)
	w.queue = append(w.queue, `,"time":"`...)
	w.queue = w.appendTime(w.queue, w.opts.Clock())
	w.queue = append(w.queue, `",`...)
	w.queue = append(w.queue, body...)
	w.queuedUpTo = w.seq
	w.stats.Accepted++
	if len(w.queue) >= w.opts.BufferBytes/2 {
		signal(w.kick)
	}
	return w.seq
}

// signal sends on a channel of capacity 1 unless a signal is pending.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// appendTime writes t in UTC as 2006-01-02T15:04:05.000000Z, formatting
// the part up to the second once a second. w.mu is held.
func (w *Writer) appendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	if sec := t.Unix(); sec != w.timeSec || w.timePrefix == nil {
		w.timeSec = sec
		w.timePrefix = t.Truncate(time.Second).AppendFormat(w.timePrefix[:0], "2006-01-02T15:04:05.")
	}
	b = append(b, w.timePrefix...)
	us := t.Nanosecond() / 1000
	for div := 100000; div > 0; div /= 10 {
		b = append(b, byte('0'+us/div%10))
	}
	return append(b, 'Z')
}

// encodeBody writes everything after "time": the type, session, subject, the
// trace ids and the payload's fields, redacted, and the closing brace and
// newline, into e.b of a fieldWriter from the pool; the caller puts it back
// when it has copied the bytes.
func (w *Writer) encodeBody(session, subject string, t Trace, p Payload) *fieldWriter {
	e := fieldWriters.Get().(*fieldWriter)
	e.b, e.r, e.argsMode, e.argsPreview = e.b[:0], w.currentRedactor(), w.opts.ArgsMode, w.opts.ArgsPreviewBytes
	e.b = append(e.b, `"type":`...)
	e.b = rawjson.AppendString(e.b, p.EventType())
	e.key("session")
	e.b = rawjson.AppendString(e.b, w.ids.redacted(e.r, session))
	e.key("subject")
	e.b = rawjson.AppendString(e.b, w.ids.redacted(e.r, subject))
	if t.TraceID != "" {
		// Hex ids the bridge made: nothing to redact (and a 32-digit hex
		// string must not look like a secret to the redactor).
		e.key("traceId")
		e.b = rawjson.AppendString(e.b, t.TraceID)
		e.key("spanId")
		e.b = rawjson.AppendString(e.b, t.SpanID)
	}
	p.fields(e)
	e.b = append(e.b, "}\n"...)
	return e
}

var fieldWriters = sync.Pool{New: func() any { return &fieldWriter{} }}

// drain hands the queue to the sink in batches until Close: a batch is
// what gathered from the first event into an empty queue until its linger
// ran out, or until a kick.
func (w *Writer) drain() {
	defer close(w.done)
	var spare []byte
	for {
		select {
		case <-w.linger.C:
		case <-w.kick:
		}
		for {
			w.mu.Lock()
			batch, upTo, closed := w.queue, w.queuedUpTo, w.closed
			if len(batch) > 0 {
				w.queue = spare[:0]
			}
			w.mu.Unlock()
			if len(batch) > 0 {
				w.write(batch, upTo)
				spare = batch
			}
			// Events that came during the write armed the linger again.
			// Once closed no event comes: what is left is written now.
			if !closed {
				break
			}
			if len(batch) == 0 {
				return
			}
		}
	}
}

// write hands one batch to the sink; upTo is the seq of its last event.
func (w *Writer) write(batch []byte, upTo uint64) {
	_, err := w.opts.Sink.Write(batch)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.stats.SinkErrors++
		w.stats.LastSinkError = err
		w.log("audit sink write failed: events lost", "error", err.Error(), "bytes", len(batch))
	} else {
		w.stats.Written += uint64(bytes.Count(batch, []byte{'\n'}))
	}
	w.writtenTo = upTo
	close(w.changed)
	w.changed = make(chan struct{})
}

// Flush waits until every event accepted before the call has been handed to
// the sink (and reports drops not yet in the stream), or ctx ends.
func (w *Writer) Flush(ctx context.Context) error {
	w.mu.Lock()
	if w.lostCount > 0 && !w.closed && w.makeRoom(64) {
		w.reportLost()
	}
	target := w.queuedUpTo
	defer w.mu.Unlock()
	signal(w.kick)
	for w.writtenTo < target {
		changed := w.changed
		w.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			w.mu.Lock()
			return fmt.Errorf("while flushing audit events: %w", ctx.Err())
		}
		w.mu.Lock()
	}
	return nil
}

// Close flushes, stops the Writer and closes (after syncing) a file sink.
// Later Writes return ErrClosed.
func (w *Writer) Close(ctx context.Context) error {
	err := w.Flush(ctx)
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	signal(w.kick)
	select {
	case <-w.done:
	case <-ctx.Done():
		return fmt.Errorf("while closing the audit writer: %w", ctx.Err())
	}
	if f, ok := w.opts.Sink.(*os.File); ok && f != os.Stdout && f != os.Stderr {
		// Only a regular file can be synced (not a pipe or a terminal).
		if info, serr := f.Stat(); serr == nil && info.Mode().IsRegular() {
			if serr := f.Sync(); serr != nil && err == nil {
				err = fmt.Errorf("while syncing the audit file: %w", serr)
			}
		}
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("while closing the audit file: %w", cerr)
		}
	}
	return err
}

// Stats returns the counters.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}
