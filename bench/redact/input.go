package main

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
)

// words are the prose of the mixed result, with the everyday words that are
// also gitleaks keywords ("key", "token", "secret", "access", "api", "auth").
var words = strings.Fields(`the a of to and in is that for it on with as was at by this be from or have an
they are which you one all were we when there can more if out so what up about into than them only other
new some could time these two may then do first any my now such like our over man me even most made after
also did many before must through back years where much your way well down should because each just those
key token secret access api auth password credential session cache server client request response error
value field record table index query result status config option setting user group role policy rule`)

// mixedInput returns about size bytes of what tools return: prose, JSON
// lines, source code, base64 blobs (images), log lines, and a few secrets
// (fake, of real shapes) among them; and how many secrets it holds.
func mixedInput(size int, seed uint64) (string, int) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var sb strings.Builder
	secrets := 0
	for sb.Len() < size {
		switch n := rng.IntN(100); {
		case n < 35: // a paragraph of prose
			for range 40 + rng.IntN(60) {
				sb.WriteString(words[rng.IntN(len(words))])
				sb.WriteByte(' ')
			}
			sb.WriteString(".\n")
		case n < 60: // JSON lines
			for range 10 {
				fmt.Fprintf(&sb, `{"id":%d,"name":"%s %s","access":"read","api_version":"v%d","token_count":%d,"updated":"2026-11-%02dT10:%02d:00Z","tags":["%s","%s"]}`+"\n",
					rng.IntN(1e6), words[rng.IntN(len(words))], words[rng.IntN(len(words))], rng.IntN(9), rng.IntN(5000), 1+rng.IntN(28), rng.IntN(60),
					words[rng.IntN(len(words))], words[rng.IntN(len(words))])
			}
		case n < 75: // source code
			fmt.Fprintf(&sb, "func (s *Server) handle%d(ctx context.Context, key string) error {\n\tv, err := s.cache.Get(ctx, key)\n\tif err != nil {\n\t\treturn fmt.Errorf(\"while reading %%s: %%w\", key, err)\n\t}\n\ts.metrics.Observe(len(v))\n\treturn nil\n}\n", rng.IntN(1000))
		case n < 90: // a base64 blob (an image)
			blob := make([]byte, 2048+rng.IntN(8192))
			for i := range blob {
				blob[i] = byte(rng.Uint32())
			}
			sb.WriteString(base64.StdEncoding.EncodeToString(blob))
			sb.WriteByte('\n')
		case n < 99: // log lines
			for range 8 {
				fmt.Fprintf(&sb, "2026-11-30T10:%02d:%02d.%03dZ INFO request served method=GET path=/api/v1/items/%d status=200 duration=%dms user=u%d\n",
					rng.IntN(60), rng.IntN(60), rng.IntN(1000), rng.IntN(1e5), rng.IntN(300), rng.IntN(100))
			}
		default: // a secret
			secrets++
			switch rng.IntN(4) {
			case 0:
				fmt.Fprintf(&sb, "export GITHUB_TOKEN=ghp_%s\n", randomAlnum(rng, 36))
			case 1:
				fmt.Fprintf(&sb, "stripe: sk_live_%s\n", randomAlnum(rng, 24))
			case 2:
				fmt.Fprintf(&sb, "DATABASE_URL=postgres://app:%s@db.internal:5432/app\n", randomAlnum(rng, 20))
			default:
				fmt.Fprintf(&sb, `{"npm_token":"npm_%s"}`+"\n", randomAlnum(rng, 36))
			}
		}
	}
	return sb.String(), secrets
}

func randomAlnum(rng *rand.Rand, n int) string {
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alnum[rng.IntN(len(alnum))]
	}
	return string(b)
}
