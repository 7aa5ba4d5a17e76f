package output

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/mcp-operator/mcp-operator/internal/mcp/injection"
	"github.com/mcp-operator/mcp-operator/internal/mcp/invisible"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
	"github.com/mcp-operator/mcp-operator/internal/redact"
	"github.com/mcp-operator/mcp-operator/internal/textcut"
)

// InvisiblePattern is the finding of invisible characters removed from a
// result; a rule that blocks on findings withholds such results too.
const InvisiblePattern = "invisible-characters"

// stripInvisible removes invisible characters (package invisible) from every
// string of doc, keys included, before anything else looks at it: a secret
// split by a zero-width space must be whole when it is redacted, and what
// the agent gets is what was scanned. Each string that held some gives a
// finding, and the text hidden in tag characters is scanned like any text
// (its own findings, "<where> (hidden text)"); the excerpt shows it
// redacted. doc comes back as it is when there is nothing to remove.
func stripInvisible(doc []byte, r *redact.Redactor, sum *Summary) ([]byte, error) {
	if !mayHoldInvisible(doc) {
		return doc, nil
	}
	return rawjson.RewriteStrings(doc, func(s, key string, isKey bool) (string, bool) {
		clean, found := invisible.Strip(s)
		if found.Removed == 0 {
			return s, false
		}
		where := key
		if isKey || where == "" {
			where = "key"
		}
		recordInvisible(sum, where, found, r)
		return clean, true
	})
}

// mayHoldInvisible says, in one pass, whether doc may hold an invisible
// character: as UTF-8 (see invisible) or as a JSON escape (\u200b).
func mayHoldInvisible(doc []byte) bool {
	for i, b := range doc {
		switch b {
		case 0xC2, 0xD8, 0xE2, 0xEF, 0xF3:
			return true
		case '\\':
			if i+1 < len(doc) && doc[i+1] == 'u' {
				return true
			}
		}
	}
	return false
}

// recordInvisible adds the finding of what Strip removed from the text at
// where, and the findings of the text hidden in tag characters, redacted.
func recordInvisible(sum *Summary, where string, f invisible.Found, r *redact.Redactor) {
	excerpt := "removed " + strconv.Itoa(f.Removed) + " invisible characters"
	hidden := r.String(f.Hidden, &sum.Redactions)
	if hidden != "" {
		excerpt += fmt.Sprintf(", hidden text %q", textcut.Cut(hidden, 60))
	}
	sum.Findings = appendFinding(sum.Findings, injection.Finding{Pattern: InvisiblePattern, Where: where, Excerpt: excerpt})
	if hidden != "" {
		sum.Findings = appendFindings(sum.Findings, where+" (hidden text)", hidden)
	}
}

func appendFinding(fs []injection.Finding, f injection.Finding) []injection.Finding {
	if len(fs) >= maxFindings {
		return fs
	}
	return append(fs, f)
}

// Text runs one text a server sent outside a result (a JSON-RPC error's
// message, a log or progress message, a listing's description) through the
// same stages as a result's text: invisible characters removed, secrets
// redacted, marker look-alikes escaped (an error message could otherwise
// carry another server's marker), injection scanned. where names it in
// findings.
func Text(r *redact.Redactor, where, s string) (string, Summary) {
	if r == nil {
		r = redact.Shapes()
	}
	var sum Summary
	clean, found := invisible.Strip(s)
	if found.Removed > 0 {
		recordInvisible(&sum, where, found, r)
	}
	out := EscapeMarkers(r.String(clean, &sum.Redactions))
	sum.Findings = appendFindings(sum.Findings, where, out)
	sum.SizeIn, sum.SizeOut = len(s), len(out)
	return out, sum
}

// JSON runs a JSON document a server sent outside a result (a JSON-RPC
// error's data, a notification's params, a listing, a completion result)
// through the same stages: invisible characters removed, secrets redacted
// and marker look-alikes escaped in every string, every string scanned.
// Invalid JSON is an error.
func JSON(r *redact.Redactor, where string, doc []byte) ([]byte, Summary, error) {
	if r == nil {
		r = redact.Shapes()
	}
	sum := Summary{SizeIn: len(doc)}
	if !json.Valid(doc) {
		return nil, sum, fmt.Errorf("%s is not valid JSON", where)
	}
	clean, err := stripInvisible(doc, r, &sum)
	if err != nil {
		return nil, sum, fmt.Errorf("while reading %s: %w", where, err)
	}
	out, err := r.JSON(clean, &sum.Redactions)
	if err != nil {
		return nil, sum, err
	}
	if out, err = EscapeMarkersJSON(out); err != nil {
		return nil, sum, err
	}
	scanStrings(&sum, where, out)
	sum.SizeOut = len(out)
	return out, sum, nil
}

// Artifact runs a stored artifact, read back by its owner, through the
// scan a result's text gets: artifacts are stored redacted and without
// invisible characters, but the preview was all that was scanned when the
// result was capped, so with c.Block a finding in the whole text withholds
// it (ErrBlocked), as it would have withheld the result.
func Artifact(c Call, data []byte) ([]byte, Summary, error) {
	out, sum, err := JSON(c.Redactor, "artifact", data)
	if err != nil {
		return nil, sum, err
	}
	if c.Block && len(sum.Findings) > 0 {
		sum.Blocked = true
		return nil, sum, blockedError(sum.Findings)
	}
	return out, sum, nil
}
