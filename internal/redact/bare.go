package redact

import (
	"math"
	"strings"
)

// Bare tokens: credentials a server prints with no name beside them, one a
// line, found by what they are made of. A vendor's prefix says what a token
// is ("glpat-", "hf_", "dop_v1_"); its published alphabet and length say
// where it ends; a body with too little entropy for its length is a
// placeholder or a word ("key-" and 32 zeros, "hf_xxxx…"), not a token. A
// few formats have no prefix but a structure specific enough alone: a
// Telegram bot token "<digits>:AA<33 base64url>", a Mailchimp key "<32
// hex>-us<n>", a Terraform Cloud token "<14>.atlasv1.<60+>".
//
// Each format starts with a literal, as the hand-written shapes do, so the
// scan's trigram test finds them in the same single pass.

// bareFormat is one published token format.
type bareFormat struct {
	name     string // the kind's name, in the replacement text
	lit      string // the prefix, or the structure's fixed part
	body     *[256]bool
	min, max int // the body's length after lit
	// third is what may follow a two-byte lit, for the trigram set (nil:
	// the body's alphabet).
	third *[256]bool
	// structure, when set, checks the body's fixed parts ("." at 14 and hex
	// after it) beyond its alphabet and length.
	structure func(body string) bool
	// match, when set, replaces prefix matching: a structural shape that
	// looks before its literal or redacts part of what follows it.
	match func(s string, at int) (int, int, bool)
	// anyEntropy skips the entropy test, for prefixes specific enough
	// alone (loose).
	anyEntropy bool
}

// Alphabets of the formats, as tables: matching runs at every prefix found.
var (
	alnumSet     = bytesOf(isAlnum)
	hexLowerSet  = bytesOf(func(b byte) bool { return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' })
	hexAnySet    = bytesOf(isHex)
	upperNumSet  = bytesOf(isUpperOrDigit)
	lowerNumSet  = bytesOf(func(b byte) bool { return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' })
	b64URLSet    = bytesOf(isB64URLByte)
	b64URLDotSet = bytesOf(func(b byte) bool { return isB64URLByte(b) || b == '.' })
	b64Set       = bytesOf(func(b byte) bool { return isAlnum(b) || b == '+' || b == '/' || b == '=' })
	b64AnySet    = bytesOf(func(b byte) bool { return isAlnum(b) || strings.IndexByte("+/=_-", b) >= 0 })
	alnumDashSet = bytesOf(isSlackByte)
	alnumUndSet  = bytesOf(isWordByte)
	keyByteSet   = bytesOf(isKeyByte)
	hexDashSet   = bytesOf(func(b byte) bool { return isHex(b) || b == '-' })
	braintreeSet = bytesOf(func(b byte) bool { return isAlnum(b) || b == '$' })
	bech32Set    = bytesOf(func(b byte) bool { return strings.IndexByte("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", b) >= 0 })
)

func isHex(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F'
}
func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// loose is a prefixed format whose prefix says enough: at least minLen bytes
// of body, any entropy.
func loose(name, lit string, body *[256]bool, minLen int) bareFormat {
	return bareFormat{name: name, lit: lit, body: body, min: minLen, max: math.MaxInt - 1, anyEntropy: true}
}

// pre is a prefixed format: lit, then minLen to maxLen bytes of body.
func pre(name, lit string, body *[256]bool, minLen, maxLen int) bareFormat {
	return bareFormat{name: name, lit: lit, body: body, min: minLen, max: maxLen}
}

// bareFormats are the formats, from the vendors' documentation of their
// tokens and from the rules of gitleaks (whose exact lengths and alphabets
// some vendors have since changed: Slack's refresh tokens are mixed-case,
// Hugging Face's have upper-case letters). Where two formats match at the
// same place, the earlier one names the redaction.
var bareFormats = [...]bareFormat{
	// Prefixes so specific that any body of the length is taken, whatever
	// its entropy (no upper bound either: vendors lengthen these). Anthropic
	// before OpenAI, whose "sk-" it starts with.
	loose("anthropic-key", "sk-ant-", keyByteSet, 20),
	loose("openai-key", "sk-", keyByteSet, 20),  // sk-proj-, sk-svcacct-, sk-admin-
	loose("github-token", "ghp_", alnumSet, 30), // classic personal access tokens
	loose("github-token", "gho_", alnumSet, 30), // OAuth
	loose("github-token", "ghu_", alnumSet, 30), // user-to-server
	loose("github-token", "ghs_", alnumSet, 30), // server-to-server
	loose("github-token", "ghr_", alnumSet, 30), // refresh
	loose("github-pat", "github_pat_", alnumUndSet, 22),
	loose("slack-token", "xoxa-", alnumDashSet, 10),
	loose("slack-token", "xoxb-", alnumDashSet, 10), // bot
	loose("slack-token", "xoxp-", alnumDashSet, 10), // user
	loose("slack-token", "xoxr-", alnumDashSet, 10),
	loose("slack-token", "xoxs-", alnumDashSet, 10),
	// AWS access key ids: AKIA (long-term), ASIA (temporary) and the rarer
	// kinds, then exactly 16 upper-case letters and digits.
	pre("aws-access-key-id", "AKIA", upperNumSet, 16, 16),
	pre("aws-access-key-id", "ASIA", upperNumSet, 16, 16),
	// Slack: refresh and configuration tokens, app-level tokens, the
	// browser session's client token and cookie, incoming webhooks.
	pre("slack-refresh-token", "xoxe-", alnumDashSet, 20, 400),
	pre("slack-config-token", "xoxe.", b64URLDotSet, 20, 400),
	pre("slack-app-token", "xapp-", alnumDashSet, 20, 400),
	pre("slack-client-token", "xoxc-", alnumDashSet, 20, 400),
	pre("slack-cookie", "xoxd-", bytesOf(func(b byte) bool { return isB64URLByte(b) || b == '%' }), 20, 400),
	{name: "slack-webhook-url", lit: "hooks.slack.com/", match: webhookPath(len("hooks.slack.com/"), 40)},
	{name: "slack-webhook-url", lit: "hooks.slack.com%2F", match: webhookPath(len("hooks.slack.com%2F"), 40)},
	// GitLab's tokens, by their documented prefixes (the newer routable
	// tokens hold dots).
	pre("gitlab-pat", "glpat-", b64URLDotSet, 20, 300),
	pre("gitlab-pipeline-trigger-token", "glptt-", b64URLDotSet, 20, 300),
	pre("gitlab-deploy-token", "gldt-", b64URLDotSet, 20, 300),
	pre("gitlab-runner-token", "glrt-", b64URLDotSet, 20, 300),
	pre("gitlab-runner-token", "glrtr-", b64URLDotSet, 20, 300),
	pre("gitlab-runner-registration-token", "GR1348941", b64URLSet, 20, 40),
	pre("gitlab-ci-job-token", "glcbt-", b64URLDotSet, 20, 300),
	pre("gitlab-feed-token", "glft-", b64URLDotSet, 20, 300),
	pre("gitlab-incoming-mail-token", "glimt-", b64URLDotSet, 20, 300),
	pre("gitlab-agent-token", "glagent-", b64URLDotSet, 40, 300),
	pre("gitlab-oauth-app-secret", "gloas-", b64URLDotSet, 40, 300),
	pre("gitlab-feature-flag-token", "glffct-", b64URLDotSet, 20, 300),
	pre("gitlab-scim-token", "glsoat-", b64URLDotSet, 20, 300),
	// AI vendors.
	pre("huggingface-token", "hf_", alnumSet, 30, 40),
	pre("huggingface-org-token", "api_org_", alnumSet, 30, 40),
	pre("groq-api-key", "gsk_", alnumSet, 48, 56),
	pre("replicate-api-token", "r8_", alnumSet, 37, 40),
	pre("perplexity-api-key", "pplx-", alnumSet, 40, 56),
	pre("xai-api-key", "xai-", alnumSet, 70, 90),
	pre("langsmith-api-key", "lsv2_pt_", alnumUndSet, 40, 50),
	pre("langsmith-api-key", "lsv2_sk_", alnumUndSet, 40, 50),
	pre("pinecone-api-key", "pcsk_", alnumUndSet, 60, 90),
	pre("elevenlabs-api-key", "sk_", hexLowerSet, 48, 48),
	// Payments.
	pre("stripe-secret-key", "sk_live_", alnumSet, 20, 247),
	pre("stripe-secret-key", "sk_test_", alnumSet, 20, 247),
	pre("stripe-restricted-key", "rk_live_", alnumSet, 20, 247),
	pre("stripe-restricted-key", "rk_test_", alnumSet, 20, 247),
	pre("stripe-webhook-secret", "whsec_", b64Set, 24, 80),
	pre("square-access-token", "EAAA", b64URLSet, 60, 60),
	pre("square-access-token", "sq0atp-", b64URLSet, 22, 22),
	pre("square-oauth-secret", "sq0csp-", b64URLSet, 43, 43),
	pre("braintree-access-token", "access_token$production$", braintreeSet, 49, 49),
	// The same put in a URL's query, its "$" escaped (the body's "$" is read
	// through its escape as any body byte).
	pre("braintree-access-token", "access_token%24production%24", braintreeSet, 49, 49),
	pre("shippo-api-token", "shippo_live_", hexLowerSet, 40, 40),
	pre("shippo-api-token", "shippo_test_", hexLowerSet, 40, 40),
	pre("duffel-api-token", "duffel_live_", b64URLSet, 43, 43),
	pre("duffel-api-token", "duffel_test_", b64URLSet, 43, 43),
	pre("easypost-api-key", "EZAK", alnumSet, 54, 54),
	pre("easypost-api-key", "EZTK", alnumSet, 54, 54),
	pre("flutterwave-secret-key", "FLWSECK-", alnumDashSet, 34, 34),
	pre("flutterwave-secret-key", "FLWSECK_TEST-", alnumDashSet, 34, 34),
	pre("plaid-access-token", "access-production-", hexDashSet, 36, 36),
	pre("plaid-access-token", "access-development-", hexDashSet, 36, 36),
	// Cloud providers.
	pre("aws-access-key-id", "ABIA", upperNumSet, 16, 16),
	pre("aws-access-key-id", "ACCA", upperNumSet, 16, 16),
	pre("aws-access-key-id", "A3T", upperNumSet, 17, 17),
	pre("gcp-api-key", "AIza", b64URLSet, 35, 35),
	pre("gcp-oauth-client-secret", "GOCSPX-", b64URLSet, 28, 28),
	pre("gcp-oauth-access-token", "ya29.", b64URLDotSet, 30, 2048),
	pre("gcp-oauth-refresh-token", "1//0", b64URLSet, 40, 512),
	pre("gcp-oauth-refresh-token", "1%2F%2F0", b64URLSet, 40, 512), // in a query string
	pre("alibaba-access-key-id", "LTAI", alnumSet, 12, 20),
	pre("tencent-secret-id", "AKID", alnumSet, 32, 32),
	pre("yandex-api-key", "AQVN", b64URLSet, 35, 38),
	pre("yandex-oauth-token", "y0_", b64URLSet, 55, 60),
	pre("digitalocean-pat", "dop_v1_", hexLowerSet, 64, 64),
	pre("digitalocean-oauth-token", "doo_v1_", hexLowerSet, 64, 64),
	pre("digitalocean-refresh-token", "dor_v1_", hexLowerSet, 64, 64),
	pre("cloudflare-origin-ca-key", "v1.0-", hexDashSet, 171, 171),
	{name: "azure-ad-client-secret", lit: "Q~", third: b64URLDotTildeSet, match: azureClientSecret},
	pre("heroku-api-key", "HRKU-AA", b64URLSet, 58, 58),
	pre("flyio-token", "fo1_", b64URLSet, 43, 43),
	pre("flyio-token", "fm2_", b64AnySet, 64, 8192),
	pre("render-api-key", "rnd_", alnumSet, 32, 32),
	pre("netlify-pat", "nfp_", alnumSet, 36, 40),
	pre("deno-deploy-token", "ddp_", alnumSet, 36, 36),
	pre("neon-api-key", "napi_", alnumSet, 64, 64),
	pre("supabase-pat", "sbp_", hexLowerSet, 40, 40),
	pre("supabase-secret-key", "sb_secret_", b64URLSet, 28, 64),
	pre("planetscale-token", "pscale_tkn_", b64URLDotSet, 32, 64),
	pre("planetscale-password", "pscale_pw_", b64URLDotSet, 32, 64),
	pre("planetscale-oauth-token", "pscale_oauth_", b64URLDotSet, 32, 64),
	pre("mongodb-atlas-service-account-secret", "mdb_sa_sk_", b64URLSet, 32, 64),
	pre("elastic-api-key", "essu_", b64AnySet, 40, 256),
	pre("scalingo-api-token", "tk-us-", b64URLSet, 48, 48),
	// Developer platforms and registries.
	pre("npm-access-token", "npm_", alnumSet, 36, 36),
	pre("pypi-upload-token", "pypi-AgEIcHlwaS5vcmc", b64URLSet, 50, 300),
	pre("pypi-upload-token", "pypi-AgENdGVzdC5weXBpLm9yZw", b64URLSet, 50, 300),
	pre("rubygems-api-token", "rubygems_", hexLowerSet, 48, 48),
	pre("nuget-api-key", "oy2", lowerNumSet, 43, 43),
	pre("clojars-api-token", "CLOJARS_", lowerNumSet, 60, 60),
	pre("docker-hub-pat", "dckr_pat_", b64URLSet, 24, 40),
	pre("docker-hub-oat", "dckr_oat_", b64URLSet, 24, 40),
	pre("artifactory-api-key", "AKCp", alnumSet, 69, 69),
	pre("artifactory-reference-token", "cmVmdGtu", alnumSet, 50, 70),
	pre("linear-api-key", "lin_api_", alnumSet, 40, 40),
	pre("linear-oauth-token", "lin_oauth_", hexLowerSet, 64, 64),
	pre("postman-api-key", "PMAK-", hexDashSet, 59, 59),
	pre("databricks-token", "dapi", hexDashSet, 32, 35),
	pre("atlassian-api-token", "ATATT3", bytesOf(func(b byte) bool { return isB64URLByte(b) || b == '=' }), 150, 300),
	pre("atlassian-api-token", "ATCTT3", bytesOf(func(b byte) bool { return isB64URLByte(b) || b == '=' }), 150, 300),
	pre("bitbucket-app-password", "ATBB", alnumSet, 32, 36),
	pre("vault-service-token", "hvs.", b64URLSet, 90, 200),
	pre("vault-batch-token", "hvb.", b64URLSet, 138, 400),
	pre("pulumi-access-token", "pul-", hexLowerSet, 40, 40),
	pre("grafana-cloud-token", "glc_", b64Set, 32, 400),
	pre("grafana-service-account-token", "glsa_", alnumUndSet, 41, 41),
	pre("new-relic-user-api-key", "NRAK-", upperNumSet, 27, 27),
	pre("new-relic-browser-key", "NRJS-", hexLowerSet, 19, 19),
	pre("new-relic-insert-key", "NRII-", alnumDashSet, 32, 32),
	pre("sentry-org-token", "sntrys_", b64AnySet, 80, 400),
	pre("sentry-user-token", "sntryu_", hexLowerSet, 64, 64),
	pre("honeycomb-api-key", "hcaik_", alnumSet, 50, 70),
	pre("honeycomb-api-key", "hcxik_", alnumSet, 50, 70),
	pre("tailscale-key", "tskey-", alnumDashSet, 40, 100),
	pre("doppler-token", "dp.pt.", alnumSet, 40, 44),
	pre("doppler-token", "dp.st.", b64URLDotSet, 40, 80),
	pre("doppler-token", "dp.sa.", alnumSet, 40, 44),
	pre("doppler-token", "dp.ct.", alnumSet, 40, 44),
	pre("onepassword-service-account-token", "ops_eyJ", b64AnySet, 100, 4096),
	pre("buildkite-token", "bkua_", hexLowerSet, 40, 40),
	pre("circleci-pat", "CCIPAT_", alnumUndSet, 40, 80),
	pre("sourcegraph-token", "sgp_", alnumUndSet, 40, 64),
	pre("prefect-api-key", "pnu_", alnumSet, 36, 36),
	pre("infracost-api-key", "ico-", alnumSet, 32, 32),
	pre("readme-api-key", "rdme_", alnumSet, 70, 70),
	{name: "terraform-cloud-token", lit: ".atlasv1.", match: terraformCloud},
	pre("defined-networking-key", "dnkey-", alnumDashSet, 79, 79),
	pre("trigger-dev-key", "tr_prod_", alnumSet, 20, 32),
	pre("trigger-dev-key", "tr_dev_", alnumSet, 20, 32),
	pre("adafruit-io-key", "aio_", alnumSet, 28, 28),
	// Productivity and communication.
	pre("notion-token", "ntn_", alnumSet, 40, 50),
	pre("notion-token", "secret_", alnumSet, 43, 43),
	{name: "airtable-pat", lit: "pat", body: b64URLDotSet, min: 79, max: 79, structure: airtablePAT},
	{name: "harness-token", lit: "pat.", body: b64URLDotSet, min: 60, max: 80, structure: dotted(3)},
	{name: "harness-token", lit: "sat.", body: b64URLDotSet, min: 60, max: 80, structure: dotted(3)},
	pre("dropbox-token", "sl.", b64URLDotSet, 130, 1500),
	pre("figma-pat", "figd_", b64URLSet, 38, 45),
	pre("typeform-token", "tfp_", b64URLDotSet, 40, 70),
	pre("contentful-pat", "CFPAT-", b64URLSet, 43, 43),
	pre("frameio-token", "fio-u-", b64URLSet, 64, 64),
	pre("mapbox-secret-token", "sk.eyJ", b64URLDotSet, 50, 400),
	pre("sendgrid-api-key", "SG.", b64URLDotSet, 66, 66),
	pre("mailgun-api-key", "key-", hexLowerSet, 32, 32),
	pre("brevo-api-key", "xkeysib-", alnumDashSet, 81, 81),
	{name: "resend-api-key", lit: "re_", body: alnumUndSet, min: 33, max: 33, structure: underscoreAt(8)},
	pre("shopify-access-token", "shpat_", hexAnySet, 32, 32),
	pre("shopify-custom-app-token", "shpca_", hexAnySet, 32, 32),
	pre("shopify-private-app-token", "shppa_", hexAnySet, 32, 32),
	pre("shopify-shared-secret", "shpss_", hexAnySet, 32, 32),
	pre("twilio-api-key", "SK", hexLowerSet, 32, 32),
	pre("twilio-account-sid", "AC", hexLowerSet, 32, 32),
	pre("age-secret-key", "AGE-SECRET-KEY-1", bech32Set, 58, 58),
	{name: "discord-webhook-url", lit: "discord.com/api/webhooks/", match: webhookPath(len("discord.com/api/webhooks/"), 60)},
	{name: "discord-webhook-url", lit: "discordapp.com/api/webhooks/", match: webhookPath(len("discordapp.com/api/webhooks/"), 60)},
	{name: "teams-webhook-url", lit: "webhook.office.com/webhookb2/", match: webhookPath(len("webhook.office.com/webhookb2/"), 60)},
	{name: "discord-webhook-url", lit: "discord.com%2Fapi%2Fwebhooks%2F", match: webhookPath(len("discord.com%2Fapi%2Fwebhooks%2F"), 60)},
	{name: "discord-webhook-url", lit: "discordapp.com%2Fapi%2Fwebhooks%2F", match: webhookPath(len("discordapp.com%2Fapi%2Fwebhooks%2F"), 60)},
	{name: "teams-webhook-url", lit: "webhook.office.com%2Fwebhookb2%2F", match: webhookPath(len("webhook.office.com%2Fwebhookb2%2F"), 60)},
	// Structural shapes without a prefix.
	{name: "telegram-bot-token", lit: ":AA", match: telegramBot(len(":"))},
	{name: "telegram-bot-token", lit: "%3AAA", match: telegramBot(len("%3A"))}, // in a query string
	{name: "mailchimp-api-key", lit: "-us", match: mailchimp},
}

// numBareKinds is the number of bare formats, for the size of Counts: the
// kinds from numOwnKinds on are theirs, in bareFormats' order.
const numBareKinds = Kind(len(bareFormats))

var b64URLDotTildeSet = bytesOf(func(b byte) bool { return isB64URLByte(b) || b == '.' || b == '~' })

// bytesOf is byteSet for a table shared by reference (random tells the hex
// alphabets by their address).
func bytesOf(in func(byte) bool) *[256]bool {
	set := byteSet(in)
	return &set
}

// IsBareFormat says whether name names the kind of a bare token format,
// for accounting apart what that detector finds (make bench-redact).
func IsBareFormat(name string) bool {
	for i := range bareFormats {
		if bareFormats[i].name == name {
			return true
		}
	}
	return false
}

// bareTriggers are the formats as the scan's triggers.
func bareTriggers() []trigger {
	out := make([]trigger, 0, len(bareFormats))
	for i := range bareFormats {
		f := &bareFormats[i]
		t := trigger{lit: f.lit, kind: numOwnKinds + Kind(i), match: f.match}
		if t.match == nil {
			t.format = f
		}
		switch {
		case f.third != nil:
			t.third = f.third
		case len(f.lit) == 2:
			t.third = f.body
		}
		out = append(out, t)
	}
	return out
}

// prefixed matches the format's lit at the start of a word, then a body of
// its alphabet, min to max bytes long and ending a word, with the entropy
// of random bytes.
func (f *bareFormat) prefixed(s string, at int, memo *scanMemo) (int, int, bool) {
	if !startsWord(s, at) {
		return 0, 0, false
	}
	from := at + len(f.lit)
	end, n := memo.run(s, from, f.body)
	if n < f.min || end < len(s) && isAlnum(s[end]) {
		return 0, 0, false
	}
	if n > f.max {
		// A body longer than its format allows is still the vendor's token
		// when the format's length varies and the prefix is specific (four
		// bytes or more): vendors lengthen their tokens, and leaving such a
		// token whole would leak it. Fixed-length formats ("AKIA" and 16)
		// stay exact: a longer run there is something else.
		if f.min == f.max || len(f.lit) < 4 || f.structure != nil {
			return 0, 0, false
		}
	}
	body := s[from:end]
	if f.structure != nil && !f.structure(body) || !f.anyEntropy && !random(body, f.body) {
		return 0, 0, false
	}
	return at, end, true
}

// percentByte decodes the percent escape at s[i:], if there is one.
func percentByte(s string, i int) (byte, bool) {
	if s[i] != '%' || i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
		return 0, false
	}
	return unhex(s[i+1])<<4 | unhex(s[i+2]), true
}

func unhex(b byte) byte {
	switch {
	case b >= 'a':
		return b - 'a' + 10
	case b >= 'A':
		return b - 'A' + 10
	}
	return b - '0'
}

// random says whether body has the entropy of random bytes of its
// alphabet, within a wide margin: at least 60 % of the most its length and
// alphabet allow. Random tokens pass (a random 32-hex body has about 3.7
// bits a byte against a floor of 2.4); "xxxx…", "0000…", "aaaa1111…" and
// most words do not. A body of hex digits also needs a digit and a letter,
// as random ones have (a 32-hex body lacks a letter once in three
// million).
func random(body string, alphabet *[256]bool) bool {
	size := 0
	for _, in := range alphabet {
		if in {
			size++
		}
	}
	if shannon(body) < 0.6*math.Log2(float64(min(len(body), size))) {
		return false
	}
	if alphabet == hexLowerSet || alphabet == hexAnySet || alphabet == hexDashSet {
		return len(body) < 16 || strings.IndexFunc(body, func(r rune) bool { return r >= '0' && r <= '9' }) >= 0 &&
			strings.IndexFunc(body, func(r rune) bool { return r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F' }) >= 0
	}
	return true
}

// airtablePAT: 14 letters and digits, ".", 64 hex digits.
func airtablePAT(body string) bool {
	if body[14] != '.' {
		return false
	}
	for i := range len(body) {
		if i < 14 && !isAlnum(body[i]) || i > 14 && !isHex(body[i]) {
			return false
		}
	}
	return true
}

// dotted: the body holds n parts joined by dots, each at least 8 long.
func dotted(n int) func(string) bool {
	return func(body string) bool {
		parts := strings.Split(body, ".")
		if len(parts) != n {
			return false
		}
		for _, p := range parts {
			if len(p) < 8 {
				return false
			}
		}
		return true
	}
}

func underscoreAt(i int) func(string) bool {
	return func(body string) bool { return body[i] == '_' && strings.Count(body, "_") == 1 }
}

// telegramBot matches a bot token "<5-16 digits>:AA<33+ base64url>", found
// at its ":AA" (sep is the colon's length: ":" or "%3A"). The digits start a
// word or follow "bot", as in the API's URLs (/bot<token>/getMe).
func telegramBot(sep int) func(string, int) (int, int, bool) {
	return func(s string, at int) (int, int, bool) {
		start := at
		for start > 0 && at-start < 17 && isDigit(s[start-1]) {
			start--
		}
		if n := at - start; n < 5 || n > 16 {
			return 0, 0, false
		}
		if !startsWord(s, start) && !(start >= 3 && s[start-3:start] == "bot") {
			return 0, 0, false
		}
		from := at + sep + len("AA")
		end := run(s, from, isB64URLByte)
		if n := end - from; n < 33 || n > 40 || !random(s[from:end], b64URLSet) {
			return 0, 0, false
		}
		return start, end, true
	}
}

// mailchimp matches "<32 hex>-us<1-2 digits>", found at its "-us".
func mailchimp(s string, at int) (int, int, bool) {
	start := at - 32
	if start < 0 || !startsWord(s, start) {
		return 0, 0, false
	}
	for i := start; i < at; i++ {
		if !hexLowerSet[s[i]] {
			return 0, 0, false
		}
	}
	end := run(s, at+len("-us"), isDigit)
	if n := end - at - len("-us"); n < 1 || n > 2 || end < len(s) && isAlnum(s[end]) || !random(s[start:at], hexLowerSet) {
		return 0, 0, false
	}
	return start, end, true
}

// azureClientSecret matches an Entra ID (Azure AD) client secret: three
// characters, a digit, "Q~", then 31 to 34 characters, found at its "Q~".
func azureClientSecret(s string, at int) (int, int, bool) {
	start := at - 4
	if start < 0 || !isDigit(s[at-1]) || start > 0 && b64URLDotTildeSet[s[start-1]] {
		return 0, 0, false
	}
	for i := start; i < at; i++ {
		if !b64URLDotTildeSet[s[i]] {
			return 0, 0, false
		}
	}
	from := at + len("Q~")
	end := from
	for end < len(s) && end-from <= 34 && b64URLDotTildeSet[s[end]] {
		end++
	}
	if n := end - from; n < 31 || n > 34 || !random(s[from:end], b64URLDotTildeSet) {
		return 0, 0, false
	}
	return start, end, true
}

// webhookPath matches the secret path of a webhook URL: after the host and
// path prefix (skip bytes from the literal), a path of at least minLen bytes
// of letters, digits, "/", "_", "-" and "@" (or their percent escapes, in a
// query string) with a random part.
func webhookPath(skip, minLen int) func(string, int) (int, int, bool) {
	return func(s string, at int) (int, int, bool) {
		from := at + skip
		end := run(s, from, func(b byte) bool { return isB64URLByte(b) || b == '/' || b == '@' || b == '%' })
		if end-from < minLen || !random(s[from:end], b64AnySet) {
			return 0, 0, false
		}
		return from, end, true
	}
}

// terraformCloud matches a Terraform Cloud (HCP Terraform) API token,
// "<14 letters and digits>.atlasv1.<60-70 base64url>", found at its middle.
func terraformCloud(s string, at int) (int, int, bool) {
	start := at - 14
	if start < 0 || !startsWord(s, start) || run(s, start, isAlnum) != at {
		return 0, 0, false
	}
	from := at + len(".atlasv1.")
	end := run(s, from, isB64URLByte)
	if n := end - from; n < 60 || n > 70 || !random(s[from:end], b64URLSet) {
		return 0, 0, false
	}
	return start, end, true
}
