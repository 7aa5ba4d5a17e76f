package mcpbridge

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/inflight"
)

// The replica's bounds on what it holds at once are each an
// inflight.Limit, taken without waiting, and a request over one gets the
// one answer overLimit writes. In the order a request meets them:
//
//	token reviews  authn.TokenReview.MaxReviews        new tokens being checked
//	body bytes     Config.MaxBodyBytesInFlight,        bodies read or being read,
//	               a quarter of it per caller          in total and per caller
//	requests       Config.MaxConcurrent                requests served at once
//	per session    session.Options.MaxConcurrent       a session's requests
//	per caller     Config.MaxSubjectConcurrent         a caller's requests, in
//	                                                   all its sessions or none
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
		// One caller reads at most a quarter of the budget at once (or one
		// body of the largest size): a single identity stalling its bodies
		// cannot refuse everyone else.
		bodyBytes: inflight.New(cfg.MaxBodyBytesInFlight, max(cfg.MaxBodyBytes, cfg.MaxBodyBytesInFlight/4)),
		requests:  inflight.New(int64(cfg.MaxConcurrent), 0),
		callers:   inflight.New(0, int64(cfg.MaxSubjectConcurrent)),
		parked:    inflight.New(int64(cfg.MaxConcurrent), int64(cfg.MaxSubjectConcurrent)),
	}
}

// Reasons of a request the bridge could not take now: refused by one of
// the bounds, or not authenticated because the API server or the issuer
// did not answer (or its key is not read yet).
const (
	reasonOverLimit       = "over_limit"
	reasonAuthUnavailable = "authentication_unavailable"
)

// overLimitRetry is when a request refused by a bound may be sent again:
// the bounds hold what is in flight, which ends within a call's time, and
// most requests take milliseconds.
const overLimitRetry = time.Second

// overLimit answers a request refused by one of the bounds: nothing is
// wrong with it, it did not run, and it may be sent again shortly.
func overLimit(w http.ResponseWriter, status int, id json.RawMessage, msg string) {
	tryLater(w, status, id, reasonOverLimit, overLimitRetry, msg)
}

// tryLater answers a request the bridge could not take now, before it ran
// anything: Retry-After (whole seconds, for HTTP clients) and the same in
// the error's data (for the agent), with its reason.
func tryLater(w http.ResponseWriter, status int, id json.RawMessage, reason string, after time.Duration, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(after.Seconds()))))
	data, _ := json.Marshal(retryIn(after).with(map[string]any{"reason": reason}))
	writeErrorData(w, status, id, jsonrpc.CodeInternalError, msg+": it was not run; send it again after "+after.String(), data)
}

// takeRequest takes one of the replica's request slots; the func gives it
// back.
func (b *Bridge) takeRequest(w http.ResponseWriter) (func(), bool) {
	if !b.limits.requests.Take("", 1) {
		overLimit(w, http.StatusServiceUnavailable, nil, fmt.Sprintf("the bridge is serving its limit of %d requests", b.cfg.MaxConcurrent))
		return nil, false
	}
	return func() { b.limits.requests.Give("", 1) }, true
}

// takeCaller takes a slot of rq's caller and one of its session, if it has
// one (a caller with many sessions is bounded too); the func gives them
// back.
func (b *Bridge) takeCaller(w http.ResponseWriter, rq *request) (func(), bool) {
	user := rq.id.Username
	if !b.limits.callers.Take(user, 1) {
		overLimit(w, http.StatusTooManyRequests, rq.msg.ID, "this caller has too many requests in flight")
		return nil, false
	}
	if rq.sess == nil {
		return func() { b.limits.callers.Give(user, 1) }, true
	}
	if !rq.sess.Acquire() {
		b.limits.callers.Give(user, 1)
		overLimit(w, http.StatusTooManyRequests, rq.msg.ID, "this session has too many requests in flight")
		return nil, false
	}
	return func() {
		rq.sess.Release()
		b.limits.callers.Give(user, 1)
	}, true
}
