package redact

import "strings"

// shapes are the credential shapes every Redactor knows beside the bare
// token formats (bare.go): those found by a name before them or by a
// structure of their own. Each starts with a literal; its match function
// checks the rest by hand (no regexps: this runs over every byte of every
// result).
var shapes = []trigger{
	// AWS secret keys have no prefix of their own: the variable or field
	// name before them is the literal (AWS_SECRET_ACCESS_KEY=…,
	// aws_secret_access_key = …, "SecretAccessKey": "…").
	{lit: "secret_access_key", fold: true, kind: AWSSecretAccessKey, match: afterName(isAWSSecretByte, 16)},
	{lit: "secretaccesskey", fold: true, kind: AWSSecretAccessKey, match: afterName(isAWSSecretByte, 16)},
	// JWTs: base64url of a JSON header ({" encodes as eyJ), a payload and a
	// signature, joined by dots.
	{lit: "eyJ", kind: JWT, match: jwt},
	// PEM private keys, from the BEGIN line to the END line (or the end of
	// the text when it was cut).
	{lit: "-----BEGIN", kind: PrivateKey, match: pemPrivateKey},
	// Bearer credentials: "Authorization: Bearer …", "bearer <token>".
	{lit: "bearer", fold: true, kind: Bearer, match: bearer},
	// Any other Authorization header value: "Authorization: Basic …",
	// "authorization: token …".
	{lit: "authorization", fold: true, kind: AuthorizationHeader, match: authorization},
	// The password of a URL's user: postgres://app:<password>@db:5432/app,
	// https://user:<password>@host/.
	{lit: "://", kind: URLPassword, match: urlPassword},
	// The keys and passwords of cloud connection strings (Azure storage,
	// Service Bus and Event Hubs, SQL Server and other ADO.NET drivers):
	// "AccountKey=…;", "SharedAccessKey=…", "Password=…;".
	{lit: "accountkey=", fold: true, kind: ConnectionStringKey, match: connectionValue(false)},
	{lit: "sharedaccesskey=", fold: true, kind: ConnectionStringKey, match: connectionValue(false)},
	{lit: "sharedaccesssignature=", fold: true, kind: ConnectionStringKey, match: connectionValue(false)},
	{lit: "password=", fold: true, kind: ConnectionStringKey, match: connectionValue(true)},
	{lit: "pwd=", fold: true, kind: ConnectionStringKey, match: connectionValue(true)},
	// A value with a high entropy assigned to a name that says it is a
	// secret, in every form a result writes one: PASSWORD=…, password: …,
	// "api_key": "…", X-Api-Key: …, SERVICE_TOKEN=…. gitleaks' generic rule
	// takes values of word bytes only; these take any but blanks and quotes.
	{lit: "password", fold: true, kind: AssignedSecret, match: assignedSecret},
	{lit: "passwd", fold: true, kind: AssignedSecret, match: assignedSecret},
	{lit: "secret", fold: true, kind: AssignedSecret, match: assignedSecret},
	{lit: "token", fold: true, kind: AssignedSecret, match: assignedSecret},
	{lit: "api_key", fold: true, kind: AssignedSecret, match: assignedSecret},
	{lit: "api-key", fold: true, kind: AssignedSecret, match: assignedSecret},
	{lit: "apikey", fold: true, kind: AssignedSecret, match: assignedSecret},
}

// assignedSecretEntropy is the least entropy, in bits a byte, of a value
// assignedSecret takes: "hunter2" or "changeme" stay, "p4ss-W0rd!x" goes.
const assignedSecretEntropy = 3.0

func isValueByte(b byte) bool {
	return b > ' ' && b != '"' && b != '\'' && b != '`' && b != ',' && b != ';'
}

func assignedSecret(s string, at int) (int, int, bool) {
	start, end, ok := afterName(isValueByte, 8)(s, at)
	if !ok || shannon(s[start:end]) < assignedSecretEntropy || isCode(s[start:end]) {
		return 0, 0, false
	}
	return start, end, true
}

// urlPassword redacts the password of a URL's userinfo (RFC 3986
// "scheme://user:password@host"): the bytes between the first ':' after
// "://" and the '@' that ends the authority's userinfo.
func urlPassword(s string, at int) (int, int, bool) {
	scheme := at
	for scheme > 0 && (isAlnum(s[scheme-1]) || strings.IndexByte("+.-", s[scheme-1]) >= 0) {
		scheme--
	}
	if at-scheme < 2 {
		return 0, 0, false
	}
	from := at + len("://")
	colon, end := -1, from
	for ; end < len(s) && end-from < 512; end++ {
		c := s[end]
		if c == '@' {
			break
		}
		if c == '/' || c == '?' || c == '#' || c <= ' ' || c == '"' || c == '\'' || c == '<' || c == '>' || c == '`' {
			return 0, 0, false
		}
		if c == ':' && colon < 0 {
			colon = end
		}
	}
	if end == len(s) || s[end] != '@' || colon < 0 || end-colon < 2 || isPlaceholder(s[colon+1:end]) {
		return 0, 0, false
	}
	return colon + 1, end, true
}

// connectionValue redacts the value after a connection string's key, up to
// the ';' that ends it (or a quote or blank). A password ("Password=") is
// only taken for one when a ';' ends it, as in a connection string: in
// prose or a shell line it is left to the other rules.
func connectionValue(needsSemicolon bool) func(string, int) (int, int, bool) {
	return func(s string, at int) (int, int, bool) {
		if at > 0 && isAlnum(s[at-1]) {
			return 0, 0, false // "UserPassword=", "SomeAccountKey="
		}
		from := at
		for from < len(s) && s[from] != '=' {
			from++
		}
		from++
		end := from
		for end < len(s) && end-from < maxValueLen && s[end] != ';' && s[end] != '"' && s[end] != '\'' && s[end] > ' ' {
			end++
		}
		if end == from || end-from == maxValueLen || needsSemicolon && (end == len(s) || s[end] != ';') {
			return 0, 0, false
		}
		return from, end, true
	}
}

func isAlnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}
func isWordByte(b byte) bool      { return isAlnum(b) || b == '_' }
func isKeyByte(b byte) bool       { return isAlnum(b) || b == '_' || b == '-' }
func isSlackByte(b byte) bool     { return isAlnum(b) || b == '-' }
func isB64URLByte(b byte) bool    { return isAlnum(b) || b == '_' || b == '-' }
func isAWSSecretByte(b byte) bool { return isAlnum(b) || b == '/' || b == '+' || b == '=' }
func isUpperOrDigit(b byte) bool  { return b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' }

// tokenByte is what a bearer credential is made of (RFC 6750's b64token).
func isTokenByte(b byte) bool {
	return isAlnum(b) || b == '-' || b == '.' || b == '_' || b == '~' || b == '+' || b == '/' || b == '='
}

// startsWord says whether s[at] begins a token: nothing alphanumeric before
// it. Without it "task-" + 20 letters would read as an sk- key.
func startsWord(s string, at int) bool { return at == 0 || !isAlnum(s[at-1]) }

// run returns where the run of bytes accepted by ok that starts at i ends.
func run(s string, i int, ok func(byte) bool) int {
	for i < len(s) && ok(s[i]) {
		i++
	}
	return i
}

// separators returns where the separators between a name and its value
// that start at s[i] end ("=", ": ", `": "`, " = "), or i when there are
// none. Without a ':' or '=' the name is prose ("the authorization server
// issues tokens"), not a field.
func separators(s string, i int) int {
	j := i
	for j < len(s) && j-i < 6 && strings.IndexByte(" \t\"':=", s[j]) >= 0 {
		j++
	}
	if !strings.ContainsAny(s[i:j], ":=") {
		return i
	}
	return j
}

// A name is at most maxNameLen bytes from its secret word on, a value
// after it at most maxValueLen: longer runs are text or data, not a field,
// and bounding them keeps a text that repeats a secret word ("password"
// 40,000 times) from costing the square of its length.
const (
	maxNameLen  = 64
	maxValueLen = 1024
)

// afterName matches a value after a variable or field name (the literal,
// possibly the tail of a longer name such as AWS_SECRET_ACCESS_KEY): up to a
// few separators (quotes, spaces, ':' or '='), then at least minLen value
// bytes. Only the value is redacted.
func afterName(value func(byte) bool, minLen int) func(string, int) (int, int, bool) {
	return func(s string, at int) (int, int, bool) {
		i := run(s[:min(len(s), at+maxNameLen)], at, isWordByte)
		from := i
		i = separators(s, i)
		if i == from {
			return 0, 0, false
		}
		end := run(s[:min(len(s), i+maxValueLen)], i, value)
		if end-i < minLen || end-i == maxValueLen {
			return 0, 0, false
		}
		return i, end, true
	}
}

func jwt(s string, at int) (int, int, bool) {
	if at > 0 && isB64URLByte(s[at-1]) {
		return 0, 0, false
	}
	header := run(s, at, isB64URLByte)
	if header-at < 10 || header >= len(s) || s[header] != '.' {
		return 0, 0, false
	}
	payload := run(s, header+1, isB64URLByte)
	if payload-(header+1) < 10 {
		return 0, 0, false
	}
	if payload < len(s) && s[payload] == '.' {
		return at, run(s, payload+1, isB64URLByte), true
	}
	return 0, 0, false
}

// pemPrivateKey matches a PEM private key from "-----BEGIN" to its END
// line, with the label's words apart by spaces or, in a URL's query, by "+"
// or "%20".
func pemPrivateKey(s string, at int) (int, int, bool) {
	labelStart := at + len("-----BEGIN")
	var sep string
	for _, sp := range []string{" ", "+", "%20"} {
		if strings.HasPrefix(s[labelStart:], sp) {
			sep = sp
			break
		}
	}
	if sep == "" {
		return 0, 0, false
	}
	labelEnd := strings.Index(s[labelStart:], "-----")
	if labelEnd < 0 || labelEnd > 64 {
		return 0, 0, false
	}
	if !strings.Contains(s[labelStart:labelStart+labelEnd], "PRIVATE"+sep+"KEY") {
		return 0, 0, false
	}
	rest := labelStart + labelEnd + len("-----")
	endLine := strings.Index(s[rest:], "-----END"+sep)
	if endLine < 0 {
		return at, len(s), true // cut short: redact to the end
	}
	closing := rest + endLine + len("-----END") + len(sep)
	if j := strings.Index(s[closing:], "-----"); j >= 0 && j <= 64 {
		return at, closing + j + len("-----"), true
	}
	return at, len(s), true
}

// bearer redacts the credential after "bearer". After "Authorization:" any
// credential is redacted; in free text it must look like one (8 or more
// token bytes with a digit, or 20 or more), so that "the bearer of bad news"
// or "bearer instrument" stay as they are.
func bearer(s string, at int) (int, int, bool) {
	if !startsWord(s, at) {
		return 0, 0, false
	}
	i := at + len("bearer")
	spaces := run(s, i, func(b byte) bool { return b == ' ' || b == '\t' })
	if spaces == i {
		return 0, 0, false
	}
	end := run(s, spaces, isTokenByte)
	n := end - spaces
	if n == 0 {
		return 0, 0, false
	}
	if afterAuthorization(s, at) || n >= 20 || n >= 8 && strings.ContainsAny(s[spaces:end], "0123456789") {
		return spaces, end, true
	}
	return 0, 0, false
}

// afterAuthorization says whether s[:at] ends with an "Authorization:"
// header name (or a JSON/YAML field of that name) and separators.
func afterAuthorization(s string, at int) bool {
	i := at
	for i > 0 && strings.IndexByte(" \t\"':=", s[i-1]) >= 0 && at-i < 6 {
		i--
	}
	const name = "authorization"
	return i >= len(name) && strings.EqualFold(s[i-len(name):i], name)
}

// authorization redacts the value of an Authorization header with a scheme
// other than Bearer (which bearer handles): "Authorization: Basic dXNlcjpw".
func authorization(s string, at int) (int, int, bool) {
	i := at + len("authorization")
	seps := separators(s, i)
	if seps == i {
		return 0, 0, false
	}
	scheme := run(s, seps, isAlnum)
	if scheme == seps || strings.EqualFold(s[seps:scheme], "bearer") {
		return 0, 0, false
	}
	cred := run(s, scheme, func(b byte) bool { return b == ' ' })
	if cred == scheme {
		return 0, 0, false
	}
	end := run(s, cred, isTokenByte)
	if end == cred {
		return 0, 0, false
	}
	return cred, end, true
}
