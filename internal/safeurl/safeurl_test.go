package safeurl

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	cases := map[string]struct{ raw, want string }{
		"plain":             {"https://mcp.example.com/mcp", "https://mcp.example.com/mcp"},
		"query values":      {"https://h:8443/mcp?token=s3cret&api_key=k3y&x=", "https://h:8443/mcp?token=REDACTED&api_key=REDACTED&x=REDACTED"},
		"bare query value":  {"https://h/mcp?s3cret&v=1", "https://h/mcp?REDACTED&v=REDACTED"},
		"user and password": {"https://alice:s3cret@h/mcp", "https://REDACTED@h/mcp"},
		"user alone":        {"http://t0ken@h/mcp", "http://REDACTED@h/mcp"},
		"fragment dropped":  {"https://h/mcp#s3cret", "https://h/mcp"},
		"net/http's form":   {"https://alice:***@h/mcp?token=s3cret", "https://REDACTED@h/mcp?token=REDACTED"},
		// Nothing of these is shown: which part is the secret cannot be told.
		"does not parse":        {"https://alice:s3cret@h/%zz", NotAURL},
		"opaque":                {"mailto:s3cret@example.com", NotAURL},
		"no scheme, no host":    {"s3cret@hooks.example/hook", NotAURL},
		"user taken for scheme": {"alice:pa55word@h/mcp", NotAURL},
		"scheme-relative":       {"//alice:pa55word@h/mcp", NotAURL},
		"scheme without a host": {"https:///alice:pa55word@h/mcp", NotAURL},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := String(c.raw); got != c.want {
				t.Fatalf("String(%q) = %q, want %q", c.raw, got, c.want)
			}
		})
	}
}

// A real http.Client's failure names the URL with its user and query (only
// the password hidden); Error hides them and keeps what the error is.
func TestErrorOfAnHTTPClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: the dial is refused
	raw := "http://alice:pa55word@" + addr + "/mcp?token=s3cret"
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = http.DefaultClient.Do(req)
	if err == nil {
		t.Fatal("a POST to a closed port succeeded")
	}
	if !strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "alice") {
		t.Fatalf("net/http's error %q no longer names the URL: this test shows nothing", err)
	}
	safe := Error(err)
	for _, secret := range []string{"alice", "pa55word", "s3cret"} {
		if strings.Contains(safe.Error(), secret) {
			t.Fatalf("Error(%q) = %q, which shows %q", err, safe, secret)
		}
	}
	if want := "http://REDACTED@" + addr + "/mcp?token=REDACTED"; !strings.Contains(safe.Error(), want) {
		t.Fatalf("Error(%q) = %q, want the URL as %q", err, safe, want)
	}
	var opErr *net.OpError
	if !errors.As(safe, &opErr) {
		t.Fatalf("Error(%q) lost the *net.OpError under it", err)
	}
	var ue *url.Error
	if !errors.As(safe, &ue) || ue.Op != "Post" {
		t.Fatalf("Error(%q) = %#v, want a *url.Error of Post", err, safe)
	}
	if other := errors.New("not a URL's"); Error(other) != other {
		t.Fatal("Error changed an error that is no *url.Error")
	}
}

// A URL that does not parse reaches Error as url.Parse's error (from
// http.NewRequest, say), whose own text quotes the part that failed: here
// a piece of the password read as a port. Error keeps that it was a parse
// failure and shows neither.
func TestErrorOfAParseFailure(t *testing.T) {
	raw := "https://alice:ab/cd@h/mcp"
	_, err := http.NewRequestWithContext(context.Background(), http.MethodPost, raw, nil)
	if err == nil || !strings.Contains(err.Error(), ":ab") {
		t.Fatalf("net/http's error %v no longer quotes the URL: this test shows nothing", err)
	}
	safe := Error(err)
	for _, secret := range []string{"alice", ":ab", "ab/cd"} {
		if strings.Contains(safe.Error(), secret) {
			t.Fatalf("Error(%q) = %q, which shows %q", err, safe, secret)
		}
	}
	var ue *url.Error
	if !errors.As(safe, &ue) || ue.Op != "parse" || !errors.Is(safe, errNotAURL) {
		t.Fatalf("Error(%q) = %#v, want a *url.Error of parse, not a valid URL", err, safe)
	}
}
