package upstream

import (
	"bytes"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// The subscription keeper holds the shared connection it reconciles on, as
// calls do: a relearn that replaces that connection (the server changed behind
// its URL) closes the old one only once the keeper's pass on it ended, not
// under its resources/subscribe: the old session is not DELETEd under the
// pass. The go-sdk everything-server, session-only, then stateless behind a
// front that holds the keeper's resources/subscribe until the test lets it go.
func TestKeeperHoldsTheSharedConnectionItReconcilesOn(t *testing.T) {
	before, after := testpeers.GoEverything(t, false), testpeers.GoEverything(t, true)
	var switched atomic.Bool
	subscribing, release := make(chan struct{}, 1), make(chan struct{})
	var mu sync.Mutex
	var deleted []string
	front := faultyFront(t, before.URL, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		switch {
		case r.Method == http.MethodDelete:
			mu.Lock()
			deleted = append(deleted, r.Header.Get("Mcp-Session-Id"))
			mu.Unlock()
			return false
		case bytes.Contains(body, []byte(`"method":"resources/subscribe"`)):
			subscribing <- struct{}{}
			select {
			case <-release:
			case <-time.After(20 * time.Second):
			}
			return false
		case switched.Load():
			relay(w, r, after.URL, body)
			return true
		}
		return false
	})
	letGo := sync.OnceFunc(func() { close(release) })
	t.Cleanup(letGo) // before the front closes: a failed test leaves nothing held
	wasDeleted := func(id string) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(deleted, id)
	}
	const uri = "test://watched-resource"
	c := New(Target{Namespace: "ns", Name: "s", URL: front}, Options{Subscribed: func() []string { return []string{uri} }})
	t.Cleanup(c.Close)
	old, err := c.Client(testkit.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	oldID := old.Conn().(*streamhttp.Conn).SessionID()
	if oldID == "" {
		t.Fatal("the session-only server's shared connection has no session")
	}
	go func() { _ = c.Subscribe(testkit.Context(t), uri) }()
	within(t, "the keeper sends resources/subscribe", subscribing)

	switched.Store(true)
	if !c.relearn(testkit.Context(t), c.eras.Load()) {
		t.Fatal("the Conn did not learn the server again after it changed")
	}
	if err := c.WaitClosed(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}
	if wasDeleted(oldID) {
		t.Fatal("the relearn DELETEd the shared session under the keeper's resources/subscribe")
	}
	letGo()
	testkit.Eventually(t, "the replaced shared session is DELETEd once the keeper's pass on it ended", func() bool { return wasDeleted(oldID) })
}
