package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
)

// upstreamMode is what the recording upstream does with a tools/call: a
// fault the schedule turns on for a while. Real servers do not hang, answer
// garbage or cut an answer off on demand, so the soak's own upstream does.
type upstreamMode int32

const (
	modeHealthy upstreamMode = iota
	// modeHang counts the call, then never answers: the bridge's deadline
	// must end it.
	modeHang
	// modeGarbage counts the call, then answers a body that is not JSON-RPC.
	modeGarbage
	// modeCut counts the call, then closes the connection in the middle of
	// the answer.
	modeCut
)

func (m upstreamMode) String() string {
	return [...]string{"healthy", "hanging", "garbage", "cut mid-answer"}[m]
}

// recorder is the soak's upstream MCP server (Streamable HTTP, session era,
// a remote MCPServer the bridge reaches on this machine's address on the
// pod network). It counts every execution of a tool call per the id the
// soak put in its arguments, so a call run twice shows, and the sessions
// the bridge opens and ends.
type recorder struct {
	mode atomic.Int32

	mu       sync.Mutex
	runs     map[string]int
	sessions map[string]bool // open upstream sessions
	opened   int
	closed   int
	nextSess int
}

func newRecorder() *recorder {
	return &recorder{runs: map[string]int{}, sessions: map[string]bool{}}
}

// The recorder's tools. The soak's policy allows record and large, denies
// forbidden, and asks before ask (a person, through a ToolApproval) and
// confirm (the agent's own client, by elicitation).
var recorderTools = []string{"record", "large", "forbidden", "ask", "confirm"}

func (rc *recorder) setMode(m upstreamMode) { rc.mode.Store(int32(m)) }

// executions is how many times each id ran.
func (rc *recorder) executions() map[string]int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make(map[string]int, len(rc.runs))
	for k, v := range rc.runs {
		out[k] = v
	}
	return out
}

func (rc *recorder) sessionCounts() (opened, closed, live int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.opened, rc.closed, len(rc.sessions)
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodDelete:
		rc.mu.Lock()
		if id := r.Header.Get("Mcp-Session-Id"); rc.sessions[id] {
			delete(rc.sessions, id)
			rc.closed++
		}
		rc.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		return
	case http.MethodPost:
	default:
		// No server-to-client stream: resource updates are not offered.
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	m, err := jsonrpc.Decode(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !m.IsRequest() {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	sid := r.Header.Get("Mcp-Session-Id")
	if m.Method != "initialize" && sid != "" {
		rc.mu.Lock()
		known := rc.sessions[sid]
		rc.mu.Unlock()
		if !known {
			http.Error(w, "unknown session", http.StatusNotFound)
			return
		}
	}
	reply := func(result string) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":`+result+`}`)
	}
	switch m.Method {
	case "initialize":
		rc.mu.Lock()
		rc.nextSess++
		sid = fmt.Sprintf("soak-%d", rc.nextSess)
		rc.sessions[sid] = true
		rc.opened++
		rc.mu.Unlock()
		w.Header().Set("Mcp-Session-Id", sid)
		reply(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"soak-recorder","version":"1"}}`)
	case "tools/list":
		var tools []string
		for _, name := range recorderTools {
			tools = append(tools, `{"name":"`+name+`","description":"the soak's recording tool `+name+`",`+
				`"inputSchema":{"type":"object","properties":{"id":{"type":"string"},"size":{"type":"integer"}},"required":["id"]}}`)
		}
		reply(`{"tools":[` + strings.Join(tools, ",") + `]}`)
	case "tools/call":
		rc.call(w, r, m, reply)
	case "ping":
		reply(`{}`)
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"error":{"code":-32601,"message":"method not found"}}`)
	}
}

// call runs (counts) one tool call, then answers it as the mode says.
func (rc *recorder) call(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message, reply func(string)) {
	var p struct {
		Name      string `json:"name"`
		Arguments struct {
			ID   string `json:"id"`
			Size int    `json:"size"`
		} `json:"arguments"`
	}
	_ = json.Unmarshal(m.Params, &p)
	rc.mu.Lock()
	rc.runs[p.Arguments.ID]++
	rc.mu.Unlock()
	switch upstreamMode(rc.mode.Load()) {
	case modeHang:
		<-r.Context().Done()
		return
	case modeGarbage:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "\x00<html>not json-rpc}{")
		return
	case modeCut:
		// Promise a longer body than is sent, then drop the connection.
		hj, ok := w.(http.Hijacker)
		if !ok {
			return
		}
		conn, buf, err := hj.Hijack()
		if err != nil {
			return
		}
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n" +
			`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"content":[{"type":"te`)
		_ = buf.Flush()
		_ = conn.Close()
		return
	}
	text := "ran " + p.Arguments.ID
	if p.Name == "large" && p.Arguments.Size > 0 {
		text += " " + strings.Repeat("0123456789abcdef", p.Arguments.Size/16)
	}
	out, _ := json.Marshal(text)
	reply(`{"content":[{"type":"text","text":` + string(out) + `}]}`)
}
