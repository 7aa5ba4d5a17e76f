package redact

import "strings"

// isCode says whether a value after a secret's name is a piece of program
// or documentation rather than a secret, as in source code a server prints:
// a call, a composite literal or a generic type ("os.Getenv(key)",
// "&Token{", "z.ZodOptional<z.ZodString>"), a selector of names
// ("opts.ClientSecret", "gen_ai.usage.prompt_tokens"), a URL (a token
// endpoint), or a name ("passwordPath", "DelegationToken",
// "AZURE_TOKEN_CREDENTIALS"), a placeholder or a reference ("<string>",
// "$AWS_SECRET", "%v"), a comparison, roff markup, a path or a URN. A value
// that reads as generated (see looksGenerated) is none of these, whatever
// syntax it holds: a brace or a '$' inside a password does not make it a
// program.
func isCode(v string) bool {
	if v == "" || looksGenerated(v) {
		return false
	}
	if strings.ContainsAny(v, "(){}[]<>") || strings.IndexByte("&*$/", v[0]) >= 0 || strings.HasPrefix(v, "urn:") {
		return true
	}
	for _, syntax := range []string{"://", "%v", "%s", "?.", "==", `\f`, `\-`} {
		if strings.Contains(v, syntax) {
			return true
		}
	}
	v = strings.TrimSuffix(v, ".") // the end of a sentence
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

// looksGenerated says whether v reads as generated rather than written: a
// run of letters and digits in it does (hasGeneratedSegment), or digits
// scattered among its letters in three runs or more with a high entropy
// ("K#9v(Lm2]Qx7!zP4"; "sha256.Sum256(data)" has two).
func looksGenerated(v string) bool {
	if hasGeneratedSegment(v) {
		return true
	}
	runs := 0
	for i := 0; i < len(v); i++ {
		if isDigit(v[i]) && (i == 0 || !isDigit(v[i-1])) {
			runs++
		}
	}
	return runs >= 3 && shannon(v) >= assignedSecretEntropy
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

// isPlaceholder says whether a URL's password is documentation's: a
// placeholder word, or a template's or markup's syntax ("<password>",
// "${DB_PASSWORD}", "[:password]", roff's "\fIpassword\fR") around a value
// that does not read as generated ("S3cr$t9xQw7z" is a password).
func isPlaceholder(v string) bool {
	return placeholders[strings.ToLower(v)] || strings.ContainsAny(v, `[]\<>{}$*`) && !looksGenerated(v)
}
