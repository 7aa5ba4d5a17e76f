// Package safeurl shows URLs in errors and logs without the secrets they may
// carry. A remote MCP server's URL, a webhook's or a collector's can hold a
// credential in its userinfo (user:token@) or its query (?token=…,
// ?api_key=…), and an error that names the URL goes on to an agent, the
// audit stream, a log line, an Event or a status condition. net/http's
// *url.Error names the URL too (with only a password hidden), so errors from
// an http.Client go through Error.
package safeurl

import (
	"net/url"
	"strings"
)

// Hidden stands for what String leaves out.
const Hidden = "REDACTED"

// String is raw as an error may show it: the userinfo is Hidden, each query
// value (a query part without "=", a bare value, entirely) is Hidden, and
// the fragment is dropped; the scheme, host, port, path and query keys stay,
// to say which server and endpoint is meant. A raw URL that does not parse
// shows nothing of itself: where its secret would be cannot be told.
func String(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return Of(u)
}

// Of is String of a parsed URL.
func Of(u *url.URL) string {
	safe := &url.URL{Scheme: u.Scheme, Opaque: u.Opaque, Host: u.Host, Path: u.Path, RawPath: u.RawPath, RawQuery: hiddenValues(u.RawQuery)}
	if u.User != nil {
		safe.User = url.User(Hidden)
	}
	if u.Opaque != "" {
		// "scheme:opaque" (no "//"): the opaque part may hold anything.
		safe.Opaque = Hidden
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
// *url.Error names shown as String shows it. Call it on the error as it
// came, before fmt.Errorf wraps it: a wrapper's text is made at once, with
// the URL in it. Any other error is err.
func Error(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return &url.Error{Op: ue.Op, URL: String(ue.URL), Err: ue.Err}
	}
	return err
}
