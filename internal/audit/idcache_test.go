package audit

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/redact"
)

// A session id or subject is redacted in every event as redacting it again
// would: the cache answers for the redactor that redacted it, a new
// redactor (a server's Secret value learned since) redacts it anew, and
// the cache stays bounded however many sessions come and go.
func TestSessionAndSubjectRedactedThroughTheCache(t *testing.T) {
	var out bytes.Buffer
	w := New(Options{Sink: lockedWriter{&out}})
	const leaky = "agent-s3cr3t-value-7f3a"
	write := func() {
		t.Helper()
		if _, err := w.Write("session-"+leaky, "user-"+leaky, ToolStarted{Tool: "mcp.s.t", ToolCallID: "c", Server: "s"}); err != nil {
			t.Fatal(err)
		}
	}
	write() // cached as the shapes leave it: the value is no shape
	w.SetRedactor(redact.New("s3cr3t-value-7f3a"))
	write()
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2", len(lines))
	}
	if !strings.Contains(lines[0], `"session":"session-`+leaky+`"`) {
		t.Fatalf("before the Secret was known the id is written as it is: %s", lines[0])
	}
	if strings.Contains(lines[1], "s3cr3t-value") || strings.Count(lines[1], "[REDACTED") < 2 {
		t.Fatalf("after the Secret was known, the cached session and subject must be redacted anew: %s", lines[1])
	}

	var c idCache
	r := redact.New("hidden-value-3c9d")
	for i := range 3 * maxCachedIDs {
		id := fmt.Sprintf("session-%d-hidden-value-3c9d", i)
		if got, want := c.redacted(r, id), r.String(id, nil); got != want {
			t.Fatalf("%q: cached %q, redacting gives %q", id, got, want)
		}
		if got := c.redacted(r, id); got != r.String(id, nil) {
			t.Fatalf("%q: a hit gave %q", id, got)
		}
	}
	if len(c.m) > maxCachedIDs {
		t.Fatalf("the cache holds %d ids, bound %d", len(c.m), maxCachedIDs)
	}
}
