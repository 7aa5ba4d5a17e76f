package main

import (
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/mcp-operator/mcp-operator/internal/tokencorpus"
)

// recall is the share of (token, wrapping) pairs after which the text no
// longer holds the token, and the kinds of the tokens missed.
func recall(tokens []tokencorpus.Entry, redact func(string) string) (float64, map[string]int) {
	caught, all := 0, 0
	missed := map[string]int{}
	for _, e := range tokens {
		for _, w := range tokencorpus.Wrappings {
			all++
			if strings.Contains(redact(e.Wrapped[w]), tokencorpus.Rendered(e.Token, w)) {
				missed[e.Kind]++
			} else {
				caught++
			}
		}
	}
	return float64(caught) / float64(all), missed
}

// cleanFile is one file of the clean corpus.
type cleanFile struct {
	path, text string
}

// cleanSource is a part of the clean corpus: real text and code from this
// machine that holds no secrets, up to most bytes.
type cleanSource struct {
	name string
	root string
	most int
	keep func(path string) bool
	read func(path string) (string, error)
}

// skippedDirs hold what is known to contain fake secrets, which a clean
// corpus must not: tests and their fixtures (testdata, fixtures, test
// directories), whose keys and tokens are made to look real, and the
// modules of secret scanners (gitleaks, TruffleHog, detect-secrets,
// secretlint), whose rule files hold an example of each format.
var skippedDirs = []string{"testdata", "fixtures", "__fixtures__", "__tests__", "test", "tests", "gitleaks", "trufflehog", "detect-secrets", "secretlint"}

func skippedPath(path string) bool {
	for _, part := range strings.Split(filepath.ToSlash(path), "/") {
		for _, d := range skippedDirs {
			if strings.EqualFold(part, d) || strings.HasPrefix(strings.ToLower(part), d+"@") {
				return true
			}
		}
	}
	// Tests and their data files ("keys_test_data.go" holds PGP test keys).
	base := strings.ToLower(filepath.Base(path))
	return strings.Contains(base, "test") || strings.Contains(base, ".spec.") || strings.Contains(base, "fixture")
}

func readPlain(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

func readGzip(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(z, 8<<20))
	return string(b), err
}

func goModCache() string {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// cleanCorpus collects the clean corpus: Go module sources from the module
// cache, npm packages' sources and READMEs (the peers make peers installs),
// and man pages, decompressed. Files are taken in lexical order, so the
// same machine gives the same corpus.
func cleanCorpus(repoRoot string) ([]cleanFile, map[string]int, error) {
	hasExt := func(exts ...string) func(string) bool {
		return func(p string) bool {
			for _, e := range exts {
				if strings.HasSuffix(p, e) {
					return true
				}
			}
			return false
		}
	}
	sources := []cleanSource{
		{"Go module sources", goModCache(), 44 << 20, hasExt(".go", ".md"), readPlain},
		{"npm packages", filepath.Join(repoRoot, "test", "peers", "node_modules"), 12 << 20, hasExt(".js", ".ts", ".md", ".mjs", ".cjs"), readPlain},
		{"man pages", "/usr/share/man", 16 << 20, hasExt(".gz"), readGzip},
	}
	var files []cleanFile
	sizes := map[string]int{}
	for _, src := range sources {
		if src.root == "" {
			continue
		}
		if _, err := os.Stat(src.root); err != nil {
			continue
		}
		err := filepath.WalkDir(src.root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // unreadable: skip
			}
			rel, _ := filepath.Rel(src.root, p)
			if d.IsDir() {
				if rel == "cache" || d.Name() != "." && skippedPath(rel) {
					return filepath.SkipDir
				}
				return nil
			}
			if sizes[src.name] >= src.most {
				return filepath.SkipAll
			}
			if !src.keep(p) || skippedPath(rel) {
				return nil
			}
			info, err := d.Info()
			if err != nil || info.Size() > 2<<20 {
				return nil // generated tables, bundles
			}
			text, err := src.read(p)
			if err != nil {
				return nil
			}
			files = append(files, cleanFile{p, text})
			sizes[src.name] += len(text)
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("while reading %s: %w", src.root, err)
		}
	}
	return files, sizes, nil
}
