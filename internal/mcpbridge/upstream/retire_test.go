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
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// loggingFront is a front to the session-only server at url that says the
// server offers logging (the real one does not), so that a session's dial
// ends with logging/setLevel, and holds the request of method hold (that
// one, or notifications/initialized: the dial's last steps after the
// session id came) until the client gives up on it, where the test can
// retire the Conn under it. reached gets each held request.
func loggingFront(t *testing.T, url, hold string) (front string, reached <-chan struct{}) {
	held := make(chan struct{}, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case bytes.Contains(body, []byte(`"`+hold+`"`)):
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
// whatever listens on that address now (a new pod given the IP). The same when
// the dial is cut before it ended, at notifications/initialized: the session
// id came with initialize's answer, and the failed dial closed its connection
// with a DELETE.
func TestLateDialAfterTheProcessEndedSendsNoDelete(t *testing.T) {
	for _, hold := range []string{"logging/setLevel", "notifications/initialized"} {
		t.Run(hold, func(t *testing.T) {
			st := bridgetest.NewStateful(t, true)
			front, reached := loggingFront(t, st.URL, hold)
			c := newTestConn(t, front)
			dialled := make(chan error, 1)
			go func() {
				_, err := c.Client(context.Background())
				dialled <- err
			}()
			within(t, "the dial reaches "+hold, reached)
			c.Retire(ReasonRestarted, true)
			if err := within(t, "the dial ends once retired", dialled); err == nil || !strings.Contains(err.Error(), ReasonRestarted) {
				t.Fatalf("the dial under a retired Conn: %v, want %s", err, ReasonRestarted)
			}
			if err := c.WaitClosed(testkit.Context(t)); err != nil {
				t.Fatal(err)
			}
			if d := st.Deleted(); len(d) != 0 {
				t.Fatalf("the late dial's session was DELETEd (%q) after the server's process ended", d)
			}
		})
	}
}
