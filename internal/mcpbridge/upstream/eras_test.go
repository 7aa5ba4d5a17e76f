package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// A call that had the server learned again itself, before anything was
// sent, and is then refused for its era, is not sent a third time on the
// strength of its own relearn: the relearn that counts for a refusal is one
// since the call took the client it was refused on. Here a session-only
// server (the go-sdk everything-server) is replaced behind its URL by a
// stateless one behind a fake that refuses every tools/call with -32022: a
// new agent session's initialize is answered without a session id, the
// Conn learns the server again, and the call, sent on the shared
// connection, is refused. Before, doOn compared with the relearns counted
// when the call began, took its own relearn for another's, and sent the
// refused call once more.
func TestCallRefusedAfterItsOwnRelearnIsNotSentAgain(t *testing.T) {
	before, after := testpeers.GoEverything(t, false), testpeers.GoEverything(t, true)
	var switched atomic.Bool
	var calls atomic.Int32
	front := faultyFront(t, before.URL, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if !switched.Load() {
			return false
		}
		if !bytes.Contains(body, []byte(`"method":"tools/call"`)) {
			relay(w, r, after.URL, body)
			return true
		}
		calls.Add(1)
		var m struct{ ID json.RawMessage }
		_ = json.Unmarshal(body, &m)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":"unsupported protocol version"}}`, m.ID, jsonrpc.CodeUnsupportedProtocolVersion)
		return true
	})
	c := newTestConn(t, front)
	if _, err := c.Client(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if m := c.mode.Load(); m != modeSessionOnly {
		t.Fatalf("the Conn learned %s; want sessions only", modeNames[m])
	}
	switched.Store(true)
	_, agent := newAgents(t).open(t)
	_, err := c.CallTool(ctxT(t), json.RawMessage(`{"name":"echo","arguments":{"message":"x"}}`), CallHooks{Agent: agent})
	refused(t, err)
	if c.eras.Load() != 1 {
		t.Fatalf("the Conn learned the server %d times again; want once", c.eras.Load())
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the refused call was sent %d times; want once", n)
	}
}
