package redact

import (
	"encoding/base64"
	"math/rand/v2"
	"strings"
	"testing"
)

// randomOf returns n bytes drawn from alphabet: fake credentials of real
// shapes, made when the test runs (none is anyone's).
func randomOf(rng *rand.Rand, alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

const (
	alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	lower = "abcdefghijklmnopqrstuvwxyz"
	hexa  = "0123456789abcdef"
)

// Everyday kinds of credentials, each in the forms a result carries them:
// none survives.
func TestEverydayCredentials(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	accountKey := base64.StdEncoding.EncodeToString([]byte(randomOf(rng, alnum, 64)))
	cases := []struct{ name, text, secret string }{
		{"stripe secret", "", "sk_live_" + randomOf(rng, alnum, 24)},
		{"stripe restricted", "", "rk_live_" + randomOf(rng, alnum, 24)},
		{"google api key", "", "AIza" + randomOf(rng, alnum+"-_", 35)},
		{"gitlab pat", "", "glpat-" + randomOf(rng, alnum, 20)},
		{"npm", "", "npm_" + randomOf(rng, alnum, 36)},
		{"hugging face", "", "hf_" + randomOf(rng, lower, 34)},
		{"vault", "", "hvs." + randomOf(rng, alnum+"_-", 95)},
		{"digitalocean", "", "dop_v1_" + randomOf(rng, hexa, 64)},
		{"azure storage", "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=%s;EndpointSuffix=core.windows.net", accountKey},
		{"service bus", "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=%s", accountKey[:44]},
		{"sql server", "Server=tcp:db.example.net,1433;Database=app;User ID=app;Password=%s;Encrypt=true", "Pw-" + randomOf(rng, alnum, 12)},
		{"postgres url", "DATABASE_URL=postgres://app:%s@db.internal:5432/app", randomOf(rng, alnum, 20)},
		{"redis url", `{"url":"redis://:%s@cache:6379/0"}`, randomOf(rng, alnum, 16)},
		{"https userinfo", "git clone https://deploy:%s@git.example.com/repo.git", randomOf(rng, alnum, 12)},
		{"json password", `{"user":"app","password":"%s"}`, randomOf(rng, alnum+"!#$%", 18)},
		{"json api_key", `{"api_key": "%s"}`, randomOf(rng, alnum, 32)},
		{"yaml secret", "service:\n  client_secret: %s\n", randomOf(rng, alnum, 28)},
		{"env token", "export SERVICE_TOKEN=%s\n", randomOf(rng, alnum, 30)},
		{"header", "X-Api-Key: %s\r\n", randomOf(rng, hexa, 32)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text := tc.secret
			if tc.text != "" {
				text = strings.Replace(tc.text, "%s", tc.secret, 1)
			}
			var got string
			if strings.HasPrefix(text, "{") {
				out, err := Shapes().JSON([]byte(text), nil)
				if err != nil {
					t.Fatal(err)
				}
				got = string(out)
			} else {
				got = Shapes().String(text, nil)
			}
			if strings.Contains(got, tc.secret) || !strings.Contains(got, "[REDACTED:") {
				t.Fatalf("%q\nredacted to %q", text, got)
			}
		})
	}
}

// What these shapes must leave alone.
func TestNearMissesSurvive(t *testing.T) {
	for _, s := range []string{
		"see https://example.com/docs?a=b@c", "mailto:someone@example.com", "ssh://git@github.com/org/repo.git",
		"https://user@host/path", "a URL like scheme://host:8080/path@v2", "Password=", "UserPassword=x;",
		`{"password":"short"}`, `{"token_count": 1234}`, `{"access":"read"}`, "the key: value pairs",
		"x://y:@z",
	} {
		if got := Shapes().String(s, nil); got != s {
			t.Errorf("%q redacted to %q", s, got)
		}
		if strings.HasPrefix(s, "{") {
			if out, _ := Shapes().JSON([]byte(s), nil); string(out) != s {
				t.Errorf("JSON %s redacted to %s", s, out)
			}
		}
	}
}

// Source code and documentation a server prints: a secret's name with code
// or a placeholder after it is left alone, a secret after it is not.
func TestCodeAfterASecretsName(t *testing.T) {
	for _, s := range []string{
		"\t\tAccessToken: tok.AccessToken,", "\tsecret := os.Getenv(key)", "ClientSecret: opts.ClientSecret,",
		`jwtTokenURL = "https://oauth2.googleapis.com/token"`, "token: z.ZodOptional<z.ZodString>;",
		"\tTokenProvider:  cachedTokenProvider,", "apiKeyPath := v.GetString(cfg.namespace)",
		"// Password: Optional.", `azureTokenCredentials = "AZURE_TOKEN_CREDENTIALS"`, "secret: <string>",
		"EBS_SECRETKEY=$AWS_SECRETKEY", "if result.TokenType == \"urn:ietf:params:oauth:token-type:saml2\"",
		"clickhouse://username:password@host1:9000/db", "http://user:pass@proxy:3128", "ftp://[[user][:password]@]host",
		"DATABASE_URL=postgres://app:${DB_PASSWORD}@db/app", `tokenHeader = "X-aws-ec2-metadata-token"`,
		`tokenURL = "instance/service-accounts/default/token"`, "passwd: UID:GID:user_name:directory:shell",
		"\tcase TokenEOF:", "token: JwtTokenIssuedAt,",
		"token := &Token{", "\tsecret := base64.StdEncoding.DecodeString(s)", "password: ${DB_PASSWORD}",
		"secret: $(cat /run/secrets/db)", "token_path: /var/run/secrets/kubernetes.io/serviceaccount/token",
		"password: *opts.Password", "postgres://app:****@db/app", `man: \fIpassword\fR`,
	} {
		if got := Shapes().String(s, nil); got != s {
			t.Errorf("%q redacted to %q", s, got)
		}
	}
	for _, s := range []string{
		"password: Pa55.w0rd!x", "token = abc.Def123xyzQ", "SERVICE_TOKEN=q8Wm2xLr7Tz4Vn1K", "password=mypassword123", "password: SecretPass2024",
		"postgres://app:Xk29vLq81mZr@db:5432/app",
		// Syntax inside a generated value does not make it code or a placeholder.
		"password: Zx9{pQ4mLw2Tr8", "password: *Zx9pQ4mLw2Tr8", "DB_PASSWORD=$Xk9mP2qL7vR4zT",
		"client_secret: /Xk9+mP2qL7vR4zT8w1Aqq", `{"password":"K#9v(Lm2]Qx7!zP4"}`,
		"postgres://app:S3cr$t9xQw7z@db:5432/app", "https://u:Zx9]pQ4mLw2@host/",
		"api_token=auth_3f9a8b7c6d5e4f3a2b1c", "token: prod_secret_8f2k4m9x7q1z3v5b",
		"secret = os.Getenv(Xk9mP2qL7vR4zT)", "token: Config{pQ4mLw2Tr8}", "password: <Zx9pQ4mLw2>",
	} {
		if got := Shapes().String(s, nil); got == s {
			t.Errorf("%q was not redacted", s)
		}
		if strings.HasPrefix(s, "{") {
			if out, _ := Shapes().JSON([]byte(s), nil); string(out) == s {
				t.Errorf("JSON %s was not redacted", s)
			}
		}
	}
}
