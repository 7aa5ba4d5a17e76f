// Package streamhttp is the client side of MCP's Streamable HTTP transport,
// for both protocol eras: the stateless 2026-07-28 revision (every request
// stands alone, with MCP-Protocol-Version, Mcp-Method and Mcp-Name headers)
// and the session era (Mcp-Session-Id, DELETE on close, and SSE streams that
// are resumed with Last-Event-ID when they break off mid-response).
//
// It is written here rather than taken from mcp-go because mcp-go's client
// resumes only streams the server ends cleanly (not ones that break off),
// never sends notifications/cancelled, and hands back re-typed results.
package streamhttp

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/protocol"
	"github.com/mcp-operator/mcp-operator/internal/safeurl"
)

// StatelessVersion is the first protocol revision without sessions.
const StatelessVersion = protocol.StatelessVersion

// Options says where the server is and how to reach it.
type Options struct {
	// URL of the MCP endpoint, http or https.
	URL string
	// Header holds extra headers sent with every request (API keys).
	Header http.Header
	// BearerToken, if set, is sent as "Authorization: Bearer <token>".
	BearerToken string
	// Authorize, if set, sets the credential headers of every request,
	// after Header and BearerToken: a credential that changes while the
	// connection lives (a token refreshed before it expires), or that the
	// request's context carries. An error fails the request unsent.
	Authorize func(ctx context.Context, h http.Header) error
	// TLS configures https: the CA to trust and a client certificate for mTLS.
	TLS *tls.Config
	// DialTimeout and TLSHandshakeTimeout bound connecting (default 10s each).
	DialTimeout         time.Duration
	TLSHandshakeTimeout time.Duration
	// RequestTimeout bounds a call whose context has no deadline (default 60s).
	RequestTimeout time.Duration
	// MaxMessageBytes bounds one response or event (default 32 MiB).
	MaxMessageBytes int
	// MaxResumes is how many times in a row a broken response stream is
	// resumed without the server sending anything new (default 5).
	MaxResumes int
	// MaxIdleConns is how many idle HTTP connections to the server are kept
	// for reuse (default 8). A connection shared by many concurrent callers
	// (the bridge's) wants about as many as calls run at once: past it, each
	// call's connection is closed after use and the next one dials again.
	MaxIdleConns int
	// MaxRetryDelay caps the reconnection delay a server may ask for
	// (default 5s); DefaultRetryDelay is used when it asks for none (200ms).
	MaxRetryDelay     time.Duration
	DefaultRetryDelay time.Duration
}

func (o *Options) defaults() {
	if o.MaxIdleConns <= 0 {
		o.MaxIdleConns = 8
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	if o.TLSHandshakeTimeout <= 0 {
		o.TLSHandshakeTimeout = 10 * time.Second
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 60 * time.Second
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 32 << 20
	}
	if o.MaxResumes <= 0 {
		o.MaxResumes = 5
	}
	if o.MaxRetryDelay <= 0 {
		o.MaxRetryDelay = 5 * time.Second
	}
	if o.DefaultRetryDelay <= 0 {
		o.DefaultRetryDelay = 200 * time.Millisecond
	}
}

// HTTPError is a response that is not MCP: an unexpected status or body.
type HTTPError struct {
	Method      string // the JSON-RPC method being sent
	Status      int
	ContentType string
	Body        string // the start of the body, quoted
}

func (e *HTTPError) Error() string {
	if e.Status/100 == 2 {
		return fmt.Sprintf("while sending %s: HTTP status %d with content type %q is not an MCP response: %s", e.Method, e.Status, e.ContentType, e.Body)
	}
	return fmt.Sprintf("while sending %s: HTTP status %d: %s", e.Method, e.Status, e.Body)
}

// ErrNotTheAnswer is a single JSON answer that is a JSON-RPC message but not
// the response to the request sent (a request, a notification, another id).
var ErrNotTheAnswer = errors.New("the server answered with something else")

// ErrSessionExpired means the server no longer knows our session (404): the
// caller must connect again.
var ErrSessionExpired = errors.New("the server ended the MCP session (HTTP 404); connect again")

// ErrNotRun marks an error of a request the server refused before running
// it (its session had ended): sending it again, on another session, runs
// it once.
var ErrNotRun = errors.New("the server did not run the request")

// Conn is a Streamable HTTP connection. It implements jsonrpc.Conn.
type Conn struct {
	opts   Options
	url    string
	client *http.Client
	// ownsPool: the Conn was made by New, alone on its pool, and Close
	// drops the pool's idle connections too.
	ownsPool bool
	ids      jsonrpc.Pending

	mu              sync.Mutex
	sessionID       string
	protocolVersion string

	handlerMu sync.RWMutex
	handler   jsonrpc.NotificationHandler

	streams *streamEnds // the pool's
}

// New checks the options and builds the connection, with a pool of HTTP
// connections of its own; nothing is sent yet.
func New(opts Options) (*Conn, error) {
	p, err := NewPool(opts)
	if err != nil {
		return nil, err
	}
	c := p.Conn()
	c.ownsPool = true
	return c, nil
}

// Pool is the HTTP connections to one server, shared by the Conns made
// from it. Each of those Conns is an MCP connection (a session, in the
// session era) of its own; only the TCP (and TLS) connections under them
// are shared. The bridge keeps one Pool per server and opens a session per
// agent session on it: sessions follow agents, connections do not.
type Pool struct {
	opts    Options
	url     string
	client  *http.Client
	streams *streamEnds
}

// streamEnds is what a pool learned of how its server ends an answer's
// SSE stream (finishStream).
type streamEnds struct {
	// keptOpen counts the answers in a row whose stream stayed open past
	// drainWait after the response; at maxKeptOpen the pool stops waiting.
	keptOpen atomic.Int32
	skipped  atomic.Int32 // answers not waited for since keptOpen reached maxKeptOpen
	watch    drainWatch   // bounds each wait to drainWait
}

// maxKeptOpen: a moment of load can hold one stream's end back, a server
// that keeps its streams open holds every one.
const (
	maxKeptOpen   = 3
	retryKeptOpen = 32
)

// NewPool checks the options and builds the pool; nothing is dialled yet.
func NewPool(opts Options) (*Pool, error) {
	opts.defaults()
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL shown as safeurl shows it: it may carry a credential.
		return nil, fmt.Errorf("while parsing the server URL %s: want an absolute http:// or https:// URL", safeurl.String(opts.URL))
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: opts.DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       opts.TLS,
		TLSHandshakeTimeout:   opts.TLSHandshakeTimeout,
		MaxIdleConnsPerHost:   opts.MaxIdleConns,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
	}
	client := &http.Client{
		Transport: tr,
		// A redirect would carry our credentials elsewhere; MCP has none.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &Pool{opts: opts, url: u.String(), client: client, streams: &streamEnds{}}, nil
}

// Conn returns a new connection over the pool, with no session yet.
func (p *Pool) Conn() *Conn {
	return &Conn{opts: p.opts, url: p.url, client: p.client, streams: p.streams}
}

// WithCredentials is a pool over p's HTTP connections whose requests carry
// these credentials instead of p's (Options.Header, BearerToken,
// Authorize): a connection carries none of its own, each request its own.
func (p *Pool) WithCredentials(header http.Header, bearerToken string, authorize func(context.Context, http.Header) error) *Pool {
	opts := p.opts
	opts.Header, opts.BearerToken, opts.Authorize = header, bearerToken, authorize
	return &Pool{opts: opts, url: p.url, client: p.client, streams: p.streams}
}

// CloseIdle drops the pool's idle connections (their goroutines end with
// them). The pool stays usable: a later request dials again.
func (p *Pool) CloseIdle() { p.client.CloseIdleConnections() }

// SessionID is the session the server assigned ("" when stateless).
func (c *Conn) SessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID
}

// SetProtocolVersion sets the version announced in MCP-Protocol-Version.
func (c *Conn) SetProtocolVersion(v string) {
	c.mu.Lock()
	c.protocolVersion = v
	c.mu.Unlock()
}

func (c *Conn) state() (session, version string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID, c.protocolVersion
}

// SetNotificationHandler sets who receives the server's notifications.
func (c *Conn) SetNotificationHandler(h jsonrpc.NotificationHandler) {
	c.handlerMu.Lock()
	c.handler = h
	c.handlerMu.Unlock()
}

type callNotificationsKey struct{}

// WithCallNotifications makes the notifications that arrive on the response
// stream of the call made with ctx go to h instead of the connection's
// handler: on a connection shared by many callers (the bridge's), a log
// message sent during a call belongs to that call's caller.
func WithCallNotifications(ctx context.Context, h jsonrpc.NotificationHandler) context.Context {
	return context.WithValue(ctx, callNotificationsKey{}, h)
}

// RequestHandler answers a request the server sent on a call's response
// stream; a nil answer means the method is not offered. It must return
// once ctx ends: the call waits for its handlers before it returns.
type RequestHandler func(ctx context.Context, req *jsonrpc.Message) *jsonrpc.Message

// WithCallRequests makes the requests the server sends on the response
// stream of the call made with ctx (elicitation, sampling) go to h, which
// runs with the call's context: on the bridge's shared connection such a
// request belongs to that call's agent. Without h they are refused.
func WithCallRequests(ctx context.Context, h RequestHandler) context.Context {
	return context.WithValue(ctx, callRequestsKey{}, h)
}

type callRequestsKey struct{}

type callHeaderKey struct{}

// WithCallHeader adds h to the HTTP requests of the call made with ctx (its
// POST and any GET resuming its stream): per-call headers on a shared
// connection, such as the W3C trace context of the call's span.
func WithCallHeader(ctx context.Context, h http.Header) context.Context {
	return context.WithValue(ctx, callHeaderKey{}, h)
}

func callNotifications(ctx context.Context) jsonrpc.NotificationHandler {
	h, _ := ctx.Value(callNotificationsKey{}).(jsonrpc.NotificationHandler)
	return h
}

func (c *Conn) notify(m *jsonrpc.Message) {
	c.handlerMu.RLock()
	h := c.handler
	c.handlerMu.RUnlock()
	if h != nil {
		h(m)
	}
}

// Call POSTs req (its id is assigned here) and reads the response, either a
// JSON body or an SSE stream that ends with it. A stream that breaks off
// before the response is resumed with Last-Event-ID in the session era.
func (c *Conn) Call(ctx context.Context, req *jsonrpc.Message) (*jsonrpc.Message, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.RequestTimeout)
		defer cancel()
	}
	req.ID = c.ids.NextID()
	resp, err := c.call(ctx, req)
	if err != nil && ctx.Err() != nil {
		c.cancelled(req)
		return nil, fmt.Errorf("while waiting for the answer to %s: %w", req.Method, ctx.Err())
	}
	return resp, err
}

func (c *Conn) call(ctx context.Context, req *jsonrpc.Message) (*jsonrpc.Message, error) {
	body, err := jsonrpc.Encode(req)
	if err != nil {
		return nil, fmt.Errorf("while encoding %s: %w", req.Method, err)
	}
	hresp, err := c.do(ctx, http.MethodPost, body, req)
	if err != nil {
		return nil, err
	}
	defer hresp.Body.Close()
	if sid := hresp.Header.Get("Mcp-Session-Id"); sid != "" {
		c.mu.Lock()
		c.sessionID = sid
		c.mu.Unlock()
	}
	session, _ := c.state()
	if hresp.StatusCode == http.StatusNotFound && session != "" {
		return nil, fmt.Errorf("while sending %s: %w (%w)", req.Method, ErrSessionExpired, ErrNotRun)
	}
	mediaType := mediaTypeOf(hresp.Header.Get("Content-Type"))
	switch {
	case mediaType == "text/event-stream" && hresp.StatusCode == http.StatusOK:
		resp, ended, err := c.readStream(ctx, req, hresp.Body)
		if err == nil {
			c.finishStream(ctx, hresp, ended)
		}
		return resp, err
	case mediaType == "application/json":
		return c.readJSON(req, hresp)
	case hresp.StatusCode == http.StatusAccepted:
		return nil, fmt.Errorf("while sending %s: the server accepted the request (202) but sent no response", req.Method)
	default:
		return nil, c.httpError(req.Method, hresp)
	}
}

// finishStream reads what is left of an answer's SSE stream once its
// response came. A server ends the stream right after the response (the
// go-sdk's does), and only an HTTP/1 body read to its end lets the
// transport reuse the connection: closed unread, the connection is closed
// too, and the next request dials a new one (behind the bridge the go-sdk's
// everything-server spent about 20 % more CPU per call on those
// connections in make bench-bridge). A server that keeps the stream open is not
// waited for: after drainWait the body is closed (by the pool's
// drainWatch), and after maxKeptOpen
// such answers in a row the pool stops waiting but for one answer in
// retryKeptOpen (a moment of load can hold streams back too). ended says
// the stream's end was read already, with the response: nothing is left to
// wait for (no timer either).
func (c *Conn) finishStream(ctx context.Context, hresp *http.Response, ended bool) {
	if c.streams == nil || hresp.ProtoMajor >= 2 || ctx.Err() != nil {
		return // HTTP/2 closes the stream, not the connection
	}
	if ended {
		if c.streams.keptOpen.Load() != 0 {
			c.streams.keptOpen.Store(0)
		}
		return
	}
	if k := c.streams.keptOpen.Load(); k >= maxKeptOpen && c.streams.skipped.Add(1)%retryKeptOpen != 0 {
		return
	}
	id := c.streams.watch.start(hresp.Body)
	n, err := io.Copy(io.Discard, io.LimitReader(hresp.Body, drainBytes))
	switch timedOut := !c.streams.watch.done(id); {
	case timedOut || n == drainBytes:
		c.streams.keptOpen.Add(1)
	case err == nil:
		c.streams.keptOpen.Store(0)
	}
}

// drainWait and drainBytes bound finishStream: what a server that ends the
// stream after its response still sends (the stream's last chunk) arrives
// at once and is a few bytes.
const (
	drainWait  = 100 * time.Millisecond
	drainBytes = 4 << 10
)

func (c *Conn) httpError(method string, hresp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(hresp.Body, 512))
	return &HTTPError{Method: method, Status: hresp.StatusCode, ContentType: hresp.Header.Get("Content-Type"), Body: jsonrpc.Snippet(data)}
}

// readJSON reads a single JSON response. A JSON-RPC error on a 4xx status is
// still an answer (the era fallback looks at its code).
func (c *Conn) readJSON(req *jsonrpc.Message, hresp *http.Response) (*jsonrpc.Message, error) {
	// One byte over the bound tells a body too large; the bound is clamped
	// so that the sum cannot overflow to a negative limit (an empty body).
	data, err := io.ReadAll(io.LimitReader(hresp.Body, int64(min(c.opts.MaxMessageBytes, math.MaxInt-1))+1))
	if err != nil {
		return nil, fmt.Errorf("while reading the answer to %s: %w", req.Method, err)
	}
	if len(data) > c.opts.MaxMessageBytes {
		return nil, fmt.Errorf("while reading the answer to %s: %w: larger than %d bytes (bound maxMessageBytes)", req.Method, ErrTooLarge, c.opts.MaxMessageBytes)
	}
	m, err := jsonrpc.Decode(data)
	if err != nil {
		if hresp.StatusCode >= 300 {
			return nil, &HTTPError{Method: req.Method, Status: hresp.StatusCode, Body: jsonrpc.Snippet(data)}
		}
		return nil, fmt.Errorf("while reading the answer to %s: %w", req.Method, err)
	}
	if !m.IsResponse() || (len(m.ID) > 0 && !bytes.Equal(m.ID, req.ID)) {
		return nil, fmt.Errorf("while reading the answer to %s: %w: %s", req.Method, ErrNotTheAnswer, jsonrpc.Snippet(data))
	}
	if len(m.ID) == 0 && m.Error == nil {
		return nil, fmt.Errorf("while reading the answer to %s: %w: a result without an id", req.Method, ErrNotTheAnswer)
	}
	return m, nil
}

// readStream reads SSE until the response to req, resuming a broken stream
// (session era only: the stateless revision has no resumption). ended says
// body had ended too when the response came in it.
func (c *Conn) readStream(ctx context.Context, req *jsonrpc.Message, body io.ReadCloser) (_ *jsonrpc.Message, ended bool, _ error) {
	var cur sseCursor
	var resp *jsonrpc.Message
	// The handlers of the server's requests during the call end before the
	// call does: what they record (the bridge's mcp.server_request event)
	// comes before the call's own end, in every run. Once the call has its
	// answer or failed, a handler still waiting (for an agent who has not
	// answered) is told the call ended. Their context is made at the first
	// such request: most calls get none.
	var hctx context.Context
	var endHandlers context.CancelCauseFunc
	var handlers sync.WaitGroup
	defer func() {
		if endHandlers != nil {
			endHandlers(callEnd(ctx, resp))
			handlers.Wait()
		}
	}()
	onEvent := func(ev sseEvent) (bool, error) {
		if ev.name != "" && ev.name != "message" {
			return false, nil
		}
		m, err := jsonrpc.Decode(ev.data)
		if err != nil {
			return false, fmt.Errorf("while reading the answer to %s: %w", req.Method, err)
		}
		switch {
		case m.IsResponse() && bytes.Equal(m.ID, req.ID):
			resp = m
			return true, nil
		case m.IsRequest():
			if h, _ := ctx.Value(callRequestsKey{}).(RequestHandler); h != nil {
				if hctx == nil {
					hctx, endHandlers = context.WithCancelCause(ctx)
				}
				handlers.Add(1)
				go c.relay(hctx, m, h, handlers.Done)
			} else {
				go c.answer(m)
			}
		case m.IsNotification():
			if h := callNotifications(ctx); h != nil {
				h(m)
			} else {
				c.notify(m)
			}
		}
		return false, nil
	}
	err := c.readBody(ctx, body, &cur, onEvent)
	ended = cur.ended
	for failures := 0; resp == nil; {
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		if err != nil && !isStreamBreak(err) {
			return nil, false, err
		}
		_, version := c.state()
		if len(cur.lastID) == 0 || version >= StatelessVersion {
			return nil, false, fmt.Errorf("while reading the answer to %s: the response stream ended before the response (%v) and cannot be resumed", req.Method, streamEndReason(err))
		}
		if failures >= c.opts.MaxResumes {
			return nil, false, fmt.Errorf("while reading the answer to %s: the response stream broke off %d times without progress (bound maxResumes)", req.Method, failures)
		}
		before := string(cur.lastID)
		var rerr error
		err, rerr = c.resume(ctx, req, &cur, onEvent)
		if rerr != nil {
			return nil, false, rerr
		}
		if string(cur.lastID) == before {
			failures++
		} else {
			failures = 0
		}
	}
	return resp, ended, nil
}

// ErrCallAnswered and ErrCallBroke are what the handlers of a server's
// requests during a call are told (context.Cause) when the call ended
// under them for a reason of its own: the server answered it, or its
// response stream ended without the answer. A call ended by its caller
// tells them the caller's cause instead (the agent went away, the
// deadline).
var (
	ErrCallAnswered = errors.New("the server answered the call")
	ErrCallBroke    = errors.New("the call's response stream ended without its answer")
)

// callEnd is why a call's handlers are ended as it returns: the answer if
// it came (the caller's cause may land just after it, and is not why),
// else the caller's cause before a broken stream: when the caller ends the
// call, ctx's children end in no set order, and readBody's AfterFunc may
// close the body (the call returns without its answer) before hctx is
// ended with ctx's cause.
func callEnd(ctx context.Context, resp *jsonrpc.Message) error {
	if resp != nil {
		return ErrCallAnswered
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return ErrCallBroke
}

func (c *Conn) readBody(ctx context.Context, body io.ReadCloser, cur *sseCursor, onEvent func(sseEvent) (bool, error)) error {
	// Closing the body is what unblocks a read when the context ends.
	stop := context.AfterFunc(ctx, func() { body.Close() })
	defer stop()
	err := readSSE(body, c.opts.MaxMessageBytes, cur, onEvent)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func isStreamBreak(err error) bool {
	return err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isNetErr(err)
}

func isNetErr(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &ne) || errors.As(err, &oe) || errors.Is(err, net.ErrClosed)
}

func streamEndReason(err error) string {
	if err == nil || errors.Is(err, io.EOF) {
		return "the server ended it"
	}
	return err.Error()
}

// minRetryDelay floors the reconnection delay a server asks for (its
// retry field). A server that sends "retry: 0" and a new event id, then
// ends each stream, had Listen reconnect in a loop with no pause (the new
// id counts as progress, so it never gives up), burning the bridge's CPU.
// 100 ms is more than a reconnection costs and less than any server needs
// to wait: at most 10 reconnections a second.
const minRetryDelay = 100 * time.Millisecond

// reconnectDelay is the wait before a stream is opened again: the server's
// retry, floored and capped, or fallback when it asked for none.
func (c *Conn) reconnectDelay(cur *sseCursor, fallback time.Duration) time.Duration {
	if !cur.hasRetry {
		return fallback
	}
	// The cap is the caller's option and wins over the floor, which only
	// guards against the server.
	return min(max(cur.retry, minRetryDelay), c.opts.MaxRetryDelay)
}

// resume waits the delay the server asked for and reopens the stream with a
// GET carrying Last-Event-ID. readErr is how the resumed stream ended;
// fatal is a failure to resume at all.
func (c *Conn) resume(ctx context.Context, req *jsonrpc.Message, cur *sseCursor, onEvent func(sseEvent) (bool, error)) (readErr, fatal error) {
	t := time.NewTimer(c.reconnectDelay(cur, c.opts.DefaultRetryDelay))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	hresp, err := c.do(ctx, http.MethodGet, nil, &jsonrpc.Message{Method: req.Method}, "Last-Event-ID", string(cur.lastID))
	if err != nil {
		if isNetErr(err) && ctx.Err() == nil {
			return err, nil // the server may be restarting: counts as no progress
		}
		return nil, err
	}
	defer hresp.Body.Close()
	if hresp.StatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("while resuming the answer to %s: %w", req.Method, ErrSessionExpired)
	}
	mediaType := mediaTypeOf(hresp.Header.Get("Content-Type"))
	if hresp.StatusCode != http.StatusOK || mediaType != "text/event-stream" {
		err := c.httpError(req.Method, hresp)
		return nil, fmt.Errorf("while resuming the answer to %s with Last-Event-ID: %w", req.Method, err)
	}
	return c.readBody(ctx, hresp.Body, cur, onEvent), nil
}

// do sends one HTTP request with the MCP headers. extra is header pairs.
func (c *Conn) do(ctx context.Context, method string, body []byte, m *jsonrpc.Message, extra ...string) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	hreq, err := http.NewRequestWithContext(ctx, method, c.url, r)
	if err != nil {
		return nil, fmt.Errorf("while building the request for %s: %w", m.Method, safeurl.Error(err))
	}
	// Set by key in canonical form, one value each: this runs for every
	// request, and Header.Set would canonicalize (and copy) each key again.
	h := hreq.Header
	for k, vs := range c.opts.Header {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	if c.opts.BearerToken != "" {
		h["Authorization"] = []string{"Bearer " + c.opts.BearerToken}
	}
	if c.opts.Authorize != nil {
		if err := c.opts.Authorize(ctx, h); err != nil {
			return nil, err
		}
	}
	if body != nil {
		h["Content-Type"] = []string{"application/json"}
		h["Accept"] = []string{"application/json, text/event-stream"}
		if idempotent(m.Method) {
			// Present but nil: not sent, and the transport sends the
			// request again when the reused connection it took dies
			// before any byte of the answer (the server's idle timeout
			// crossed our request), as it does for a GET: again while
			// each try fails so on a reused connection (another idle one,
			// or a new one).
			h["Idempotency-Key"] = nil
		}
	} else {
		h["Accept"] = []string{"text/event-stream"}
	}
	session, version := c.state()
	if version != "" {
		h["Mcp-Protocol-Version"] = []string{version}
	}
	if session != "" {
		h["Mcp-Session-Id"] = []string{session}
	}
	if version >= StatelessVersion && body != nil && m.Method != "" {
		h[protocol.HeaderMethod] = []string{m.Method}
		if name := protocol.RequestName(m.Method, m.Params); name != "" {
			h[protocol.HeaderName] = []string{name}
		}
	}
	for k, vs := range m.Header {
		for _, v := range vs {
			hreq.Header.Add(k, v)
		}
	}
	if h, _ := ctx.Value(callHeaderKey{}).(http.Header); h != nil {
		for k, vs := range h {
			hreq.Header[k] = vs
		}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		hreq.Header.Set(extra[i], extra[i+1])
	}
	if body != nil && !idempotent(m.Method) {
		// Either key, from the server's credentials or a call's headers,
		// would have net/http send the request again too: a tools/call
		// the server may have run already.
		delete(hreq.Header, "Idempotency-Key")
		delete(hreq.Header, "X-Idempotency-Key")
	}
	hresp, err := c.client.Do(hreq)
	if err != nil {
		// net/http's error names the URL (its user, its query): it may
		// carry a credential, and this error reaches agents and logs.
		return nil, fmt.Errorf("while sending %s: %w", m.Method, safeurl.Error(err))
	}
	return hresp, nil
}

// idempotent says whether a request of method may be sent twice: the
// server runs it again with the same result and nothing else changes. Any
// other request (tools/call) is never sent again: the server may have run
// it before its connection died.
func idempotent(method string) bool {
	switch method {
	case "ping", "server/discover", "tools/list", "resources/list", "resources/templates/list", "prompts/list":
		return true
	}
	return false
}

// mediaTypeOf is the media type of a Content-Type header, in lower case,
// without its parameters: what mime.ParseMediaType returns first, without
// the map of parameters it builds on every answer.
func mediaTypeOf(contentType string) string {
	t, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(t))
}

// Notify POSTs a notification; the server answers 202.
func (c *Conn) Notify(ctx context.Context, n *jsonrpc.Message) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.RequestTimeout)
		defer cancel()
	}
	return c.post(ctx, n)
}

func (c *Conn) post(ctx context.Context, m *jsonrpc.Message) error {
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("while encoding %s: %w", m.What(), err)
	}
	hresp, err := c.do(ctx, http.MethodPost, body, m)
	if err != nil {
		return err
	}
	defer hresp.Body.Close()
	if hresp.StatusCode/100 != 2 {
		return c.httpError(m.What(), hresp)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(hresp.Body, 64<<10))
	return nil
}

// answer replies to a request the server sent on a stream.
func (c *Conn) answer(m *jsonrpc.Message) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.post(ctx, jsonrpc.ReplyTo(m))
}

// relay answers a request the server sent during a call with what h says.
// The answer is posted even when the call ended meanwhile (the server is
// waiting for it), within a bound of its own.
func (c *Conn) relay(ctx context.Context, m *jsonrpc.Message, h RequestHandler, handled func()) {
	reply := h(ctx, m)
	handled()
	if reply == nil {
		reply = jsonrpc.ReplyTo(m)
	}
	reply.ID = m.ID
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = c.post(pctx, reply)
}

// cancelled tells a session-era server that we gave up on req. In the
// stateless revision closing the response stream is the cancellation.
func (c *Conn) cancelled(req *jsonrpc.Message) {
	_, version := c.state()
	if version >= StatelessVersion || req.Method == "initialize" {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = c.post(ctx, jsonrpc.NewNotification("notifications/cancelled", jsonrpc.CancelledParams(req.ID, "the client stopped waiting")))
	}()
}

// Close ends the session (DELETE, best effort and bounded) and, on a Conn
// made by New, drops its idle connections (a Pool's stay for its other
// Conns: Pool.CloseIdle drops them).
func (c *Conn) Close() error {
	session, _ := c.state()
	if session != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		hresp, err := c.do(ctx, http.MethodDelete, nil, &jsonrpc.Message{Method: "session end"})
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(hresp.Body, 4<<10))
			hresp.Body.Close()
		}
		cancel()
		c.mu.Lock()
		c.sessionID = ""
		c.mu.Unlock()
	}
	if c.ownsPool {
		c.client.CloseIdleConnections()
	}
	return nil
}
