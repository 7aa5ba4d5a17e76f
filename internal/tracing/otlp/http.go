package otlp

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/textcut"
)

// maxResponse bounds what is read of a collector's answer: a partial
// success or an error's status is a few hundred bytes.
const maxResponse = 64 << 10

// maxMessage bounds, in bytes, a collector's message quoted in an error.
const maxMessage = 300

// httpSender posts an export in OTLP/HTTP: the request's protobuf as the
// body of a POST.
type httpSender struct {
	client  *http.Client
	url     *url.URL
	headers http.Header
	gzip    bool
}

func (h *httpSender) send(ctx context.Context, body []byte) error {
	header := http.Header{"Content-Type": {"application/x-protobuf"}}
	if h.gzip {
		header.Set("Content-Encoding", "gzip")
	}
	resp, answer, err := post(ctx, h.client, h.url, body, h.headers, header)
	if err != nil {
		return err
	}
	protobuf := strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-protobuf")
	if resp.StatusCode/100 == 2 {
		if !protobuf {
			return nil
		}
		if err := partialSuccess(answer); err != nil {
			return &partialError{err}
		}
		return nil
	}
	message := strings.TrimSpace(string(answer))
	if protobuf {
		message, _ = rpcStatus(answer)
	}
	message = cmp.Or(redirected(resp), textcut.Cut(message, maxMessage))
	err = fmt.Errorf("the OTLP collector at %s answered %s: %s", safeURL(h.url), resp.Status, message)
	// The specification's retryable statuses are those gRPC reads as
	// Unavailable (429, 502, 503, 504).
	if httpStatusCode(resp.StatusCode) == codeUnavailable {
		return &retryable{err: err, after: retryAfter(resp.Header.Get("Retry-After"))}
	}
	return err
}

// redirected says that resp is a redirect, which the exporter does not
// follow; "" for any other answer.
func redirected(resp *http.Response) string {
	if resp.StatusCode/100 != 3 {
		return ""
	}
	to := ""
	if loc, err := resp.Location(); err == nil {
		to = " to " + safeURL(loc)
	}
	return "a redirect" + to + ", which the exporter does not follow: configure the collector's own URL"
}

// safeURL is u as errors show it: scheme, host and path. Its user (a
// token, often), password, query (an api_key=…) and fragment may be
// secrets, which url.Redacted would keep but for the password. Stricter
// than safeurl.Of, which keeps the query's keys: a collector's endpoint is
// told by its host and path alone.
func safeURL(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// post sends body to target with the configured headers and header, and
// reads the answer (its body up to maxResponse, then its trailers). No
// answer is a retryable failure: the specification says to send the same
// request again.
func post(ctx context.Context, client *http.Client, target *url.URL, body []byte, configured, header http.Header) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("while making the OTLP request: %w", err)
	}
	maps.Copy(req.Header, configured)
	maps.Copy(req.Header, header)
	resp, err := client.Do(req)
	if err != nil {
		// A *url.Error prints the whole URL again, query included.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, nil, &retryable{err: fmt.Errorf("while exporting spans to %s: %w", safeURL(target), err)}
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, nil, &retryable{err: fmt.Errorf("while reading the answer of %s: %w", safeURL(target), err)}
	}
	return resp, answer, nil
}

// retryAfter is the wait a Retry-After header asks for, in seconds or until
// a date; 0 without one. A wait too long for a time.Duration is the longest
// one (longer than any export's timeout: the exporter gives up).
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); (err == nil || errors.Is(err, strconv.ErrRange)) && s > 0 {
		return scaled(s, time.Second)
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
