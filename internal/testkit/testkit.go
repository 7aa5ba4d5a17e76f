// Package testkit holds the small helpers that the tests of many packages
// share: a deadline for a test's calls, waiting until something holds, a
// free loopback port, a URL carrying credentials that no error may show,
// and the process's CPU time for benchmarks. It imports nothing of the
// project's, so a test of any package, however low (api/v1alpha1
// included), can use it; internal/testpeers, which needs the API types
// through internal/testenv, builds on it rather than the other way round.
package testkit

import (
	"context"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"
)

// TB is what the helpers need of a test; *testing.T, *testing.B and
// Ginkgo's GinkgoT() all have it.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// FreePort returns a loopback port that is free right now.
func FreePort(t TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("while finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Context is a context that ends after 30 s or when the test does: a call
// that hangs fails the test instead of stalling the whole run.
func Context(t TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Eventually polls cond until it holds, and fails the test, naming what it
// waited for, if it does not hold within 20 s (watches, caches and
// clean-ups in the background see a change a moment after it is made).
func Eventually(t TB, what string, cond func() bool) {
	t.Helper()
	eventually(t, 20*time.Second, what, cond)
}

func eventually(t TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s", within, what)
		}
	}
}

// URLSecrets are the credentials WithCredentials puts in a URL: a user and
// a password in its userinfo, a token, an API key and a signature in its
// query.
var URLSecrets = []string{"urluser", "pa55word", "s3cret-token", "k3y", "Zq81xw"}

// WithCredentials is base (scheme://host:port) at path with URLSecrets in
// its userinfo and query, as the URL of a remote server or a webhook may
// carry them.
func WithCredentials(base, path string) string {
	return strings.Replace(base, "://", "://urluser:pa55word@", 1) + path + "?token=s3cret-token&api_key=k3y&sig=Zq81xw"
}

// SecretURL is the MCP URL of a loopback port nothing listens on, with
// URLSecrets in it: a server that cannot be reached, whose errors must not
// show its credentials.
func SecretURL(t TB) string {
	t.Helper()
	return WithCredentials(fmt.Sprintf("http://127.0.0.1:%d", FreePort(t)), "/mcp")
}

// ShownSecret is the first of URLSecrets that text shows, or "" when it
// shows none.
func ShownSecret(text string) string {
	for _, s := range URLSecrets {
		if strings.Contains(text, s) {
			return s
		}
	}
	return ""
}

// ProcessCPU is the CPU time, user and system, this process has used: what
// work costs the cores, which its wall time does not say (a call waits for
// its upstream, and the scheduler's wake-ups are CPU spent off its path).
// Benchmarks read it before and after. Getrusage of the process itself
// fails only on a bad argument, which this is not.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
