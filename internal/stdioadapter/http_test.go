package stdioadapter

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

// Two sessions send requests with the same id and the same progress token
// at the same time: each gets its own progress notifications and its own
// result, under its own id and token.
func TestCollidingIDsAndProgressTokens(t *testing.T) {
	a := startAdapter(t, []string{peer(t, "mcp-server-everything")}, nil)
	clients := []*rawClient{{url: a.url}, {url: a.url}}
	for _, c := range clients {
		c.initialize(t)
	}
	bodies := make([][]byte, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		steps := i + 2
		wg.Go(func() {
			_, bodies[i] = c.post(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":1,"steps":%d},"_meta":{"progressToken":"tok"}}}`, steps))
		})
	}
	wg.Wait()
	for i, body := range bodies {
		steps := float64(i + 2)
		events := sseData(body)
		if len(events) != int(steps)+1 {
			t.Fatalf("client %d got %d messages, want %v progress and a result: %s", i, len(events), steps, body)
		}
		for n, ev := range events[:len(events)-1] {
			if jsonField(t, ev, "method") != "notifications/progress" ||
				jsonField(t, ev, "params", "progressToken") != "tok" ||
				jsonField(t, ev, "params", "total") != steps ||
				jsonField(t, ev, "params", "progress") != float64(n+1) {
				t.Errorf("client %d: message %d is not its own progress: %s", i, n, ev)
			}
		}
		result := events[len(events)-1]
		text := fmt.Sprint(jsonField(t, result, "result", "content"))
		if jsonField(t, result, "id") != float64(7) || !strings.Contains(text, fmt.Sprintf("Steps: %v.", steps)) {
			t.Errorf("client %d got someone else's result: %s", i, result)
		}
	}

	// The same id twice in flight in one session is refused.
	c := clients[0]
	first := make(chan []byte)
	go func() {
		_, body := c.post(t, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":1,"steps":1}}}`)
		first <- body
	}()
	time.Sleep(200 * time.Millisecond)
	_, dup := c.post(t, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"message":"x"}}}`)
	if jsonField(t, sseData(dup)[0], "error", "code") != float64(jsonrpc.CodeInvalidRequest) {
		t.Errorf("a duplicate in-flight id was accepted: %s", dup)
	}
	if body := <-first; !strings.Contains(string(body), "Long running operation completed") {
		t.Errorf("the first request with the id failed: %s", body)
	}
}

// A result with unusual JSON reaches the client byte for byte, with only
// the id restored to the client's own spelling. The scripted server stands in
// for a real one because none writes such JSON on demand.
func TestResultBytesUnchanged(t *testing.T) {
	a := startAdapter(t, fakeChildCommand("vendor"), nil)
	c := &rawClient{url: a.url}
	c.initialize(t)
	for _, id := range []string{`"call-ü-1"`, `12345678901234567890`, `-3`, `"7"`} {
		_, body := c.post(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"vendor","arguments":{}}}`)
		events := sseData(body)
		want := fmt.Sprintf(vendorResult, id)
		if len(events) != 1 || string(events[0]) != want {
			t.Errorf("id %s:\n got %s\nwant %s", id, body, want)
		}
	}
}

// The same for a real server: what server-everything writes on its stdout
// is what the client gets, apart from the id.
func TestRealServerBytesUnchanged(t *testing.T) {
	stdoutLog := filepath.Join(t.TempDir(), "stdout.log")
	cmd := []string{"sh", "-c", `"$1" | tee "$0"`, stdoutLog, peer(t, "mcp-server-everything")}
	a := startAdapter(t, cmd, nil)
	c := &rawClient{url: a.url}
	c.initialize(t)
	for _, tool := range []string{"get-structured-content", "get-annotated-message", "get-tiny-image"} {
		args := map[string]string{
			"get-structured-content": `{"location":"New York"}`,
			"get-annotated-message":  `{"messageType":"success","includeImage":true}`,
			"get-tiny-image":         `{}`,
		}[tool]
		_, body := c.post(t, `{"jsonrpc":"2.0","id":"client-id","method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`}}`)
		events := sseData(body)
		if len(events) != 1 || jsonField(t, events[0], "result") == nil {
			t.Fatalf("%s: %s", tool, body)
		}
		got := events[0]
		// tee may write the log a moment after the adapter got the line.
		found := false
		for deadline := time.Now().Add(3 * time.Second); !found && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			written, err := os.ReadFile(stdoutLog)
			if err != nil {
				t.Fatal(err)
			}
			for line := range bytes.Lines(written) {
				m, err := parseMessage(bytes.TrimRight(line, "\n"))
				if err == nil && m.kind == kindResponse && bytes.Equal(m.withID([]byte(`"client-id"`)), got) {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("%s: the client got bytes the server did not write:\n%s", tool, got)
		}
	}
}

// Malformed or refused input gets an HTTP status and a JSON-RPC error, and
// the adapter keeps serving.
func TestMalformedInput(t *testing.T) {
	a := startAdapter(t, []string{peer(t, "mcp-server-everything")}, func(c *Config) { c.MaxBodyBytes = 4096 })
	c := &rawClient{url: a.url}
	c.initialize(t)
	session := c.sid

	cases := []struct {
		name        string
		method      string
		contentType string
		accept      string
		sid         string
		body        string
		status      int
		code        float64 // 0: no JSON-RPC body expected
	}{
		{"not JSON", "POST", "", "", session, `{not json`, 400, jsonrpc.CodeParseError},
		{"truncated JSON", "POST", "", "", session, `{"jsonrpc":"2.0","id":1,"method":"ping"`, 400, jsonrpc.CodeParseError},
		{"wrong version", "POST", "", "", session, `{"jsonrpc":"1.0","id":1,"method":"ping"}`, 400, jsonrpc.CodeInvalidRequest},
		{"no version", "POST", "", "", session, `{"id":1,"method":"ping"}`, 400, jsonrpc.CodeInvalidRequest},
		{"null id", "POST", "", "", session, `{"jsonrpc":"2.0","id":null,"method":"ping"}`, 400, jsonrpc.CodeInvalidRequest},
		{"object id", "POST", "", "", session, `{"jsonrpc":"2.0","id":{},"method":"ping"}`, 400, jsonrpc.CodeInvalidRequest},
		{"id twice", "POST", "", "", session, `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, 400, jsonrpc.CodeInvalidRequest},
		{"method not a string", "POST", "", "", session, `{"jsonrpc":"2.0","id":1,"method":5}`, 400, jsonrpc.CodeInvalidRequest},
		{"params a number", "POST", "", "", session, `{"jsonrpc":"2.0","id":1,"method":"ping","params":5}`, 400, jsonrpc.CodeInvalidRequest},
		{"response with both", "POST", "", "", session, `{"jsonrpc":"2.0","id":1,"result":{},"error":{}}`, 400, jsonrpc.CodeInvalidRequest},
		{"empty batch", "POST", "", "", session, `[]`, 400, jsonrpc.CodeInvalidRequest},
		{"batch with a bad element", "POST", "", "", session, `[{"jsonrpc":"2.0","id":1,"method":"ping"},3]`, 400, jsonrpc.CodeInvalidRequest},
		{"batch reusing an id", "POST", "", "", session, `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":1,"method":"ping"}]`, 400, jsonrpc.CodeInvalidRequest},
		{"a JSON string", "POST", "", "", session, `"hello"`, 400, jsonrpc.CodeInvalidRequest},
		{"empty body", "POST", "", "", session, ``, 400, jsonrpc.CodeInvalidRequest},
		{"body over the limit", "POST", "", "", session, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 5000) + `"}}`, 413, jsonrpc.CodeInvalidRequest},
		{"wrong content type", "POST", "text/plain", "", session, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 415, jsonrpc.CodeInvalidRequest},
		{"unacceptable Accept", "POST", "", "text/html", session, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 406, jsonrpc.CodeInvalidRequest},
		{"no session", "POST", "", "", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 400, codeServerGone},
		{"unknown session", "POST", "", "", "nope", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 404, codeSessionNotFound},
		{"initialize inside a session", "POST", "", "", session, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, 400, jsonrpc.CodeInvalidRequest},
		{"initialize in a batch", "POST", "", "", "", `[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}},{"jsonrpc":"2.0","method":"notifications/initialized"}]`, 400, jsonrpc.CodeInvalidRequest},
		{"GET without session", "GET", "", "text/event-stream", "", ``, 400, codeServerGone},
		{"GET unknown session", "GET", "", "text/event-stream", "nope", ``, 404, codeSessionNotFound},
		{"GET without SSE", "GET", "", "application/json", session, ``, 406, jsonrpc.CodeInvalidRequest},
		{"DELETE unknown session", "DELETE", "", "", "nope", ``, 404, codeSessionNotFound},
		{"PUT", "PUT", "", "", session, `{}`, 405, jsonrpc.CodeInvalidRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, a.url, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			if tc.sid != "" {
				req.Header.Set(headerSessionID, tc.sid)
			}
			resp, err := httpClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body bytes.Buffer
			body.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tc.status, body.Bytes())
			}
			if got := jsonField(t, body.Bytes(), "error", "code"); got != tc.code {
				t.Errorf("JSON-RPC error code %v, want %v: %s", got, tc.code, body.Bytes())
			}
		})
	}
	// Still serving, in the same session.
	_, body := c.post(t, `{"jsonrpc":"2.0","id":"after","method":"tools/call","params":{"name":"echo","arguments":{"message":"still here"}}}`)
	if !strings.Contains(string(body), "Echo: still here") {
		t.Errorf("after the malformed input: %s", body)
	}
}

// A pretty-printed request (line breaks between tokens) still reaches the
// stdio server as one line.
func TestMultiLineRequest(t *testing.T) {
	a := startAdapter(t, []string{peer(t, "mcp-server-everything")}, nil)
	c := &rawClient{url: a.url}
	c.initialize(t)
	_, body := c.post(t, "{\n  \"jsonrpc\": \"2.0\",\r\n  \"id\": 3,\n  \"method\": \"tools/call\",\n  \"params\": {\"name\": \"echo\", \"arguments\": {\"message\": \"two\\nlines\"}}\n}\n")
	if !strings.Contains(string(body), `Echo: two\nlines`) {
		t.Errorf("pretty-printed request: %s", body)
	}
}

// server/discover (the 2026-07-28 way to start) to a server that does not
// know it: the client gets the server's error, never a hang.
func TestServerDiscoverToLegacyServer(t *testing.T) {
	a := startAdapter(t, []string{peer(t, "mcp-server-everything")}, nil)
	discover := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`

	stateless := &rawClient{url: a.url, proto: "2026-07-28"}
	resp, body := stateless.post(t, discover)
	if resp.StatusCode != http.StatusNotFound || jsonField(t, body, "error", "code") != float64(jsonrpc.CodeMethodNotFound) {
		t.Errorf("stateless server/discover: %s %s", resp.Status, body)
	}
	if resp.Header.Get(headerSessionID) != "" {
		t.Error("a stateless request got a session")
	}

	probing := &rawClient{url: a.url} // a client that does not know the era yet
	resp, body = probing.post(t, discover)
	events := sseData(body)
	if resp.StatusCode != http.StatusOK || len(events) != 1 || jsonField(t, events[0], "error", "code") != float64(jsonrpc.CodeMethodNotFound) {
		t.Errorf("server/discover without a protocol header: %s %s", resp.Status, body)
	}
	// Falling back to initialize works afterwards.
	probing.initialize(t)
}

// A server that ignores server/discover altogether (a fault the real
// servers here do not have) is answered for by the adapter after a bound.
func TestServerDiscoverIgnored(t *testing.T) {
	a := startAdapter(t, fakeChildCommand("vendor"), func(c *Config) { c.DiscoverTimeout = 300 * time.Millisecond })
	c := &rawClient{url: a.url, proto: "2026-07-28"}
	start := time.Now()
	resp, body := c.post(t, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`)
	if resp.StatusCode != http.StatusNotFound || jsonField(t, body, "error", "code") != float64(jsonrpc.CodeMethodNotFound) {
		t.Errorf("ignored server/discover: %s %s", resp.Status, body)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
		t.Errorf("answered after %s, want about 300ms", d)
	}
}

// sseReader follows a GET stream and collects its messages.
type sseReader struct {
	mu     sync.Mutex
	events []string
	resp   *http.Response
}

func openGET(t *testing.T, c *rawClient) *sseReader {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(headerSessionID, c.sid)
	resp, err := (&http.Client{}).Do(req) // no timeout: the stream is long-lived
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %s", resp.Status)
	}
	r := &sseReader{resp: resp}
	t.Cleanup(func() { resp.Body.Close() })
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				r.mu.Lock()
				r.events = append(r.events, d)
				r.mu.Unlock()
			}
		}
	}()
	return r
}

func (r *sseReader) has(substr string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if strings.Contains(e, substr) {
			return true
		}
	}
	return false
}

// Resource updates go to the sessions that subscribed to that resource,
// not to the session whose request made the server send them; a second GET
// stream for a session is refused; DELETE ends a session.
func TestSessionsAndGETStreams(t *testing.T) {
	a := startAdapter(t, []string{peer(t, "mcp-server-everything")}, nil)
	subscriber, other := &rawClient{url: a.url}, &rawClient{url: a.url}
	subscriber.initialize(t)
	other.initialize(t)
	subGET, otherGET := openGET(t, subscriber), openGET(t, other)

	req, _ := http.NewRequest(http.MethodGet, a.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(headerSessionID, subscriber.sid)
	if resp, err := httpClient.Do(req); err != nil || resp.StatusCode != http.StatusConflict {
		t.Errorf("a second GET stream: %v %v", resp.Status, err)
	}

	uri := "demo://resource/static/document/architecture.md"
	if _, body := subscriber.post(t, `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"`+uri+`"}}`); !strings.Contains(string(body), `"result":{}`) {
		t.Fatalf("subscribe: %s", body)
	}
	// other's call makes the server send the update at once.
	if _, body := other.post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"toggle-subscriber-updates","arguments":{}}}`); !strings.Contains(string(body), "result") {
		t.Fatalf("toggle-subscriber-updates: %s", body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !subGET.has(`"notifications/resources/updated"`) {
		if time.Now().After(deadline) {
			t.Fatal("the subscriber's GET stream got no resources/updated")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if otherGET.has(`"notifications/resources/updated"`) {
		t.Error("a session that did not subscribe got resources/updated")
	}

	del, _ := http.NewRequest(http.MethodDelete, a.url, nil)
	del.Header.Set(headerSessionID, other.sid)
	if resp, err := httpClient.Do(del); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %v %v", resp, err)
	}
	if resp, _ := other.post(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a deleted session answered %s", resp.Status)
	}
	if _, body := subscriber.post(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); !strings.Contains(string(body), `"tools"`) {
		t.Errorf("the other session broke: %s", body)
	}
}

// A server that speaks both protocol eras (the go-sdk everything-server over
// stdio): a stateless 2026-07-28 client and a session client use it side by
// side. Stateless requests get no session, their progress notifications
// come on their own response stream, and a multi round-trip result
// (input_required) passes through as the server wrote it.
func TestBothProtocolEras(t *testing.T) {
	server, err := testpeers.EverythingServer()
	if err != nil {
		t.Fatal(err)
	}
	a := startAdapter(t, []string{server}, nil)
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}`
	stateless := &rawClient{url: a.url, proto: "2026-07-28"}

	resp, body := stateless.post(t, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta+`}}}`)
	events := sseData(body)
	if resp.StatusCode != http.StatusOK || len(events) != 1 || !strings.Contains(fmt.Sprint(jsonField(t, events[0], "result", "supportedVersions")), "2026-07-28") {
		t.Fatalf("server/discover: %s %s", resp.Status, body)
	}
	if resp.Header.Get(headerSessionID) != "" {
		t.Error("a stateless request got a session")
	}

	// The server refuses an initialize after server/discover; the adapter
	// answers it from the discover result.
	session := &rawClient{url: a.url}
	init := session.initialize(t)
	if jsonField(t, init, "result", "protocolVersion") != "2025-11-25" || jsonField(t, init, "result", "serverInfo", "name") != "mcp-conformance-test-server" {
		t.Errorf("initialize after server/discover: %s", init)
	}
	if _, body := session.post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}`); !strings.Contains(string(body), "simple text response") {
		t.Errorf("session-era tools/call: %s", body)
	}

	_, body = stateless.post(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_tool_with_progress","arguments":{},`+meta+`,"progressToken":"p-1"}}}`)
	events = sseData(body)
	if len(events) < 2 {
		t.Fatalf("stateless call with progress: %s", body)
	}
	for _, ev := range events[:len(events)-1] {
		if jsonField(t, ev, "method") != "notifications/progress" || jsonField(t, ev, "params", "progressToken") != "p-1" {
			t.Errorf("not this call's progress: %s", ev)
		}
	}
	if jsonField(t, events[len(events)-1], "id") != float64(2) || jsonField(t, events[len(events)-1], "result", "resultType") != "complete" {
		t.Errorf("stateless result: %s", events[len(events)-1])
	}

	_, body = stateless.post(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test_input_required_result_elicitation","arguments":{},`+meta+`}}}`)
	if events = sseData(body); len(events) != 1 || jsonField(t, events[0], "result", "resultType") != "input_required" {
		t.Errorf("multi round-trip result: %s", body)
	}
}

// A client that accepts only JSON gets one JSON body per POST: an object for
// one request, an array for a batch (protocol 2025-03-26 and older).
func TestJSONOnlyClient(t *testing.T) {
	a := startAdapter(t, []string{peer(t, "mcp-server-everything")}, nil)
	c := &rawClient{url: a.url, accept: "application/json"}
	c.initialize(t)
	resp, body := c.post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-sum","arguments":{"a":1,"b":2}}}`)
	if resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(fmt.Sprint(jsonField(t, body, "result", "content")), "is 3") {
		t.Errorf("one request: %s %s", resp.Header.Get("Content-Type"), body)
	}
	resp, body = c.post(t, `[{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"get-sum","arguments":{"a":1,"b":1}}},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"get-sum","arguments":{"a":2,"b":2}}}]`)
	var batch []map[string]any
	if err := json.Unmarshal(body, &batch); err != nil || len(batch) != 2 {
		t.Fatalf("batch: %s %s (%v)", resp.Header.Get("Content-Type"), body, err)
	}
	for _, r := range batch {
		want := map[any]string{"a": "is 2", "b": "is 4"}[r["id"]]
		if want == "" || !strings.Contains(fmt.Sprint(r["result"]), want) {
			t.Errorf("batch answer %v", r)
		}
	}
}

// A server that prints something that is not JSON-RPC on stdout: the line
// is logged and skipped, and the server keeps working.
func TestStrayOutputIsSkipped(t *testing.T) {
	cmd := []string{"sh", "-c", `echo "starting up, not JSON"; exec "$0"`, peer(t, "mcp-server-everything")}
	a := startAdapter(t, cmd, nil)
	c := &rawClient{url: a.url}
	c.initialize(t)
	if _, body := c.post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); !strings.Contains(string(body), `"tools"`) {
		t.Errorf("tools/list: %s", body)
	}
	if !strings.Contains(a.stderr.String(), "starting up, not JSON") {
		t.Errorf("the stray line was not logged:\n%s", a.stderr)
	}
}

// A session nobody uses ends after the idle timeout; one with an open GET
// stream does not.
func TestIdleSessionsEnd(t *testing.T) {
	// 2 s, not less: under a loaded make test a 200 ms timeout ended the
	// idle session between its initialize and notifications/initialized.
	// The test waits for the adapter to say it ended one, not a fixed time.
	a := startAdapter(t, []string{peer(t, "mcp-server-everything")}, func(c *Config) { c.SessionIdleTimeout = 2 * time.Second })
	idle, listening := &rawClient{url: a.url}, &rawClient{url: a.url}
	idle.initialize(t)
	listening.initialize(t)
	openGET(t, listening)
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(a.stderr.String(), "ended an idle session"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no session was ended as idle within 30 s")
		}
	}
	if resp, _ := idle.post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an idle session still answers: %s", resp.Status)
	}
	if resp, _ := listening.post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); resp.StatusCode != http.StatusOK {
		t.Errorf("a session with an open stream was ended: %s", resp.Status)
	}
}
