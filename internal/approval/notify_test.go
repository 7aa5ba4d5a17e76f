package approval

import (
	"context"
	"fmt"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
	"strings"
	"testing"
)

// The webhook's URL may carry a credential (a token in its query, a user
// and password): its errors name the URL without them.
func TestWebhookErrorsHideTheURLsCredentials(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testpeers.FreePort(t)) // nothing listens there
	secrets := []string{"urluser", "pa55word", "Zq81xw"}
	wh, err := NewWebhook("http://urluser:pa55word@"+addr+"/hook?sig=Zq81xw", []byte("0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	notifyErr := wh.Notify(context.Background(), Notification{Type: EventRequested})
	if notifyErr == nil || !strings.Contains(notifyErr.Error(), "connection refused") {
		t.Fatalf("Notify to a closed port = %v, want the refusal", notifyErr)
	}
	_, badErr := NewWebhook("ftp://urluser:pa55word@hooks.example/hook?sig=Zq81xw", []byte("0123456789abcdef"))
	if badErr == nil {
		t.Fatal("NewWebhook took an ftp:// URL")
	}
	for _, err := range []error{notifyErr, badErr} {
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Errorf("the error %q shows %q of the URL", err, s)
			}
		}
	}
}
