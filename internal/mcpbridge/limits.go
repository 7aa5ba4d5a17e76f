package mcpbridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/inflight"
)

// The replica's bounds on what it holds at once are each an
// inflight.Limit, taken without waiting, and a request over one gets the
// one answer overLimit writes. In the order a request meets them:
//
//	token reviews  authn.TokenReview.MaxReviews        new tokens being checked
//	body bytes     Config.MaxBodyBytesInFlight         bodies read or being read
//	requests       Config.MaxConcurrent                requests served at once
//	per session    session.Options.MaxConcurrent       a session's requests
//	per caller     Config.MaxSubjectConcurrent         a stateless caller's requests
//	parked calls   MaxConcurrent and, per caller,      calls waiting for their
//	               MaxSubjectConcurrent                agent's answer (parked.go)
type limits struct {
	bodyBytes *inflight.Limit
	requests  *inflight.Limit
	callers   *inflight.Limit
	parked    *inflight.Limit
}

func newLimits(cfg Config) limits {
	return limits{
		bodyBytes: inflight.New(cfg.MaxBodyBytesInFlight, 0),
		requests:  inflight.New(int64(cfg.MaxConcurrent), 0),
		callers:   inflight.New(0, int64(cfg.MaxSubjectConcurrent)),
		parked:    inflight.New(int64(cfg.MaxConcurrent), int64(cfg.MaxSubjectConcurrent)),
	}
}

// overLimit answers a request refused by one of the bounds: nothing is
// wrong with it, and it may be sent again shortly.
func overLimit(w http.ResponseWriter, status int, id json.RawMessage, msg string) {
	w.Header().Set("Retry-After", "1")
	writeError(w, status, id, jsonrpc.CodeInternalError, msg)
}

// takeRequest takes one of the replica's request slots; the func gives it
// back.
func (b *Bridge) takeRequest(w http.ResponseWriter) (func(), bool) {
	if !b.limits.requests.Take("", 1) {
		overLimit(w, http.StatusServiceUnavailable, nil, fmt.Sprintf("the bridge is serving its limit of %d requests; retry", b.cfg.MaxConcurrent))
		return nil, false
	}
	return func() { b.limits.requests.Give("", 1) }, true
}

// takeCaller takes a slot of rq's session, or of its caller in the
// stateless era; the func gives it back.
func (b *Bridge) takeCaller(w http.ResponseWriter, rq *request) (func(), bool) {
	switch {
	case rq.sess != nil:
		if !rq.sess.Acquire() {
			overLimit(w, http.StatusTooManyRequests, rq.msg.ID, "this session has too many requests in flight")
			return nil, false
		}
		return rq.sess.Release, true
	case rq.stateless:
		// No session to bound: the caller's requests in flight are.
		user := rq.id.Username
		if !b.limits.callers.Take(user, 1) {
			overLimit(w, http.StatusTooManyRequests, rq.msg.ID, "this caller has too many requests in flight")
			return nil, false
		}
		return func() { b.limits.callers.Give(user, 1) }, true
	}
	return func() {}, true
}

// errBodyBudget: the replica's budget of body bytes is spent.
var errBodyBudget = errors.New("the bridge is reading its limit of request bytes")

// bodyChunk is the most one read takes in (io.ReadAll offers reads as
// large as its buffer): a read that does not fit the budget is refused
// with no more than this much read past it.
const bodyChunk = 32 << 10

// budgetReader takes the bytes of each read from the replica's budget;
// taken is what it holds, given back when the request ends.
type budgetReader struct {
	r     io.Reader
	l     *inflight.Limit
	taken int64
}

func (br *budgetReader) Read(p []byte) (int, error) {
	n, err := br.r.Read(p[:min(len(p), bodyChunk)])
	if n > 0 {
		if !br.l.Take("", int64(n)) {
			return 0, errBodyBudget
		}
		br.taken += int64(n)
	}
	return n, err
}
