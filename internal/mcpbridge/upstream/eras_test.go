package upstream

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// A call that had the server learned again itself, before anything was sent,
// and is then refused for its era, is not sent a third time on the strength of
// its own relearn: the relearn that counts for a refusal is one since the call
// took the client it was refused on. Here a session-only server (the go-sdk
// everything-server) is replaced behind its URL by a stateless one behind a
// fake that refuses every tools/call with -32022: a new agent session's
// initialize is answered without a session id, the Conn learns the server
// again, and the call, sent on the shared connection, is refused. The call is
// not sent once more: doOn does not take its own relearn for another's, as
// comparing with the relearns counted when the call began would.
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
		refuseVersion(w, m.ID)
		return true
	})
	c := newTestConn(t, front)
	if _, err := c.Client(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}
	if m := c.mode.Load(); m != modeSessionOnly {
		t.Fatalf("the Conn learned %s; want sessions only", modeNames[m])
	}
	switched.Store(true)
	_, agent := newAgents(t).open(t)
	_, err := c.CallTool(testkit.Context(t), json.RawMessage(`{"name":"echo","arguments":{"message":"x"}}`), CallHooks{Agent: agent})
	refused(t, err)
	if c.eras.Load() != 1 {
		t.Fatalf("the Conn learned the server %d times again; want once", c.eras.Load())
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the refused call was sent %d times; want once", n)
	}
}

// The same with a dual-era server, where the relearn is clientFor's own: a
// new agent session's initialize answered without a session id has the
// Conn learn the server again before the call takes the shared connection.
// Here the real dual-era server (mcp-go's) is behind a fake that, once
// switched, stands for a stateless-only server replacing it: its
// server/discover answer lists only the stateless version, an
// initialize's answer loses its session id, and every tools/call is
// refused with -32022. The relearn finds the server changed (stateless
// only), the call goes on the shared connection and is refused; it is not
// sent again on the strength of the relearn clientFor ran for it.
func TestCallRefusedAfterClientForsOwnRelearnIsNotSentAgain(t *testing.T) {
	url, _ := dualEraServer(t)
	var switched atomic.Bool
	var calls atomic.Int32
	front := faultyFront(t, url, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if !switched.Load() {
			return false
		}
		m := requestIn(body)
		switch m.Method {
		case "server/discover":
			statelessOnly(t, w, r, url, body)
			return true
		case "initialize":
			relay(w, r, url, body, "Mcp-Session-Id")
			return true
		case "notifications/initialized":
			if r.Header.Get("Mcp-Session-Id") == "" {
				w.WriteHeader(http.StatusAccepted) // taken, as by a server that keeps no session
				return true
			}
		case "tools/call":
			calls.Add(1)
			refuseVersion(w, m.ID)
			return true
		}
		return false
	})
	c := newTestConn(t, front)
	if _, err := c.Client(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}
	if m := c.mode.Load(); m != modeDualEra {
		t.Fatalf("the Conn learned %s; want both eras", modeNames[m])
	}
	switched.Store(true)
	_, agent := newAgents(t).open(t)
	_, err := c.CallTool(testkit.Context(t), json.RawMessage(echoCall), CallHooks{Agent: agent})
	refused(t, err)
	if m := c.mode.Load(); m != modeStateless || c.eras.Load() != 1 {
		t.Fatalf("the Conn learned the server %d times again, as %s; want once, as stateless", c.eras.Load(), modeNames[m])
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the refused call was sent %d times; want once", n)
	}
}

// statelessOnly relays a server/discover to the server at url and passes
// its answer on with only the stateless version listed, as a server that
// speaks no session era would answer.
func statelessOnly(t *testing.T, w http.ResponseWriter, r *http.Request, url string, body []byte) {
	rec := httptest.NewRecorder()
	relay(rec, r, url, body)
	var answer map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil {
		t.Errorf("the server's answer to server/discover is not one JSON message (%v): %s", err, rec.Body)
		http.Error(w, "unreadable answer", http.StatusBadGateway)
		return
	}
	result, ok := answer["result"].(map[string]any)
	if !ok {
		t.Errorf("the server's answer to server/discover has no result: %s", rec.Body)
		http.Error(w, "no result", http.StatusBadGateway)
		return
	}
	result["supportedVersions"] = []string{client.StatelessVersion}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answer)
}
