package audit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/audit"
	"github.com/mcp-operator/mcp-operator/internal/redact"
)

// The bridge records the decision and forwards the call only once Write
// has accepted it.
func ExampleWriter() {
	clock := time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC)
	w := audit.New(audit.Options{
		Sink:     os.Stdout,
		ArgsMode: audit.ArgsFull,
		Redactor: redact.New("s3cr3t-db-password"), // the Secret values of the servers
		Clock:    func() time.Time { clock = clock.Add(time.Millisecond); return clock },
	})
	const session, subject = "sess-1", "system:serviceaccount:agents:bot"
	args := json.RawMessage(`{"query":"select 1","password":"s3cr3t-db-password"}`)

	_, _ = w.Write(session, subject, audit.PermissionRequested{Tool: "mcp.db.query", Args: args, RiskAtDecision: "read", SourcedFrom: "mcp", ToolCallID: "c1"})
	if _, err := w.Write(session, subject, audit.PermissionResolved{Decision: "allow", Actor: "policy", SourcedFrom: "policy:agents/db#rules[0]", ToolCallID: "c1", Tool: "mcp.db.query"}); errors.Is(err, audit.ErrDropped) {
		return // fail the call: its decision is not on record
	}
	// ... forward the call upstream ...
	_ = w.Close(context.Background())
	fmt.Println("done")
	// Output:
	// {"seq":1,"time":"2026-07-28T10:00:00.001000Z","type":"permission.requested","session":"sess-1","subject":"system:serviceaccount:agents:bot","tool":"mcp.db.query","args":{"query":"select 1","password":"[REDACTED:secret]"},"riskAtDecision":"read","sourcedFrom":"mcp","toolCallId":"c1"}
	// {"seq":2,"time":"2026-07-28T10:00:00.002000Z","type":"permission.resolved","session":"sess-1","subject":"system:serviceaccount:agents:bot","decision":"allow","actor":"policy","sourcedFrom":"policy:agents/db#rules[0]","toolCallId":"c1","tool":"mcp.db.query"}
	// done
}
