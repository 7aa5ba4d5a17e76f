package audit

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/mcp/injection"
	"github.com/mcp-operator/mcp-operator/internal/redact"
)

// The hand-written field encoders write what encoding/json writes from the
// json tags (with HTML characters unescaped, arguments in full), so a reader
// can decode lines into the payload types.
func TestFieldsAgreeWithJSONTags(t *testing.T) {
	args := json.RawMessage(`{"path":"/a<b>&c","n":[1,2.5,null],"u":"é\u2028"}`)
	fs := []injection.Finding{{Pattern: "instruction-tag", Where: "content[0].text", Excerpt: `"<IMPORTANT>"`}}
	text := "line\n\t\"quoted\" <b>&</b> é 日本 \x01"
	payloads := []Payload{
		PermissionRequested{Tool: "mcp.fs.read_file", Args: args, RiskAtDecision: "read", SourcedFrom: "mcp", ToolCallID: text},
		PermissionRequested{Tool: "t"},
		PermissionRequested{Resource: "mcp://s/file:///a", RiskAtDecision: "read", SourcedFrom: "mcp", ToolCallID: "c"},
		PermissionRequested{Prompt: "mcp.s.p", Args: args, ToolCallID: "c"},
		PermissionResolved{Decision: "deny", Actor: "bridge", SourcedFrom: "default", ToolCallID: "c", Tool: "t", Reason: "approval_unavailable"},
		PermissionResolved{},
		PermissionResolved{Decision: "allow", Actor: "user", SourcedFrom: "approval:once", ToolCallID: "c", Resource: "mcp://s/u"},
		PermissionResolved{Decision: "deny", Actor: "user", SourcedFrom: "approval:deny", ToolCallID: "c", Reason: "r", Prompt: "mcp.s.p"},
		PermissionResolved{Decision: "allow", Actor: "user", SourcedFrom: "approval:tools/fs-x7k2p", ToolCallID: "c", Tool: "mcp.fs.write", Approver: "alice"},
		MCPCallStarted{Server: "fs", ToolCallID: "c", Method: "tools/call", Args: args},
		MCPCallCompleted{Server: "fs", ToolCallID: "c", DurationMs: 0.123},
		MCPCallCompleted{DurationMs: 123456.789},
		MCPCallCompleted{DurationMs: 1e-9},
		MCPCallCompleted{DurationMs: 3e22},
		MCPCallFailed{Server: "fs", ToolCallID: "c", DurationMs: 12, Error: text, Code: -32603},
		MCPCallFailed{},
		ToolStarted{Tool: "t", ToolCallID: "c", Server: "s"},
		ToolCompleted{ResultPreview: text, ResultSize: 1 << 40, ToolCallID: "c", Tool: "t", IsError: true,
			Redactions: map[string]int{"secret": 2, "jwt": 1, "bearer": 3}, Injection: fs, Blocked: true, Artifact: "artifact://ab"},
		ToolCompleted{},
		ToolFailed{Reason: "mcp_server_restarted", ToolCallID: "c", Tool: "t", Message: text},
		ToolFailed{Reason: "denied", ToolCallID: "c", Resource: "mcp://s/u"},
		ToolFailed{Reason: "upstream_error", ToolCallID: "c", Prompt: "mcp.s.p", Message: "m"},
		ToolAmbiguousCall{Tool: "read_file", Candidates: []string{"mcp.fs.read_file", "mcp.fs-v2.read_file"}},
		ToolAmbiguousCall{Tool: "x", Candidates: []string{}},
		ToolAmbiguousCall{},
		ResourceRequested{Server: "s", URI: "file:///a?b=c&d=e"},
		ResourceRequested{Server: "s", URI: "u", ToolCallID: "c"},
		ResourceFetched{Server: "s", URI: "u", SizeBytes: 12, ContentHash: "sha256:00"},
		ResourceFetched{Server: "s", URI: "u", SizeBytes: 12, ContentHash: "sha256:00", ToolCallID: "c"},
		PromptInvoked{Server: "s", Prompt: "p", Args: args},
		PromptInvoked{Server: "s", Prompt: "p", ToolCallID: "c"},
		PromptExpanded{Server: "s", Prompt: "p", Messages: 2, SizeBytes: 99, Injection: fs, Blocked: true},
		PromptExpanded{Server: "s", Prompt: "p", ToolCallID: "c"},
		ServerCrashed{Server: "s", Namespace: "n", Reason: "OOMKilled", Crashes: 2},
		ServerRestarting{Server: "s", Attempt: 2, BackoffMs: 1000},
		ServerPermanentlyFailed{Server: "s", Restarts: 3, LastExitReason: "Error"},
		ServerShutdown{Server: "s", Reason: "suspend"},
		Dropped{Count: 17},
	}
	w := New(Options{Sink: &bytes.Buffer{}, ArgsMode: ArgsFull})
	defer w.Close(ctx(t))
	for _, p := range payloads {
		e := w.encodeBody("", "", Trace{}, p)
		got := string(e.b)
		fieldWriters.Put(e)
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(p); err != nil {
			t.Fatal(err)
		}
		want := `"type":"` + p.EventType() + `","session":"","subject":""`
		if fields := strings.TrimSuffix(buf.String(), "}\n")[1:]; fields != "" {
			want += "," + fields
		}
		want += "}\n"
		if got != want {
			t.Errorf("%T\n got %s\nwant %s", p, got, want)
		}
	}
}

// Every string field is redacted, not only the arguments.
func TestEveryStringIsRedacted(t *testing.T) {
	const secret = "s3cr3t-of-the-server"
	var out bytes.Buffer
	w := New(Options{Sink: lockedWriter{&out}, Redactor: redact.New(secret), ArgsMode: ArgsFull})
	_, _ = w.Write(secret, secret, ToolCompleted{ResultPreview: secret, Tool: secret, ToolCallID: secret,
		Injection: []injection.Finding{{Where: secret, Excerpt: secret}}})
	_, _ = w.Write("", "", ToolAmbiguousCall{Tool: secret, Candidates: []string{secret}})
	_, _ = w.Write("", "", MCPCallFailed{Error: "auth failed for " + secret})
	_, _ = w.Write("", "", PromptInvoked{Args: json.RawMessage(`{"k":"` + secret + `"}`)})
	if err := w.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), secret) || strings.Count(out.String(), "[REDACTED:secret]") != 11 {
		t.Fatalf("stream:\n%s", out.String())
	}
}

// A change of redactor applies from the next event on: a value that became
// a Secret's is redacted, one that stopped being one is written again.
func TestRedactorChangesApplyToTheNextEvent(t *testing.T) {
	const value = "s3cr3t-value-of-a-new-server"
	var sink bytes.Buffer
	w := New(Options{Sink: &sink})
	ev := ToolStarted{Tool: "mcp.fs.read", ToolCallID: "c1", Server: "fs"}
	write := func() {
		t.Helper()
		if _, err := w.Write("s1", value, ev); err != nil {
			t.Fatal(err)
		}
	}
	write()
	write()
	w.SetRedactor(redact.New(value))
	write()
	w.SetRedactor(nil)
	write()
	if err := w.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for _, line := range strings.Split(strings.TrimSpace(sink.String()), "\n") {
		var e struct{ Subject string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		subjects = append(subjects, e.Subject)
	}
	want := []string{value, value, redact.Secret.Replacement(), value}
	if !slices.Equal(subjects, want) {
		t.Errorf("subjects %q, want %q", subjects, want)
	}
}
