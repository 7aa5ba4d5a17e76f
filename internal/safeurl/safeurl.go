// Package safeurl shows URLs in errors and logs without the secrets they may
// carry. A remote MCP server's URL, a webhook's or a collector's can hold a
// credential in its userinfo (user:token@) or its query (?token=…,
// ?api_key=…), and an error that names the URL goes on to an agent, the
// audit stream, a log line, an Event or a status condition. net/http's
// *url.Error names the URL too (with only a password hidden), so errors from
// an http.Client go through Error.
//
// A secret in the URL's path is not hidden: the path says which endpoint
// is meant, and where a key sits in it cannot be told. Hosted MCP services
// that put a key in the path (https://host/<key>/mcp) show it; such a key
// belongs in a Secret header or a bearer token instead.
package safeurl

import (
	"errors"
	"net/url"
	"strings"
)

// Hidden stands for what String leaves out.
const Hidden = "REDACTED"

// NotAURL is what String shows of a raw URL that does not parse, or has no
// scheme or host: where its secret would be cannot be told. Without "//",
// "s3cret@hooks.example/hook" is all path and "alice:pa55word@h/mcp" the
// scheme "alice" with the rest opaque.
const NotAURL = "(not an absolute URL: not shown)"

// errNotAURL stands for the error url.Parse gave, whose text may quote part
// of the URL (`invalid port ":ab" after host`, a password's piece).
var errNotAURL = errors.New("not a valid URL")

// String is raw as an error may show it: the userinfo is Hidden, each query
// value (a query part without "=", a bare value, entirely) is Hidden, and
// the fragment is dropped; the scheme, host, port, path and query keys stay,
// to say which server and endpoint is meant. A raw URL that does not parse,
// or has no scheme or host, is NotAURL.
func String(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return NotAURL
	}
	return Of(u)
}

// Of is String of a parsed URL.
func Of(u *url.URL) string {
	if u.Scheme == "" || u.Host == "" {
		// Also "scheme:opaque" (no "//"), whose scheme may be a user.
		return NotAURL
	}
	safe := &url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath, RawQuery: hiddenValues(u.RawQuery)}
	if u.User != nil {
		safe.User = url.User(Hidden)
	}
	if u.ForceQuery && safe.RawQuery == "" {
		safe.ForceQuery = true
	}
	return safe.String()
}

// hiddenValues is a raw query with each value Hidden, keys in their order.
func hiddenValues(rawQuery string) string {
	if rawQuery == "" {
		return ""
	}
	parts := strings.Split(rawQuery, "&")
	for i, p := range parts {
		switch key, _, hasValue := strings.Cut(p, "="); {
		case hasValue:
			parts[i] = key + "=" + Hidden
		case p != "":
			parts[i] = Hidden
		}
	}
	return strings.Join(parts, "&")
}

// Error is err, an http.Client's (or url.Parse's) error, with the URL a
// *url.Error names shown as String shows it; a parse failure's own error
// (http.NewRequest's too) becomes errNotAURL, since it may quote the URL.
// Call it on the error as it came, before fmt.Errorf wraps it: a wrapper's
// text is made at once, with the URL in it. Any other error is err.
func Error(err error) error {
	ue, ok := err.(*url.Error)
	if !ok {
		return err
	}
	inner := ue.Err
	if ue.Op == "parse" {
		inner = errNotAURL
	}
	return &url.Error{Op: ue.Op, URL: String(ue.URL), Err: inner}
}
