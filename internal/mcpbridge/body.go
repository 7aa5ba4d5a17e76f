package mcpbridge

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/inflight"
)

// readBody reads a request's body within MaxBodyBytes, the connection's
// RequestReadTimeout and the replica's MaxBodyBytesInFlight; false when it
// wrote the refusal. The body's bytes stay taken from the budget until
// the func (also given with a refusal) is called, when the request ends.
func (b *Bridge) readBody(w http.ResponseWriter, r *http.Request, caller string) ([]byte, func(), bool) {
	// The deadline is the connection's (wall clock, not the bridge's
	// clock); it replaces the server's longer ReadTimeout for this request.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(b.cfg.RequestReadTimeout))
	br := &budgetReader{r: http.MaxBytesReader(w, r.Body, b.cfg.MaxBodyBytes), l: b.limits.bodyBytes, caller: caller}
	give := func() { b.limits.bodyBytes.Give(caller, br.taken) }
	body, err := io.ReadAll(br)
	if err == nil {
		return body, give, true
	}
	var tooBig *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.Is(err, errBodyBudget):
		w.Header().Set("Connection", "close")
		overLimit(w, http.StatusServiceUnavailable, nil, fmt.Sprintf("the bridge is reading its limit of request bytes (%d in all, a quarter of it per caller)", b.cfg.MaxBodyBytesInFlight))
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("the request body is larger than %d bytes", b.cfg.MaxBodyBytes))
	case errors.As(err, &netErr) && netErr.Timeout():
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusRequestTimeout, nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("the request body did not arrive within %s", b.cfg.RequestReadTimeout))
	default:
		writeError(w, http.StatusBadRequest, nil, jsonrpc.CodeParseError, "while reading the request body: "+err.Error())
	}
	return nil, give, false
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
	r      io.Reader
	l      *inflight.Limit
	caller string
	taken  int64
}

func (br *budgetReader) Read(p []byte) (int, error) {
	n, err := br.r.Read(p[:min(len(p), bodyChunk)])
	if n > 0 {
		if !br.l.Take(br.caller, int64(n)) {
			return 0, errBodyBudget
		}
		br.taken += int64(n)
	}
	return n, err
}
