package stdioadapter

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The official TypeScript SDK client talks to server-everything through the
// adapter and uses every kind of message: requests and responses, progress
// notifications, logging, and requests the server starts (elicitation,
// sampling, roots) answered by the client.
func TestEverythingServerThroughAdapter(t *testing.T) {
	a := startAdapter(t, []string{peer(t, "mcp-server-everything")}, nil)
	out := tsClient(t, a.url, "everything", "")

	server := out["server"].(map[string]any)
	if server["name"] != "mcp-servers/everything" {
		t.Errorf("serverInfo = %v", server)
	}
	if out["protocolVersion"] != "2025-11-25" {
		t.Errorf("negotiated protocol = %v", out["protocolVersion"])
	}
	tools := fmt.Sprint(out["tools"])
	for _, want := range []string{"echo", "get-sum", "trigger-elicitation-request", "trigger-sampling-request", "get-roots-list"} {
		if !strings.Contains(tools, want) {
			t.Errorf("tools/list lacks %s: %s", want, tools)
		}
	}
	checks := map[string]string{
		"echo":        "Echo: hello through the adapter",
		"sum":         "42",
		"longRunning": "Long running operation completed",
		"elicitation": "Ada Lovelace",
		"sampling":    "sampled by the test client",
		"roots":       "file:///workspace/test-root",
		"prompt":      "Paris",
	}
	for key, want := range checks {
		if got, _ := out[key].(string); !strings.Contains(got, want) {
			t.Errorf("%s = %q, want it to contain %q", key, got, want)
		}
	}
	notes := out["notes"].(map[string]any)
	if got := fmt.Sprint(notes["progress"]); got != "[1 2 3 4]" {
		t.Errorf("progress notifications = %s, want [1 2 3 4]", got)
	}
	if logs := notes["logs"].([]any); len(logs) == 0 {
		t.Error("no logging notification reached the client")
	}
	requests := fmt.Sprint(notes["serverRequests"])
	for _, want := range []string{"elicitation/create", "sampling/createMessage", "roots/list"} {
		if !strings.Contains(requests, want) {
			t.Errorf("the client did not get the server's %s request: %s", want, requests)
		}
	}
	if out["resourceCount"].(float64) == 0 || out["resource"] == "" {
		t.Errorf("resources: %v %v", out["resourceCount"], out["resource"])
	}
}

// Two clients share one server: their request ids collide (the TypeScript
// client numbers from 0 in every session), each gets only its own answers,
// and the server is initialized once, by the first client.
func TestClientsShareOneServer(t *testing.T) {
	stdinLog := filepath.Join(t.TempDir(), "stdin.log")
	// tee records every line the server reads, as it reads it.
	cmd := []string{"sh", "-c", `tee "$0" | exec "$1"`, stdinLog, peer(t, "mcp-server-everything")}
	a := startAdapter(t, cmd, nil)

	results := make([]map[string]any, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { results[i], errs[i] = tsClientRun(a.url, "sum", fmt.Sprint(i+1)) })
	}
	wg.Wait()
	sessions := map[any]bool{}
	for i, out := range results {
		if errs[i] != nil {
			t.Fatalf("client %d: %v", i+1, errs[i])
		}
		if out["wrong"].(float64) != 0 || out["calls"].(float64) != 60 {
			t.Errorf("client %d: %v of %v answers were someone else's", i+1, out["wrong"], out["calls"])
		}
		sessions[out["sessionId"]] = true
	}
	if len(sessions) != 3 {
		t.Errorf("the clients shared sessions: %v", sessions)
	}

	data, err := os.ReadFile(stdinLog)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	count := func(method string) int {
		n := 0
		for _, l := range lines {
			if strings.Contains(l, `"method":"`+method+`"`) {
				n++
			}
		}
		return n
	}
	if n := count("initialize"); n != 1 {
		t.Errorf("the server got %d initialize requests, want 1", n)
	}
	if n := count("notifications/initialized"); n != 1 {
		t.Errorf("the server got %d notifications/initialized, want 1", n)
	}
	// The ids the server saw are all different although the clients' were not.
	var ids []string
	for _, l := range lines {
		msg, err := parseMessage([]byte(l))
		if err != nil {
			t.Fatalf("the server read a malformed line %q: %v", l, err)
		}
		if msg.kind == kindRequest {
			ids = append(ids, string(msg.id))
		}
	}
	slices.Sort(ids)
	if len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Errorf("the server saw a request id twice: %v", ids)
	}
	if n := count("tools/call"); n != 180 {
		t.Errorf("the server got %d tools/call, want 180", n)
	}
}

// server-filesystem, a second real stdio server, with destructive tools.
func TestFilesystemServerThroughAdapter(t *testing.T) {
	dir := t.TempDir()
	dir, _ = filepath.EvalSymlinks(dir)
	a := startAdapter(t, []string{peer(t, "mcp-server-filesystem"), dir}, nil)
	out := tsClient(t, a.url, "filesystem", dir)
	if !strings.Contains(fmt.Sprint(out["tools"]), "write_file") {
		t.Errorf("tools: %v", out["tools"])
	}
	if !strings.Contains(out["allowed"].(string), dir) {
		t.Errorf("allowed directories: %v", out["allowed"])
	}
	if out["read"] != "written through the adapter\n" {
		t.Errorf("read back %q", out["read"])
	}
	if !strings.Contains(out["list"].(string), "note.txt") {
		t.Errorf("list_directory: %v", out["list"])
	}
	data, err := os.ReadFile(filepath.Join(dir, "note.txt"))
	if err != nil || string(data) != "written through the adapter\n" {
		t.Errorf("the file on disk holds %q (%v)", data, err)
	}
}
