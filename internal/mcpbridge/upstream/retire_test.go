package upstream

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/internal/bridgetest"
)

// loggingFront is a front to the session-only server at url that says the
// server offers logging (the real one does not), so that a session's dial
// ends with logging/setLevel, and holds that request until the client
// gives up on it: the dial's last step, where the test can retire the
// Conn under it. reached gets each held request.
func loggingFront(t *testing.T, url string) (front string, reached <-chan struct{}) {
	held := make(chan struct{}, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case bytes.Contains(body, []byte(`"logging/setLevel"`)):
			held <- struct{}{}
			<-r.Context().Done()
			return
		case !bytes.Contains(body, []byte(`"method":"initialize"`)):
			relay(w, r, url, body)
			return
		}
		answer := httptest.NewRecorder()
		relay(answer, r, url, body)
		for k, v := range answer.Header() {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(answer.Code)
		_, _ = w.Write(bytes.Replace(answer.Body.Bytes(), []byte(`"capabilities":{`), []byte(`"capabilities":{"logging":{},`), 1))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", held
}

// A dial that ends after its Conn was retired because the server's process
// ended sends no DELETE for the session it opened: the DELETE would go to
// whatever listens on that address now (a new pod given the IP). Before,
// the late dial's session was closed with one.
func TestLateDialAfterTheProcessEndedSendsNoDelete(t *testing.T) {
	st := bridgetest.NewStateful(t, true)
	front, reached := loggingFront(t, st.URL)
	c := newTestConn(t, front)
	dialled := make(chan error, 1)
	go func() {
		_, err := c.Client(context.Background())
		dialled <- err
	}()
	within(t, "the dial reaches logging/setLevel", reached)
	c.Retire(ReasonRestarted, true)
	if err := within(t, "the dial ends once retired", dialled); err == nil || !strings.Contains(err.Error(), ReasonRestarted) {
		t.Fatalf("the dial under a retired Conn: %v, want %s", err, ReasonRestarted)
	}
	if err := c.WaitClosed(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if d := st.Deleted(); len(d) != 0 {
		t.Fatalf("the late dial's session was DELETEd (%q) after the server's process ended", d)
	}
}
