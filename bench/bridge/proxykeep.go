package main

import (
	"context"
	"io"
	"net/http"
	"time"
)

// keepConns is the bare proxy's transport, so that the proxy keeps its
// upstream connections as a careful proxy (and the bridge) does. An agent
// that stops reading an SSE answer at its response and drops its
// connection before the stream's end (mcp-go's client does, on about a
// quarter of the everything-server's answers) makes httputil.ReverseProxy
// give up the upstream answer half read: its write to the agent fails,
// or the agent's request context, which the upstream request inherits,
// ends and the transport closes the connection under the read. A half
// read HTTP/1 connection cannot be reused, so the upstream was dialled
// again for the next call (40-80 times per 1,000 sequential calls, on top
// of the agent's own re-dials), which inflated the upstream's CPU behind
// the proxy. The upstream request now ends with the agent's only until
// its answer's headers came; after that, an answer given up is read to
// its end (what is left is the stream's last chunk: a few bytes, at once)
// within drainWait and drainBytes, as our client's finishStream does.
type keepConns struct{ rt http.RoundTripper }

func (k keepConns) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	stop := context.AfterFunc(r.Context(), cancel) // the agent left before the answer
	resp, err := k.rt.RoundTrip(r.WithContext(ctx))
	stop()
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &drainOnClose{body: resp.Body, cancel: cancel}
	return resp, nil
}

// drainOnClose reads what is left of an answer before closing it, for at
// most proxyDrainWait and proxyDrainBytes.
type drainOnClose struct {
	body   io.ReadCloser
	cancel context.CancelFunc
}

const (
	proxyDrainWait  = 100 * time.Millisecond
	proxyDrainBytes = 4 << 10
)

func (d *drainOnClose) Read(p []byte) (int, error) { return d.body.Read(p) }

func (d *drainOnClose) Close() error {
	t := time.AfterFunc(proxyDrainWait, d.cancel) // a stream kept open is not waited for
	_, _ = io.Copy(io.Discard, io.LimitReader(d.body, proxyDrainBytes))
	t.Stop()
	err := d.body.Close()
	d.cancel()
	return err
}
