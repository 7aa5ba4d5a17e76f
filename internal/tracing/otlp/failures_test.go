package otlp

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// A redirect is a failure: the spans are not sent (as a GET without them)
// to where it points, nor the configured headers.
func TestRedirectIsNotFollowed(t *testing.T) {
	for _, protocol := range protocols {
		t.Run(protocol, func(t *testing.T) {
			var elsewhere atomic.Int32
			target := serveClearText(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
			moved := serveClearText(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target.URL+r.URL.Path, http.StatusFound)
			}))
			e := exporter(t, collectorEnv(protocol, moved.URL, "OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s3cret"))
			err := export(e, span(t))
			if err == nil || !strings.Contains(err.Error(), "302 Found") || !strings.Contains(err.Error(), "a redirect to "+target.URL) {
				t.Fatalf("error %v, want the redirect", err)
			}
			if n := elsewhere.Load(); n != 0 {
				t.Fatalf("the redirect's target received %d requests", n)
			}
		})
	}
}

// Shutdown ends an export waiting for the hour its collector asked for,
// and returns once the export has.
func TestShutdownEndsARunningExport(t *testing.T) {
	for _, protocol := range protocols {
		t.Run(protocol, func(t *testing.T) {
			c := newCollector(t)
			c.answer = func(_ int, w http.ResponseWriter) {
				w.Header().Set("Retry-After", "3600")
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			c.rpc = func(int) (*collectortrace.ExportTraceServiceResponse, error) {
				st, err := status.New(grpccodes.ResourceExhausted, "come back later").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Hour)})
				if err != nil {
					t.Error(err)
				}
				return nil, st.Err()
			}
			e := exporter(t, collectorEnv(protocol, c.serve().URL, "OTEL_EXPORTER_OTLP_TIMEOUT", "7200000"))
			exported := make(chan error, 1)
			go func() { exported <- export(e, span(t)) }()
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if requests, _ := c.got(); len(requests) > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the collector received nothing in 30 s")
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := e.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			// The export has returned (Shutdown waited for it), but its
			// goroutine may not have sent its error yet.
			if err := ended(t, exported); !errors.Is(err, errShutdown) {
				t.Fatalf("the export ended with %v, want the shutdown", err)
			}
		})
	}
}

// sendWrapped replaces e's send with around, given the real one.
func sendWrapped(e *Exporter, around func(ctx context.Context, body []byte, send func(context.Context, []byte) error) error) {
	send := e.send
	e.send = func(ctx context.Context, body []byte) error { return around(ctx, body, send) }
}

// Shutdown lets an attempt in flight finish (its batch is accepted), and
// returns after its export did. The attempt is held until Shutdown has
// begun (e.waits ends first thing), then sent for real. Sync points, no
// timing: the attempt has begun (entered) before Shutdown is called, so
// its export is one Shutdown waits for.
func TestShutdownLetsAnAttemptFinish(t *testing.T) {
	for _, protocol := range protocols {
		t.Run(protocol, func(t *testing.T) {
			c := newCollector(t)
			e := exporter(t, collectorEnv(protocol, c.serve().URL))
			var returned atomic.Bool
			entered := make(chan struct{})
			sendWrapped(e, func(ctx context.Context, body []byte, send func(context.Context, []byte) error) error {
				close(entered)
				<-e.waits.Done()
				err := send(ctx, body)
				returned.Store(true)
				return err
			})
			exported := make(chan error, 1)
			go func() { exported <- export(e, span(t)) }()
			waitClosed(t, entered)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := e.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if !returned.Load() {
				t.Fatal("Shutdown returned before the attempt in flight")
			}
			if err := ended(t, exported); err != nil {
				t.Fatalf("the export ended with %v, want the batch accepted", err)
			}
			if requests, _ := c.got(); len(requests) != 1 {
				t.Fatalf("the collector received %d requests, want 1", len(requests))
			}
		})
	}
}

// ended is the error of the export that sends it to exported, and fails
// the test when none comes in 30 s.
func ended(t *testing.T, exported <-chan error) error {
	t.Helper()
	select {
	case err := <-exported:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the export did not end in 30 s after Shutdown")
		return nil
	}
}

// waitClosed returns once ch is closed, and fails the test after 30 s.
func waitClosed(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal("the attempt did not begin in 30 s")
	}
}

// When Shutdown's context ends first, the attempt in flight is cancelled
// and Shutdown returns the context's error. The attempt (held until its
// context ends) stands for a collector that never answers.
func TestShutdownCancelsAnAttemptWhenItsContextEnds(t *testing.T) {
	e := exporter(t, collectorEnv(ProtocolHTTP, "http://127.0.0.1:4318"))
	entered := make(chan struct{})
	sendWrapped(e, func(ctx context.Context, _ []byte, _ func(context.Context, []byte) error) error {
		close(entered)
		<-ctx.Done()
		return context.Cause(ctx)
	})
	exported := make(chan error, 1)
	go func() { exported <- export(e, span(t)) }()
	waitClosed(t, entered)
	ctx, cancel := context.WithCancel(context.Background())
	// Ends Shutdown's context once Shutdown has begun.
	go func() { <-e.waits.Done(); cancel() }()
	if err := e.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown returned %v, want its context's end", err)
	}
	if err := ended(t, exported); !errors.Is(err, errShutdown) {
		t.Fatalf("the export ended with %v, want the shutdown", err)
	}
}

// The waits a collector asks for: a wait past the export's timeout (or
// past what a Duration holds) is not waited for.
func TestRetryAfterPastTheTimeout(t *testing.T) {
	for _, after := range []string{"60", "99999999999999999999"} {
		t.Run(after, func(t *testing.T) {
			c := newCollector(t)
			c.answer = func(_ int, w http.ResponseWriter) {
				w.Header().Set("Retry-After", after)
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			e := exporter(t, collectorEnv(ProtocolHTTP, c.serve().URL, "OTEL_EXPORTER_OTLP_TIMEOUT", "5000"))
			err := export(e, span(t))
			if err == nil || !strings.Contains(err.Error(), "not tried again") {
				t.Fatalf("error %v, want one saying it was not tried again", err)
			}
			if requests, _ := c.got(); len(requests) != 1 {
				t.Fatalf("%d attempts, want 1", len(requests))
			}
		})
	}
}

func TestRetryAfterDate(t *testing.T) {
	// An HTTP date has whole seconds: the wait is within a second of the hour.
	got := retryAfter(time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
	if got <= time.Hour-2*time.Second || got > time.Hour {
		t.Fatalf("Retry-After an hour from now is a wait of %s", got)
	}
	if got := retryAfter("Sun, 06 Nov 1994 08:49:37 GMT"); got != 0 {
		t.Fatalf("Retry-After a past date is a wait of %s", got)
	}
}

// A long error message is cut at a character's boundary.
func TestLongMessageIsCutBetweenCharacters(t *testing.T) {
	c := newCollector(t)
	c.answer = func(_ int, w http.ResponseWriter) {
		http.Error(w, strings.Repeat("a", 299)+strings.Repeat("é", 100), http.StatusBadRequest)
	}
	err := export(exporter(t, collectorEnv(ProtocolHTTP, c.serve().URL)), span(t))
	if err == nil || !utf8.ValidString(err.Error()) || !strings.HasSuffix(err.Error(), strings.Repeat("a", 299)+"…") {
		t.Fatalf("error %q, want the message cut before the é it would split", err)
	}
}

// gRPC answers of something else than grpc-go: a proxy's, or a server's
// written by hand. n counts attempts from 1.
func TestGRPCAnswersNotFromGRPCGo(t *testing.T) {
	cases := map[string]struct {
		answer   func(n int, w http.ResponseWriter)
		want     string // in the error; "" for success
		attempts int
		waits    time.Duration // at least
	}{
		"503 with a gRPC status": {answer: func(_ int, w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Grpc-Status", "3")
			w.Header().Set("Grpc-Message", "spans%20too%20old")
			w.WriteHeader(http.StatusServiceUnavailable)
		}, want: "gRPC status 3: spans too old", attempts: 1},
		"message not percent-encoded": {answer: func(_ int, w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Grpc-Status", "3")
			w.Header().Set("Grpc-Message", "50%zz off")
		}, want: "gRPC status 3: 50%zz off", attempts: 1},
		"long message": {answer: func(_ int, w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Grpc-Status", "3")
			w.Header().Set("Grpc-Message", url.PathEscape(strings.Repeat("a", 299)+strings.Repeat("é", 100)))
		}, want: "gRPC status 3: " + strings.Repeat("a", 299) + "…", attempts: 1},
		"403 with grpc-status 0": {answer: func(_ int, w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Grpc-Status", "0")
			w.WriteHeader(http.StatusForbidden)
		}, want: "answered HTTP 403 Forbidden (gRPC status 7): Forbidden", attempts: 1},
		"proxy's 404": {answer: func(_ int, w http.ResponseWriter) {
			w.WriteHeader(http.StatusNotFound)
		}, want: "answered HTTP 404 Not Found (gRPC status 12): Not Found", attempts: 1},
		"proxy's Retry-After": {answer: func(n int, w http.ResponseWriter) {
			if n == 1 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Grpc-Status", "0")
		}, attempts: 2, waits: time.Second},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var attempts atomic.Int32
			srv := serveClearText(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				tc.answer(int(attempts.Add(1)), w)
			}))
			started := time.Now()
			err := export(exporter(t, collectorEnv(ProtocolGRPC, srv.URL)), span(t))
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if n := int(attempts.Load()); n != tc.attempts {
				t.Fatalf("%d attempts, want %d", n, tc.attempts)
			}
			if waited := time.Since(started); waited < tc.waits {
				t.Fatalf("done after %s, before the %s asked for", waited, tc.waits)
			}
		})
	}
}

// grpc-timeout has at most 8 digits, whatever the timeout.
func TestGRPCTimeoutHeader(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                       "1m",
		1500 * time.Millisecond: "1500m",
		1e8 * time.Millisecond:  "100000S",
		math.MaxInt64:           "2562047H",
	} {
		if got := grpcTimeout(d); got != want {
			t.Errorf("grpc-timeout of %s is %q, want %q", d, got, want)
		}
	}
}

// The errors of an export show the collector's URL without its user, query
// or fragment, which may hold secrets (url.Redacted hides only a
// password): in a collector's refusal, a redirect's target, and a failed
// connection (whose *url.Error prints the URL again).
func TestExportErrorsHideURLSecrets(t *testing.T) {
	const secrets, query = "tok3n@", "?api_key=s3cret#fr4gment"
	withSecrets := func(u string) string { return strings.Replace(u, "://", "://"+secrets, 1) + "/" + query }
	refusing := serveClearText(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusBadRequest)
	}))
	moved := serveClearText(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, refusing.URL+"/elsewhere"+query, http.StatusFound)
	}))
	closed := serveClearText(t, http.NotFoundHandler())
	closed.Close()
	for name, tc := range map[string]struct{ url, want string }{
		"refused":    {refusing.URL, "answered 400 Bad Request"},
		"redirected": {moved.URL, "a redirect to " + refusing.URL + "/elsewhere,"},
		"no answer":  {closed.URL, "while exporting spans to " + closed.URL + "/: "},
	} {
		t.Run(name, func(t *testing.T) {
			env := collectorEnv(ProtocolHTTP, "", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", withSecrets(tc.url))
			err := export(exporter(t, env), span(t))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			for _, secret := range []string{"tok3n", "s3cret", "fr4gment"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error %q shows %q", err, secret)
				}
			}
		})
	}
}

// A RetryInfo's delay too long for a time.Duration is the longest one (not
// waited for), rather than a product wrapped to a short or negative wait.
func TestRetryInfoDelayDoesNotOverflow(t *testing.T) {
	maxSeconds := int64(math.MaxInt64 / time.Second)
	for _, tc := range []struct {
		delay *durationpb.Duration
		want  time.Duration
	}{
		{&durationpb.Duration{Seconds: 1, Nanos: 5e8}, 1500 * time.Millisecond},
		{&durationpb.Duration{Seconds: 1 << 62}, math.MaxInt64},
		{&durationpb.Duration{Seconds: math.MaxInt64}, math.MaxInt64},
		{&durationpb.Duration{Seconds: maxSeconds, Nanos: 999_999_999}, math.MaxInt64},
		{&durationpb.Duration{Seconds: maxSeconds - 1, Nanos: 999_999_999}, time.Duration(maxSeconds)*time.Second - 1},
		{&durationpb.Duration{Seconds: -5}, 0},
	} {
		st, err := status.New(grpccodes.Unavailable, "later").WithDetails(&errdetails.RetryInfo{RetryDelay: tc.delay})
		if err != nil {
			t.Fatal(err)
		}
		b, err := proto.Marshal(st.Proto())
		if err != nil {
			t.Fatal(err)
		}
		if message, got := rpcStatus(b); got != tc.want || message != "later" {
			t.Errorf("a RetryInfo of %v is a delay of %s (message %q), want %s", tc.delay, got, message, tc.want)
		}
	}
}
