package redact

import "strings"

// isCode says whether a value after a secret's name is a piece of program
// or documentation rather than a secret, as in source code a server prints.
// Only whole shapes count: a call ("os.Getenv(key)"), a composite literal
// ("&Token{"), a generic type ("z.ZodOptional<z.ZodString>"), a reference
// to a variable ("$AWS_SECRET", "${DB_PASSWORD}"), a placeholder
// ("<string>", "changeme"), a URL (a token endpoint), a path, a URN, a
// format verb, a comparison, roff markup, a selector of names
// ("opts.ClientSecret") or a name ("passwordPath", "AZURE_TOKEN_CREDENTIALS").
// A value holding a generated segment (letters mixed with digits, or a long
// run of random letters) is never code, whatever syntax surrounds it: a
// brace or a '$' inside a password does not make it a program.
func isCode(v string) bool {
	if v == "" || hasGeneratedSegment(v) {
		return false
	}
	v = strings.TrimSuffix(v, ".") // the end of a sentence
	if isCall(v) || isCompositeLiteral(v) || isGeneric(v) || isReference(v) || isPlaceholder(v) ||
		isURL(v) || isPath(v) || strings.HasPrefix(v, "urn:") {
		return true
	}
	for _, syntax := range []string{"%v", "%s", "?.", "==", `\f`, `\-`} {
		if strings.Contains(v, syntax) {
			return true
		}
	}
	if len(v) > 1 && (v[0] == '&' || v[0] == '*') {
		return isCode(v[1:]) // taking an address or dereferencing a pointer
	}
	if namesASecret(v) {
		return true
	}
	if strings.ContainsAny(v, "0123456789") {
		return false
	}
	parts := strings.Split(v, ".")
	for _, p := range parts {
		if p == "" || run(p, 0, isWordByte) != len(p) {
			return len(parts) == 1 && isName(v)
		}
	}
	return len(parts) > 1 || isName(v)
}

// hasGeneratedSegment says whether a run of letters and digits in v reads
// as generated rather than written: letters with two runs of digits or more
// ("pQ4mLw2Tr8", "3f9a8b7c"; "ec2", "oauth2" and "Sum256" have one), or 20
// letters or more of a high entropy.
func hasGeneratedSegment(v string) bool {
	for i := 0; i < len(v); {
		if !isAlnum(v[i]) {
			i++
			continue
		}
		j := run(v, i, isAlnum)
		if generated(v[i:j]) {
			return true
		}
		i = j
	}
	return false
}

func generated(seg string) bool {
	letters, digitRuns := false, 0
	for i := 0; i < len(seg); i++ {
		if isDigit(seg[i]) {
			if i == 0 || !isDigit(seg[i-1]) {
				digitRuns++
			}
		} else {
			letters = true
		}
	}
	if letters && digitRuns >= 2 {
		return true
	}
	return digitRuns == 0 && len(seg) >= 20 && shannon(seg) >= 4
}

// highEntropyMix says whether a body (a call's arguments, a literal's
// fields) mixes letters and digits with a high entropy: a secret, not code.
func highEntropyMix(body string) bool {
	return strings.ContainsAny(body, "0123456789") &&
		strings.ContainsAny(strings.ToLower(body), "abcdefghijklmnopqrstuvwxyz") &&
		shannon(body) >= assignedSecretEntropy
}

// qualifiedName returns where a Go or JavaScript name, possibly qualified
// ("os.Getenv", "z.ZodOptional"), that starts at v[0] ends, or 0 when none does.
func qualifiedName(v string) int {
	if v == "" || !(v[0] == '_' || v[0] >= 'a' && v[0] <= 'z' || v[0] >= 'A' && v[0] <= 'Z') {
		return 0
	}
	return run(v, 1, func(b byte) bool { return isWordByte(b) || b == '.' })
}

// isCall says whether v is a whole call: a name, "(", arguments, ")".
func isCall(v string) bool {
	n := qualifiedName(v)
	return n > 0 && n < len(v) && v[n] == '(' && strings.HasSuffix(v, ")") && !highEntropyMix(v[n+1:len(v)-1])
}

// isGeneric says whether v is a whole generic type: a name, "<", type
// arguments, ">".
func isGeneric(v string) bool {
	n := qualifiedName(v)
	return n > 0 && n < len(v) && v[n] == '<' && strings.HasSuffix(v, ">") && !highEntropyMix(v[n+1:len(v)-1])
}

// isCompositeLiteral says whether v opens a composite literal: "&Token{",
// "Config{Name:" — a capitalised type name without digits, then "{".
func isCompositeLiteral(v string) bool {
	v = strings.TrimPrefix(v, "&")
	if v == "" || v[0] < 'A' || v[0] > 'Z' {
		return false
	}
	n := run(v, 1, func(b byte) bool { return isWordByte(b) && !isDigit(b) })
	return n < len(v) && v[n] == '{' && !highEntropyMix(strings.TrimSuffix(v[n+1:], "}"))
}

// isReference says whether v is a whole reference to a variable in a shell,
// a template or a manifest: "$NAME", "${NAME}", "$(NAME)", "$(cat file)".
func isReference(v string) bool {
	if len(v) < 2 || v[0] != '$' {
		return false
	}
	body := v[1:]
	for _, pair := range []string{"{}", "()"} {
		if len(body) > 2 && body[0] == pair[0] && body[len(body)-1] == pair[1] {
			return !highEntropyMix(body[1 : len(body)-1])
		}
	}
	return run(body, 0, isWordByte) == len(body) && !highEntropyMix(body) && (body == strings.ToUpper(body) || body == strings.ToLower(body))
}

// isURL says whether v starts with a URL's scheme ("https://").
func isURL(v string) bool {
	n := run(v, 0, func(b byte) bool { return isAlnum(b) || b == '+' || b == '.' || b == '-' })
	return n > 0 && strings.HasPrefix(v[n:], "://")
}

// isPath says whether v is a whole file path of name segments
// ("/var/run/secrets/token", "./token.txt", "~/.aws/credentials").
func isPath(v string) bool {
	rest := v
	for _, head := range []string{"~/", "./", "../", "/"} {
		if strings.HasPrefix(v, head) {
			rest = v[len(head):]
			break
		}
	}
	if rest == v {
		return false
	}
	return run(rest, 0, func(b byte) bool { return isWordByte(b) || b == '.' || b == '-' || b == '/' }) == len(rest)
}

// namesASecret says whether v is a name, a header or a path that says what
// it names ("X-aws-ec2-metadata-token", "o.CredentialSource.TokenURL",
// "service-accounts/default/token", "JwtTokenIssuedAt"): a secret word in
// name bytes joined by separators, or in camel case without digits
// ("mypassword123" and "SecretPass2024" are passwords, not names). A
// generated segment ("auth_3f9a8b7c6d5e", "prod_secret_<random>") makes it
// a credential with a prefix instead.
func namesASecret(v string) bool {
	if run(v, 0, func(b byte) bool { return isWordByte(b) || strings.IndexByte("-./:#", b) >= 0 }) != len(v) ||
		!strings.ContainsAny(v, "-./:#_") && (!camel(v) || strings.ContainsAny(v, "0123456789")) ||
		hasGeneratedSegment(v) {
		return false
	}
	lower := strings.ToLower(v)
	for _, w := range []string{"token", "secret", "passw", "credential", "auth"} {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}

// camel says whether a small letter is followed by a capital in v.
func camel(v string) bool {
	for i := 1; i < len(v); i++ {
		if v[i-1] >= 'a' && v[i-1] <= 'z' && v[i] >= 'A' && v[i] <= 'Z' {
			return true
		}
	}
	return false
}

// isName says whether v, of letters, "_", "-" and ":" alone, reads as a
// program's name: it holds "key", or it is written in snake, kebab or lower
// camel case ("UID:GID:user_name" lists field names).
func isName(v string) bool {
	if run(v, 0, func(b byte) bool { return isWordByte(b) || b == '-' || b == ':' }) != len(v) {
		return false
	}
	return strings.Contains(strings.ToLower(v), "key") || strings.ContainsAny(v, "_-") || v[0] >= 'a' && v[0] <= 'z' || isWords(v)
}

// isWords says whether v is capitalised words run together ("Optional",
// "NameAttribute"): each capital letter followed by two small ones or more.
func isWords(v string) bool {
	for i := 0; i < len(v); {
		if v[i] < 'A' || v[i] > 'Z' {
			return false
		}
		j := run(v, i+1, func(b byte) bool { return b >= 'a' && b <= 'z' })
		if j-i < 3 {
			return false
		}
		i = j
	}
	return true
}

// placeholders are the words documentation writes for a password
// ("postgres://user:password@host", "password: changeme").
var placeholders = map[string]bool{
	"password": true, "passwd": true, "pass": true, "pwd": true, "pw": true, "secret": true,
	"mypassword": true, "yourpassword": true, "changeme": true, "xxx": true, "xxxx": true,
	"xxxxx": true, "xxxxxx": true, "xxxxxxxx": true, "token": true,
}

// isPlaceholder says whether a password is documentation's: a placeholder
// word, bare or in a template's or markup's brackets ("<password>",
// "[:password]", roff's "\fIpassword\fR"), a mask ("****"), a reference to a
// variable ("${DB_PASSWORD}") or "<" words ">" ("<your-token>"). Only whole
// shapes: a bracket or a '$' inside a generated value leaves it a secret.
func isPlaceholder(v string) bool {
	if v == "" || hasGeneratedSegment(v) {
		return false
	}
	if strings.Trim(v, "*") == "" || isReference(v) {
		return true
	}
	if len(v) > 2 && v[0] == '<' && v[len(v)-1] == '>' &&
		run(v, 1, func(b byte) bool { return isAlnum(b) || strings.IndexByte("_- .", b) >= 0 }) == len(v)-1 {
		return true
	}
	word := v
	for _, roff := range []string{`\fI`, `\fB`, `\fR`, `\fP`} {
		word = strings.ReplaceAll(word, roff, "")
	}
	word = strings.Trim(word, "[]<>{}:")
	return placeholders[strings.ToLower(word)]
}
