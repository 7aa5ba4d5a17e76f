package approval

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/safeurl"
)

// Kinds of notification, one per step of an approval.
const (
	EventRequested = "approval.requested"
	EventApproved  = "approval.approved"
	EventDenied    = "approval.denied"
	EventExpired   = "approval.expired"
	EventCancelled = "approval.cancelled"
)

func eventOf(p v1alpha1.ApprovalPhase) string {
	switch p {
	case v1alpha1.ApprovalApproved:
		return EventApproved
	case v1alpha1.ApprovalExpired:
		return EventExpired
	case v1alpha1.ApprovalCancelled:
		return EventCancelled
	}
	return EventDenied
}

// Notification is the JSON body a webhook receives.
type Notification struct {
	// Type is one of the Event* kinds.
	Type      string    `json:"type"`
	Time      time.Time `json:"time"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	// Request is the ToolApproval's request (arguments as the redacted
	// preview and their digest only).
	Request v1alpha1.ApprovalRequest `json:"request"`
	// Decision, Phase and Message are set once it ended.
	Decision *v1alpha1.ApprovalDecision `json:"decision,omitempty"`
	Phase    v1alpha1.ApprovalPhase     `json:"phase,omitempty"`
	Message  string                     `json:"message,omitempty"`
	// Decide says how a person decides a pending approval.
	Decide string `json:"decide,omitempty"`
}

// Notifier tells people about approvals.
type Notifier interface {
	Notify(ctx context.Context, n Notification) error
}

// notify sends n without holding up the request: a slow or failing receiver
// is logged, never waited for beyond its own timeout.
func (b *Broker) notify(ctx context.Context, typ string, a *v1alpha1.ToolApproval, outcome ...Outcome) {
	if b.Notifier == nil {
		return
	}
	n := Notification{Type: typ, Time: b.now().UTC(), Namespace: a.Namespace, Name: a.Name, Request: a.Spec.Request}
	if len(outcome) == 0 {
		n.Phase = v1alpha1.ApprovalPending
		n.Decide = fmt.Sprintf("kubectl mcp approve %s -n %s   (or: kubectl mcp deny %s -n %s)", a.Name, a.Namespace, a.Name, a.Namespace)
	} else {
		o := outcome[0]
		n.Phase, n.Message = o.Phase, o.Message
		if o.Decider != "" {
			n.Decision = &v1alpha1.ApprovalDecision{Verdict: o.Verdict, Decider: o.Decider, Comment: o.Comment}
		}
	}
	go func() {
		nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := b.Notifier.Notify(nctx, n); err != nil {
			b.Log.Error(err, "an approval notification was not delivered", "approval", a.Namespace+"/"+a.Name, "type", typ)
		}
	}()
}

// SignatureHeader carries the HMAC-SHA256 of the body, as sha256=<hex>, so a
// receiver can check the body came from a holder of the shared secret.
const SignatureHeader = "X-MCP-Operator-Signature"

// Webhook posts each notification as JSON to URL, signed with Secret.
type Webhook struct {
	URL    string
	Secret []byte
	// Client sends the requests (when nil, a client with a 10s timeout that
	// follows no redirects).
	Client *http.Client
}

// NewWebhook checks the URL and the secret.
func NewWebhook(rawURL string, secret []byte) (*Webhook, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("approval webhook URL %s: want an absolute http:// or https:// URL", safeurl.String(rawURL))
	}
	if len(secret) < 16 {
		return nil, errors.New("approval webhook secret: want at least 16 bytes, so the signature cannot be guessed")
	}
	return &Webhook{URL: rawURL, Secret: secret}, nil
}

// Sign is the signature header's value for body.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Notify posts n; any status but 2xx is an error.
func (w *Webhook) Notify(ctx context.Context, n Notification) error {
	body, err := json.Marshal(n)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		// url.Parse's error quotes the URL.
		return fmt.Errorf("while making the approval webhook's request: %w", safeurl.Error(err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, Sign(w.Secret, body))
	c := w.Client
	if c == nil {
		// A redirect is not followed: the signed body would go to an
		// address nobody configured.
		c = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	resp, err := c.Do(req)
	if err != nil {
		// net/http's error names the URL, which may carry a credential.
		return fmt.Errorf("while posting to the approval webhook: %w", safeurl.Error(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the approval webhook answered %s", resp.Status)
	}
	return nil
}
