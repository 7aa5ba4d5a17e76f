package output

import "regexp"

// spoofedMarker matches what a reader could take for a provenance marker,
// "[mcp:" (any case, spaces allowed around "mcp"), anywhere in a server's
// text.
var spoofedMarker = regexp.MustCompile(`(?i)\[\s*mcp\s*:`)

// EscapeMarkers makes a server's text unable to claim another source: the
// marker the bridge puts before an item says which server and tool wrote
// it, and a server could otherwise write "\n[mcp:other:tool] ..." so that
// a later line looks like another server's. Each look-alike gets a
// backslash before its colon ("[mcp\:other:tool]"), so the only "[mcp:"
// in an item is the bridge's own at its start.
func EscapeMarkers(text string) string {
	if !spoofedMarker.MatchString(text) {
		return text
	}
	return spoofedMarker.ReplaceAllStringFunc(text, func(m string) string {
		return m[:len(m)-1] + `\:`
	})
}
