package mcpbridge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/upstream"
)

// DefaultShutdownDelay is how long a stopping replica goes on serving.
const DefaultShutdownDelay = 5 * time.Second

// ReasonStopping is the reason (tool.failed, the answer's error data) of a
// request this replica ended because it is stopping. One that had not gone
// upstream is safe to send again (another replica answers it); a call cut
// while with its server may have run there, and its answer says so
// (retryable false, see upstreamError).
const ReasonStopping = "bridge_stopping"

// errStopping is what a request this replica ends while stopping is told
// (context.Cause) and answers with: an upstream.Error, so that a call
// ended under it fails with this reason, not as cancelled.
var errStopping error = &upstream.Error{Reason: ReasonStopping,
	Err: errors.New("this bridge replica is stopping: send the request again, another replica answers it")}

// Stopping reports whether err is (or wraps) the end of a request by a
// stopping replica.
func Stopping(err error) bool {
	var ue *upstream.Error
	return errors.As(err, &ue) && ue.Reason == ReasonStopping
}

// StopBounds are the phases of a replica's stop, each bounded: their sum
// is the most a stop takes, and must stay under the pod's
// terminationGracePeriodSeconds (the chart's 30 s), or the kubelet kills
// the process before its audit is flushed.
type StopBounds struct {
	// Delay: the replica goes on serving (readyz failing, each answer with
	// Connection: close) while the Service and kube-proxy catch up with
	// its leaving.
	Delay time.Duration
	// Drain: calls in flight upstream may finish; at its end the ones left
	// fail with ReasonStopping. Waits that only a person or an agent can
	// end (approvals, elicitations, parked calls, GET and listen streams)
	// end at its start.
	Drain time.Duration
	// Sessions: the agents' upstream sessions are ended, a DELETE each.
	Sessions time.Duration
	// Flush: the audit stream's and the traces' last batches.
	Flush time.Duration
}

// DefaultStopBounds add up to 5 + 8 + 3 + 4 = 20 s, and stopAnswerGrace (1 s) for
// the last answers: Total() is 21 s, 9 s under the chart's grace period
// (the exit fits in that margin).
var DefaultStopBounds = StopBounds{Delay: DefaultShutdownDelay, Drain: 8 * time.Second, Sessions: 3 * time.Second, Flush: 4 * time.Second}

// MaxStop is the most a stop may take: the chart's
// terminationGracePeriodSeconds (30 s) less 2 s for the exit.
const MaxStop = 28 * time.Second

// Total is the most a stop with these bounds takes, answers written.
func (s StopBounds) Total() time.Duration {
	return s.Delay + s.Drain + stopAnswerGrace + s.Sessions + s.Flush
}

// stopAnswerGrace is how long the requests ended at the end of the drain
// have to write their answers and audit events before their connections
// are closed under them.
const stopAnswerGrace = time.Second

// stopper ends a stopping replica's work in two steps: its waits first,
// then its calls.
type stopper struct {
	stopping atomic.Bool // readyz fails from the first moment
	waits    context.Context
	endWaits context.CancelCauseFunc
	calls    context.Context
	endCalls context.CancelCauseFunc
	// deadline is when the agents' requests must be done (set when the
	// drain starts): what a handler still writes after its context ended
	// (a ToolApproval's status) is bounded by it, so that its audit event
	// comes before the audit stream closes.
	deadline atomic.Pointer[time.Time]
	handlers handlers
}

func newStopper() *stopper {
	s := &stopper{}
	s.waits, s.endWaits = context.WithCancelCause(context.Background())
	s.calls, s.endCalls = context.WithCancelCause(context.Background())
	return s
}

// handlersDeadline is the stop's deadline for the agents' requests; false
// while the replica is not stopping.
func (s *stopper) handlersDeadline() (time.Time, bool) {
	if d := s.deadline.Load(); d != nil {
		return *d, true
	}
	return time.Time{}, false
}

// handlers counts the agents' requests being served. http.Server.Close
// does not wait for them, and one may still write its audit end (a
// ToolApproval's status written to a slow API server first): Stop waits
// for them before it closes the audit stream.
type handlers struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0
}

func (h *handlers) enter() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		h.idle = make(chan struct{})
	}
	h.n++
}

func (h *handlers) leave() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n--; h.n == 0 {
		close(h.idle)
	}
}

// wait waits until no request is being served, or ctx ends.
func (h *handlers) wait(ctx context.Context) error {
	h.mu.Lock()
	if h.n == 0 {
		h.mu.Unlock()
		return nil
	}
	idle, n := h.idle, h.n
	h.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%d requests still being served: %w", n, ctx.Err())
	}
}

// untilWaitsEnd is ctx, also ended (cause errStopping) when the replica's
// waits end: for a request that waits on a person or its agent.
func (b *Bridge) untilWaitsEnd(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(b.stop.waits, func() { cancel(errStopping) })
	return ctx, func() {
		stop()
		cancel(nil)
	}
}

// endWaits ends what waits on someone outside the bridge: GET and listen
// streams, approvals and elicitations waiting for an answer (through
// untilWaitsEnd), and the parked calls, whose agents were answered already:
// their end goes to the audit stream, and their retries go to another
// replica, which says the call is not held there.
func (b *Bridge) endWaits() {
	b.stop.endWaits(errStopping)
	b.parked.Range(func(_, v any) bool {
		v.(*parkedCall).p.cancel(errStopping)
		return true
	})
}

// Stop stops a replica the way a pod behind a Service must stop, within
// bounds.Total():
//
//   - readyz fails at once, and srv goes on serving for bounds.Delay, each
//     answer with Connection: close. A deleted pod leaves the Service's endpoints when it
//     gets SIGTERM, but kube-proxy (or a load balancer) takes a moment to
//     stop sending it new connections: each agent's next request opens a
//     new connection, which lands on another replica once the Service has
//     caught up. Stopping at once would make requests sent in the first
//     second after a deletion hang on a pod that no longer answers.
//   - srv then refuses new connections, the waits on people and agents end
//     with ReasonStopping, and the calls in flight have bounds.Drain to
//     finish; those left fail with ReasonStopping (their audit chain ends
//     with tool.failed), and connections still open after their answers
//     are closed.
//   - the agents' upstream sessions end with a DELETE each (reg.Close), so
//     servers free what they keep per session, within bounds.Sessions.
//   - the audit stream and flush (the traces) are flushed within
//     bounds.Flush, the audit stream within half of it.
//
// Without Stop a GET stream or a call waiting for a person kept
// http.Server.Shutdown waiting until its deadline, and was then cut with
// no answer and no end in the audit stream.
func (b *Bridge) Stop(srv *http.Server, reg *routes.Registry, aw *audit.Writer, flush func(context.Context) error, bounds StopBounds) error {
	// Every answer from now on carries Connection: close
	// (closingWhileStopping): each connection in use ends after its next
	// answer, cleanly. The connections idle now are left open through the
	// delay: closing them at once (SetKeepAlivesEnabled(false) does) races
	// with an agent sending its next request on one, which then fails as
	// EOF, written but never answered.
	b.stop.stopping.Store(true)
	time.Sleep(bounds.Delay)
	srv.SetKeepAlivesEnabled(false)

	// The requests' last writes (their audit ends) must be done by the
	// end of the sessions' phase, before the audit stream closes.
	deadline := time.Now().Add(bounds.Drain + stopAnswerGrace + bounds.Sessions)
	b.stop.deadline.Store(&deadline)
	drained := make(chan error, 1)
	drain, cancelDrain := context.WithTimeout(context.Background(), bounds.Drain+stopAnswerGrace)
	defer cancelDrain()
	go func() { drained <- srv.Shutdown(drain) }()
	b.endWaits()
	t := time.NewTimer(bounds.Drain)
	var errs []error
	select {
	case err := <-drained:
		t.Stop()
		errs = append(errs, err)
	case <-t.C:
		b.stop.endCalls(errStopping)
		if err := <-drained; err != nil {
			// Answers that could not be written in the grace: their
			// connections are cut.
			_ = srv.Close()
			errs = append(errs, fmt.Errorf("while waiting for the last answers: %w", err))
		}
	}
	// Nothing may start after the drain (a handler still returning).
	b.stop.endCalls(errStopping)

	// The upstream sessions end while the requests cut by srv.Close (or
	// still returning) finish their last writes.
	sctx, cancel := context.WithDeadline(context.Background(), deadline)
	served := make(chan error, 1)
	go func() { served <- b.stop.handlers.wait(sctx) }()
	errs = append(errs, reg.Close(sctx))
	if err := <-served; err != nil {
		errs = append(errs, fmt.Errorf("before closing the audit stream: %w", err))
	}
	cancel()

	// The audit stream gets half the flush's bound, so that a slow sink
	// leaves the traces their share; the traces get what is left.
	fctx, cancel := context.WithTimeout(context.Background(), bounds.Flush)
	defer cancel()
	actx, cancelAudit := context.WithTimeout(fctx, bounds.Flush/2)
	defer cancelAudit()
	if err := aw.Close(actx); err != nil {
		errs = append(errs, fmt.Errorf("while flushing the audit stream: %w", err))
	}
	if flush != nil {
		if err := flush(fctx); err != nil {
			errs = append(errs, fmt.Errorf("while flushing traces: %w", err))
		}
	}
	return errors.Join(errs...)
}
