package approval

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// The webhook's URL may carry a credential (a token in its query, a user
// and password): its errors name the URL without them.
func TestWebhookErrorsHideTheURLsCredentials(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testkit.FreePort(t)) // nothing listens there
	wh, err := NewWebhook(testkit.WithCredentials("http://"+addr, "/hook"), []byte("0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	notifyErr := wh.Notify(context.Background(), Notification{Type: EventRequested})
	if notifyErr == nil || !strings.Contains(notifyErr.Error(), "connection refused") {
		t.Fatalf("Notify to a closed port = %v, want the refusal", notifyErr)
	}
	errs := []error{notifyErr}
	for _, bad := range []string{
		"ftp://urluser:pa55word@hooks.example/hook?sig=Zq81xw",
		"urluser:pa55word@hooks.example/hook?sig=Zq81xw", // the scheme "urluser"
		"pa55word@hooks.example/hook?sig=Zq81xw",         // all path
	} {
		_, err := NewWebhook(bad, []byte("0123456789abcdef"))
		if err == nil {
			t.Fatalf("NewWebhook took %q", bad)
		}
		errs = append(errs, err)
	}
	// A Webhook made without NewWebhook, with a URL that does not parse:
	// url.Parse's error quotes it ("pa55word" read as a port).
	unparsed := &Webhook{URL: "http://urluser:pa55word/hook?sig=Zq81xw", Secret: []byte("0123456789abcdef")}
	parseErr := unparsed.Notify(context.Background(), Notification{Type: EventRequested})
	if parseErr == nil {
		t.Fatal("Notify to a URL that does not parse succeeded")
	}
	for _, err := range append(errs, parseErr) {
		if s := testkit.ShownSecret(err.Error()); s != "" {
			t.Errorf("the error %q shows %q of the URL", err, s)
		}
	}
}
