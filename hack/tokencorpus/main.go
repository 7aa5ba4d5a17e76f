// Command tokencorpus writes the bare-token corpus of internal/redact
// (testdata/bare-tokens.json): fake credentials of the formats vendors
// publish for their tokens, each rendered bare, in a JSON document, in an
// env file and in a URL, with names beside them that say nothing (so that
// only a token's own shape can give it away). The tests and make
// bench-redact measure recall on it.
//
// Every token is drawn from a fixed seed: the same run writes the same
// file. The formats are written here from the vendors' documentation, apart
// from the detector's table in internal/redact/bare.go, so that the corpus
// tests the table rather than repeats it.
//
// Usage: go run ./hack/tokencorpus -out internal/redact/testdata/bare-tokens.json
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/mcp-operator/mcp-operator/internal/tokencorpus"
)

const (
	upper    = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	lower    = "abcdefghijklmnopqrstuvwxyz"
	digits   = "0123456789"
	alnum    = upper + lower + digits
	hexLower = "0123456789abcdef"
	b64url   = alnum + "-_"
	b64      = alnum + "+/"
	base32   = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	bech32   = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
)

// gen draws the parts of tokens from one seeded source.
type gen struct{ rng *rand.Rand }

// of returns n bytes drawn from alphabet.
func (g *gen) of(alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[g.rng.IntN(len(alphabet))]
	}
	return string(b)
}

func (g *gen) bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.rng.Uint32())
	}
	return b
}

func (g *gen) b64json(v any, enc *base64.Encoding) string {
	b, _ := json.Marshal(v)
	return enc.EncodeToString(b)
}

// format is one vendor's token format.
type format struct {
	kind string // what the token is
	make func(g *gen) string
}

// formats, from the vendors' documentation of their tokens (prefix,
// alphabet, length, structure).
var formats = []format{
	{"github-classic-pat", func(g *gen) string { return "ghp_" + g.of(alnum, 36) }},
	{"github-oauth-token", func(g *gen) string { return "gho_" + g.of(alnum, 36) }},
	{"github-user-to-server-token", func(g *gen) string { return "ghu_" + g.of(alnum, 36) }},
	{"github-server-to-server-token", func(g *gen) string { return "ghs_" + g.of(alnum, 36) }},
	{"github-refresh-token", func(g *gen) string { return "ghr_" + g.of(alnum, 76) }},
	{"github-fine-grained-pat", func(g *gen) string { return "github_pat_11" + g.of(upper+digits, 20) + "_" + g.of(alnum, 59) }},
	{"gitlab-pat", func(g *gen) string { return "glpat-" + g.of(b64url, 20) }},
	{"gitlab-pat-routable", func(g *gen) string {
		return "glpat-" + g.of(b64url, 27) + "." + "01." + g.of(lower+digits, 9)
	}},
	{"gitlab-pipeline-trigger-token", func(g *gen) string { return "glptt-" + g.of(hexLower, 40) }},
	{"gitlab-deploy-token", func(g *gen) string { return "gldt-" + g.of(b64url, 20) }},
	{"gitlab-runner-token", func(g *gen) string { return "glrt-" + g.of(b64url, 20) }},
	{"gitlab-ci-job-token", func(g *gen) string { return "glcbt-" + g.of(hexLower, 2) + "_" + g.of(b64url, 20) }},
	{"gitlab-feed-token", func(g *gen) string { return "glft-" + g.of(b64url, 20) }},
	{"gitlab-oauth-app-secret", func(g *gen) string { return "gloas-" + g.of(hexLower, 64) }},
	{"gitlab-agent-token", func(g *gen) string { return "glagent-" + g.of(b64url, 50) }},
	{"slack-bot-token", func(g *gen) string {
		return "xoxb-" + g.of(digits, 12) + "-" + g.of(digits, 13) + "-" + g.of(alnum, 24)
	}},
	{"slack-user-token", func(g *gen) string {
		return "xoxp-" + g.of(digits, 12) + "-" + g.of(digits, 12) + "-" + g.of(digits, 13) + "-" + g.of(hexLower, 32)
	}},
	{"slack-refresh-token", func(g *gen) string { return "xoxe-1-" + g.of(alnum, 146) }},
	{"slack-config-token", func(g *gen) string { return "xoxe.xoxp-1-" + g.of(alnum, 164) }},
	{"slack-app-token", func(g *gen) string {
		return "xapp-1-A" + g.of(upper+digits, 10) + "-" + g.of(digits, 13) + "-" + g.of(hexLower, 64)
	}},
	{"slack-webhook-url", func(g *gen) string {
		return "https://hooks.slack.com/services/T" + g.of(upper+digits, 8) + "/B" + g.of(upper+digits, 10) + "/" + g.of(alnum, 24)
	}},
	{"openai-project-key", func(g *gen) string {
		return "sk-proj-" + g.of(b64url, 74) + "T3BlbkFJ" + g.of(b64url, 74)
	}},
	{"openai-legacy-key", func(g *gen) string { return "sk-" + g.of(alnum, 20) + "T3BlbkFJ" + g.of(alnum, 20) }},
	{"anthropic-api-key", func(g *gen) string { return "sk-ant-api03-" + g.of(b64url, 93) + "AA" }},
	{"huggingface-token", func(g *gen) string { return "hf_" + g.of(upper+lower, 34) }},
	{"groq-api-key", func(g *gen) string { return "gsk_" + g.of(alnum, 52) }},
	{"replicate-api-token", func(g *gen) string { return "r8_" + g.of(alnum, 37) }},
	{"perplexity-api-key", func(g *gen) string { return "pplx-" + g.of(alnum, 48) }},
	{"xai-api-key", func(g *gen) string { return "xai-" + g.of(alnum, 80) }},
	{"langsmith-api-key", func(g *gen) string { return "lsv2_pt_" + g.of(hexLower, 32) + "_" + g.of(hexLower, 10) }},
	{"pinecone-api-key", func(g *gen) string { return "pcsk_" + g.of(alnum, 5) + "_" + g.of(alnum, 63) }},
	{"elevenlabs-api-key", func(g *gen) string { return "sk_" + g.of(hexLower, 48) }},
	{"stripe-secret-key", func(g *gen) string { return "sk_live_" + g.of(alnum, 99) }},
	{"stripe-test-key", func(g *gen) string { return "sk_test_" + g.of(alnum, 24) }},
	{"stripe-restricted-key", func(g *gen) string { return "rk_live_" + g.of(alnum, 99) }},
	{"stripe-webhook-secret", func(g *gen) string { return "whsec_" + g.of(alnum, 32) }},
	{"square-access-token", func(g *gen) string { return "EAAA" + g.of(b64url, 60) }},
	{"square-oauth-secret", func(g *gen) string { return "sq0csp-" + g.of(b64url, 43) }},
	{"shippo-live-token", func(g *gen) string { return "shippo_live_" + g.of(hexLower, 40) }},
	{"duffel-live-token", func(g *gen) string { return "duffel_live_" + g.of(b64url, 43) }},
	{"easypost-api-key", func(g *gen) string { return "EZAK" + g.of(alnum, 54) }},
	{"flutterwave-secret-key", func(g *gen) string { return "FLWSECK-" + g.of(hexLower, 32) + "-X" }},
	{"plaid-access-token", func(g *gen) string { return "access-production-" + uuid(g) }},
	{"aws-access-key-id", func(g *gen) string { return "AKIA" + g.of(base32, 16) }},
	{"aws-temporary-access-key-id", func(g *gen) string { return "ASIA" + g.of(base32, 16) }},
	{"google-api-key", func(g *gen) string { return "AIza" + g.of(b64url, 35) }},
	{"google-oauth-client-secret", func(g *gen) string { return "GOCSPX-" + g.of(b64url, 28) }},
	{"google-oauth-access-token", func(g *gen) string { return "ya29.a0" + g.of(b64url, 150) }},
	{"google-oauth-refresh-token", func(g *gen) string { return "1//0" + g.of(alnum, 1) + g.of(b64url, 98) }},
	{"alibaba-access-key-id", func(g *gen) string { return "LTAI" + g.of(alnum, 20) }},
	{"tencent-secret-id", func(g *gen) string { return "AKID" + g.of(alnum, 32) }},
	{"yandex-api-key", func(g *gen) string { return "AQVN" + g.of(b64url, 36) }},
	{"digitalocean-pat", func(g *gen) string { return "dop_v1_" + g.of(hexLower, 64) }},
	{"digitalocean-oauth-token", func(g *gen) string { return "doo_v1_" + g.of(hexLower, 64) }},
	{"cloudflare-origin-ca-key", func(g *gen) string { return "v1.0-" + g.of(hexLower, 24) + "-" + g.of(hexLower, 146) }},
	{"azure-ad-client-secret", func(g *gen) string {
		return g.of(alnum, 3) + g.of(digits, 1) + "Q~" + g.of(alnum+"_~.-", 34)
	}},
	{"heroku-api-key", func(g *gen) string { return "HRKU-AA" + g.of(b64url, 58) }},
	{"flyio-token", func(g *gen) string { return "fo1_" + g.of(b64url, 43) }},
	{"flyio-macaroon", func(g *gen) string { return "fm2_" + base64.StdEncoding.EncodeToString(g.bytes(180)) }},
	{"render-api-key", func(g *gen) string { return "rnd_" + g.of(alnum, 32) }},
	{"netlify-pat", func(g *gen) string { return "nfp_" + g.of(alnum, 36) }},
	{"deno-deploy-token", func(g *gen) string { return "ddp_" + g.of(alnum, 36) }},
	{"neon-api-key", func(g *gen) string { return "napi_" + g.of(lower+digits, 64) }},
	{"supabase-pat", func(g *gen) string { return "sbp_" + g.of(hexLower, 40) }},
	{"planetscale-token", func(g *gen) string { return "pscale_tkn_" + g.of(b64url, 43) }},
	{"elastic-api-key", func(g *gen) string { return "essu_" + base64.StdEncoding.EncodeToString(g.bytes(60)) }},
	{"npm-access-token", func(g *gen) string { return "npm_" + g.of(alnum, 36) }},
	{"pypi-upload-token", func(g *gen) string {
		return "pypi-AgEIcHlwaS5vcmc" + base64.RawURLEncoding.EncodeToString(g.bytes(120))
	}},
	{"rubygems-api-token", func(g *gen) string { return "rubygems_" + g.of(hexLower, 48) }},
	{"nuget-api-key", func(g *gen) string { return "oy2" + g.of(lower+digits, 43) }},
	{"clojars-api-token", func(g *gen) string { return "CLOJARS_" + g.of(lower+digits, 60) }},
	{"docker-hub-pat", func(g *gen) string { return "dckr_pat_" + g.of(b64url, 27) }},
	{"artifactory-api-key", func(g *gen) string { return "AKCp" + g.of(alnum, 69) }},
	{"linear-api-key", func(g *gen) string { return "lin_api_" + g.of(alnum, 40) }},
	{"postman-api-key", func(g *gen) string { return "PMAK-" + g.of(hexLower, 24) + "-" + g.of(hexLower, 34) }},
	{"databricks-token", func(g *gen) string { return "dapi" + g.of(hexLower, 32) }},
	{"atlassian-api-token", func(g *gen) string {
		return "ATATT3xFfGF0" + g.of(b64url, 171) + "=" + strings.ToUpper(g.of(hexLower, 8))
	}},
	{"bitbucket-app-password", func(g *gen) string { return "ATBB" + g.of(alnum, 32) }},
	{"vault-service-token", func(g *gen) string { return "hvs.CAESI" + g.of(b64url, 86) }},
	{"vault-batch-token", func(g *gen) string { return "hvb.AAAAAQ" + g.of(b64url, 140) }},
	{"pulumi-access-token", func(g *gen) string { return "pul-" + g.of(hexLower, 40) }},
	{"grafana-cloud-token", func(g *gen) string {
		return "glc_" + g.b64json(map[string]any{"o": g.of(digits, 6), "n": "stack-" + g.of(digits, 6) + "-hm-read", "k": g.of(alnum, 24), "m": map[string]string{"r": "prod-us-east-0"}}, base64.StdEncoding)
	}},
	{"grafana-service-account-token", func(g *gen) string { return "glsa_" + g.of(alnum, 32) + "_" + g.of(hexLower, 8) }},
	{"new-relic-user-api-key", func(g *gen) string { return "NRAK-" + g.of(upper+digits, 27) }},
	{"new-relic-insert-key", func(g *gen) string { return "NRII-" + g.of(alnum+"-", 32) }},
	{"sentry-org-token", func(g *gen) string {
		return "sntrys_" + g.b64json(map[string]any{"iat": 1.7e9 + g.rng.Float64()*1e8, "url": "https://sentry.io", "region_url": "https://us.sentry.io", "org": "acme-" + g.of(lower, 6)}, base64.RawStdEncoding) + "_" + g.of(b64, 43)
	}},
	{"sentry-user-token", func(g *gen) string { return "sntryu_" + g.of(hexLower, 64) }},
	{"honeycomb-ingest-key", func(g *gen) string { return "hcaik_" + g.of(lower+digits, 58) }},
	{"tailscale-auth-key", func(g *gen) string {
		return "tskey-auth-k" + g.of(alnum, 11) + "CNTRL-" + g.of(alnum, 33)
	}},
	{"doppler-personal-token", func(g *gen) string { return "dp.pt." + g.of(alnum, 43) }},
	{"doppler-service-token", func(g *gen) string { return "dp.st.prd." + g.of(alnum, 40) }},
	{"onepassword-service-account-token", func(g *gen) string {
		return "ops_" + g.b64json(map[string]any{"signInAddress": "my.1password.com", "userAuth": map[string]string{"method": "SRPg-4096", "alg": "PBES2g-HS256", "iterations": "650000", "salt": g.of(b64url, 22)}, "email": g.of(lower, 12) + "@1passwordserviceaccounts.com", "srpX": g.of(hexLower, 64), "muk": map[string]string{"alg": "A256GCM", "ext": "true", "k": g.of(b64url, 43), "kid": "mp", "kty": "oct"}, "secretKey": "A3-" + g.of(upper+digits, 6) + "-" + g.of(upper+digits, 6), "throttleSecret": map[string]string{"seed": g.of(hexLower, 64), "deviceUuid": g.of(lower+digits, 26)}, "deviceUuid": g.of(lower+digits, 26)}, base64.RawURLEncoding)
	}},
	{"buildkite-token", func(g *gen) string { return "bkua_" + g.of(hexLower, 40) }},
	{"sourcegraph-token", func(g *gen) string { return "sgp_" + g.of(hexLower, 16) + "_" + g.of(hexLower, 40) }},
	{"prefect-api-key", func(g *gen) string { return "pnu_" + g.of(alnum, 36) }},
	{"readme-api-key", func(g *gen) string { return "rdme_" + g.of(lower+digits, 70) }},
	{"terraform-cloud-token", func(g *gen) string { return g.of(alnum, 14) + ".atlasv1." + g.of(b64url, 67) }},
	{"defined-networking-key", func(g *gen) string { return "dnkey-" + g.of(upper+digits, 26) + "-" + g.of(upper+digits, 52) }},
	{"notion-token", func(g *gen) string { return "ntn_" + g.of(digits, 11) + g.of(alnum, 35) }},
	{"notion-legacy-token", func(g *gen) string { return "secret_" + g.of(alnum, 43) }},
	{"airtable-pat", func(g *gen) string { return "pat" + g.of(alnum, 14) + "." + g.of(hexLower, 64) }},
	{"harness-pat", func(g *gen) string {
		return "pat." + g.of(b64url, 22) + "." + g.of(hexLower, 24) + "." + g.of(alnum, 20)
	}},
	{"dropbox-token", func(g *gen) string { return "sl." + g.of(b64url, 138) }},
	{"figma-pat", func(g *gen) string { return "figd_" + g.of(b64url, 40) }},
	{"typeform-token", func(g *gen) string { return "tfp_" + g.of(alnum, 44) + "_" + g.of(alnum, 14) }},
	{"contentful-pat", func(g *gen) string { return "CFPAT-" + g.of(b64url, 43) }},
	{"mapbox-secret-token", func(g *gen) string {
		return "sk." + g.b64json(map[string]string{"u": g.of(lower, 8), "a": "cl" + g.of(lower+digits, 23)}, base64.RawURLEncoding) + "." + g.of(b64url, 22)
	}},
	{"sendgrid-api-key", func(g *gen) string { return "SG." + g.of(b64url, 22) + "." + g.of(b64url, 43) }},
	{"mailgun-api-key", func(g *gen) string { return "key-" + g.of(hexLower, 32) }},
	{"mailchimp-api-key", func(g *gen) string { return g.of(hexLower, 32) + "-us" + fmt.Sprint(1+g.rng.IntN(21)) }},
	{"brevo-api-key", func(g *gen) string { return "xkeysib-" + g.of(hexLower, 64) + "-" + g.of(alnum, 16) }},
	{"resend-api-key", func(g *gen) string { return "re_" + g.of(alnum, 8) + "_" + g.of(alnum, 24) }},
	{"shopify-access-token", func(g *gen) string { return "shpat_" + g.of(hexLower, 32) }},
	{"shopify-shared-secret", func(g *gen) string { return "shpss_" + g.of(hexLower, 32) }},
	{"twilio-api-key", func(g *gen) string { return "SK" + g.of(hexLower, 32) }},
	{"twilio-account-sid", func(g *gen) string { return "AC" + g.of(hexLower, 32) }},
	{"telegram-bot-token", func(g *gen) string {
		return fmt.Sprint(1e9+g.rng.IntN(8e9)) + ":AA" + g.of(b64url, 33)
	}},
	{"discord-webhook-url", func(g *gen) string {
		return "https://discord.com/api/webhooks/" + fmt.Sprint(1e18+g.rng.Int64N(8e17)) + "/" + g.of(b64url, 68)
	}},
	{"age-secret-key", func(g *gen) string { return "AGE-SECRET-KEY-1" + g.of(bech32, 58) }},
	{"jwt", func(g *gen) string {
		h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
		p := g.b64json(map[string]any{"sub": g.of(digits, 10), "name": g.of(lower, 8), "iat": 1.7e9 + g.rng.Float64()*1e8}, base64.RawURLEncoding)
		return h + "." + p + "." + base64.RawURLEncoding.EncodeToString(g.bytes(32))
	}},
	// PEM blocks whose bodies are random bytes after the DER header of
	// their type (the redaction reads the armour, not the key).
	{"pem-ec-private-key", func(g *gen) string {
		return pemBlock("EC PRIVATE KEY", append([]byte{0x30, 0x77, 0x02, 0x01, 0x01, 0x04, 0x20}, g.bytes(114)...))
	}},
	{"pem-rsa-private-key", func(g *gen) string {
		return pemBlock("RSA PRIVATE KEY", append([]byte{0x30, 0x82, 0x04, 0xa4, 0x02, 0x01, 0x00, 0x02, 0x82, 0x01, 0x01, 0x00}, g.bytes(1180)...))
	}},
	{"pem-pkcs8-private-key", func(g *gen) string {
		return pemBlock("PRIVATE KEY", append([]byte{0x30, 0x82, 0x04, 0xbe, 0x02, 0x01, 0x00}, g.bytes(1211)...))
	}},
	{"pem-openssh-private-key", func(g *gen) string {
		return pemBlock("OPENSSH PRIVATE KEY", append([]byte("openssh-key-v1\x00"), g.bytes(380)...))
	}},
}

func pemBlock(typ string, der []byte) string {
	return strings.TrimSpace(string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})))
}

func uuid(g *gen) string {
	h := hex.EncodeToString(g.bytes(16))
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func main() {
	out := flag.String("out", "internal/redact/testdata/bare-tokens.json", "the corpus file to write")
	per := flag.Int("per-kind", 3, "tokens of each kind")
	flag.Parse()
	g := &gen{rng: rand.New(rand.NewPCG(29, 2026))}
	var entries []tokencorpus.Entry
	for _, f := range formats {
		for range *per {
			t := f.make(g)
			entries = append(entries, tokencorpus.Entry{Kind: f.kind, Token: t, Wrapped: tokencorpus.Wrap(t, len(entries))})
		}
	}
	var b bytes.Buffer
	b.WriteString("[\n")
	for i, e := range entries {
		line, err := json.Marshal(e)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		b.Write(line)
		if i < len(entries)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]\n")
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%d tokens of %d kinds written to %s\n", len(entries), len(formats), *out)
}
