package streamhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
)

// ErrNoStandaloneStream means the server offers no standalone GET stream
// (405): it can only speak on the response streams of requests.
var ErrNoStandaloneStream = errors.New("the server offers no standalone GET stream (HTTP 405)")

// Listen holds the session's standalone GET stream open (session era):
// what the server sends there unasked by any request — resource updates,
// list changes — goes to the connection's notification handler, and its
// requests are answered (method not found: this client offers no
// capabilities). A stream that breaks off or that the server ends is opened
// again after a delay, with Last-Event-ID so that a server keeping its
// events replays what was missed. The delay doubles from DefaultRetryDelay
// up to MaxRetryDelay (or is what the server asked for, 100 ms at least);
// after MaxResumes attempts in a row that bring nothing new, Listen gives
// up.
//
// opened, when not nil, is called each time the stream is open. It returns
// when ctx ends (nil), when the server offers no such stream
// (ErrNoStandaloneStream), when the session is gone (ErrSessionExpired) or
// when it gives up.
func (c *Conn) Listen(ctx context.Context, opened func()) error {
	if session, version := c.state(); session == "" || version >= StatelessVersion {
		return errors.New("while opening the standalone GET stream: it exists only in a session (2025-11-25 and older)")
	}
	var cur sseCursor
	onEvent := func(ev sseEvent) (bool, error) {
		if ev.name != "" && ev.name != "message" {
			return false, nil
		}
		m, err := jsonrpc.Decode(ev.data)
		if err != nil {
			return false, fmt.Errorf("while reading the standalone GET stream: %w", err)
		}
		switch {
		case m.IsRequest():
			go c.answer(m)
		case m.IsNotification():
			c.notify(m)
		}
		return false, nil
	}
	delay := c.opts.DefaultRetryDelay
	for failures := 0; ; {
		before := string(cur.lastID)
		err := c.listenOnce(ctx, &cur, onEvent, opened)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrNoStandaloneStream), errors.Is(err, ErrSessionExpired):
			return err
		}
		if string(cur.lastID) != before {
			failures, delay = 0, c.opts.DefaultRetryDelay
		} else if failures++; failures >= c.opts.MaxResumes {
			return fmt.Errorf("while holding the standalone GET stream open: it failed %d times in a row (bound maxResumes), last: %v", failures, streamEndReason(err))
		}
		wait := c.reconnectDelay(&cur, delay)
		delay = min(2*delay, c.opts.MaxRetryDelay)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		}
	}
}

// listenOnce opens the GET stream once and reads it until it ends.
func (c *Conn) listenOnce(ctx context.Context, cur *sseCursor, onEvent func(sseEvent) (bool, error), opened func()) error {
	var extra []string
	if len(cur.lastID) > 0 {
		extra = []string{"Last-Event-ID", string(cur.lastID)}
	}
	hresp, err := c.do(ctx, http.MethodGet, nil, &jsonrpc.Message{Method: "standalone GET stream"}, extra...)
	if err != nil {
		return err
	}
	defer hresp.Body.Close()
	switch hresp.StatusCode {
	case http.StatusMethodNotAllowed:
		return ErrNoStandaloneStream
	case http.StatusNotFound:
		return fmt.Errorf("while opening the standalone GET stream: %w", ErrSessionExpired)
	}
	mediaType := mediaTypeOf(hresp.Header.Get("Content-Type"))
	if hresp.StatusCode != http.StatusOK || mediaType != "text/event-stream" {
		return c.httpError("standalone GET stream", hresp)
	}
	if opened != nil {
		opened()
	}
	return c.readBody(ctx, hresp.Body, cur, onEvent)
}
