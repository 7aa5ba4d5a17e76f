// Command gitleaksgen writes the secret shapes of gitleaks' default rule set,
// at a pinned version, as Go data for internal/redact (gitleaks_rules.go), and
// every rule's own true- and false-positive examples as the test corpus
// (internal/redact/testdata/gitleaks-examples.json).
//
// gitleaks builds its default config by running Go code (cmd/generate/config):
// each rule is a function that also checks the rule against its examples.
// gitleaksgen runs that same code on a scratch copy of the pinned module, with
// two files of its own in place of gitleaks' template (rules.tmpl: the config
// written one Go-quoted field a line) and of its example check
// (validate.go.in: the examples written out instead of checked). Nothing of
// gitleaks is kept in this repository but the data these write.
//
// gitleaks draws its true-positive examples at random (from each rule's
// regexp), so the corpus differs at each run: -check (what `make verify`
// runs) wants gitleaks_rules.go as it is and the same number of examples
// for each rule, and writes nothing.
//
// Usage: go run ./hack/gitleaksgen -out internal/redact [-check] (or go generate ./internal/redact)
package main

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// module and version pin the rule set; a new version is a change of this line
// and a `go generate ./internal/redact`.
const (
	module  = "github.com/zricethezav/gitleaks/v8"
	version = "v8.30.1"
)

//go:embed rules.tmpl
var rulesTemplate []byte

//go:embed validate.go.in
var validateGo []byte

func main() {
	out := flag.String("out", "internal/redact", "directory of the redact package")
	check := flag.Bool("check", false, "only check that the files in -out are what this version writes")
	flag.Parse()
	if err := run(*out, *check); err != nil {
		fmt.Fprintln(os.Stderr, "gitleaksgen:", err)
		os.Exit(1)
	}
}

func run(out string, check bool) error {
	src, err := moduleDir()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "gitleaksgen-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	work := filepath.Join(tmp, "gitleaks")
	if err := copyTree(src, work); err != nil {
		return fmt.Errorf("while copying the gitleaks module: %w", err)
	}
	gen := filepath.Join(work, "cmd", "generate", "config")
	if err := os.WriteFile(filepath.Join(gen, "rules", "config.tmpl"), rulesTemplate, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(gen, "utils", "validate.go"), validateGo, 0o644); err != nil {
		return err
	}
	rulesFile, examplesFile := filepath.Join(tmp, "rules.txt"), filepath.Join(tmp, "examples.jsonl")
	cmd := exec.Command("go", "run", ".", rulesFile)
	cmd.Dir = gen
	cmd.Env = append(os.Environ(), "GITLEAKSGEN_DUMP="+examplesFile, "GOWORK=off", "GOFLAGS=-mod=mod")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("while running gitleaks' config generator: %w", err)
	}
	cfg, err := parseRules(rulesFile)
	if err != nil {
		return err
	}
	examples, err := parseExamples(examplesFile)
	if err != nil {
		return err
	}
	code, err := goSource(cfg)
	if err != nil {
		return err
	}
	corpus, err := corpusJSON(cfg, examples)
	if err != nil {
		return err
	}
	rulesPath, corpusPath := filepath.Join(out, "gitleaks_rules.go"), filepath.Join(out, "testdata", "gitleaks-examples.json")
	if check {
		return checkFiles(rulesPath, code, corpusPath, corpus)
	}
	if err := os.WriteFile(rulesPath, code, 0o644); err != nil {
		return err
	}
	return os.WriteFile(corpusPath, corpus, 0o644)
}

func checkFiles(rulesPath string, code []byte, corpusPath string, corpus []byte) error {
	have, err := os.ReadFile(rulesPath)
	if err != nil {
		return err
	}
	if !bytes.Equal(have, code) {
		return fmt.Errorf("%s is not what gitleaks %s gives: run 'go generate ./internal/redact' and commit", rulesPath, version)
	}
	have, err = os.ReadFile(corpusPath)
	if err != nil {
		return err
	}
	var a, b []examples
	if err := json.Unmarshal(have, &a); err != nil {
		return fmt.Errorf("%s: %w", corpusPath, err)
	}
	if err := json.Unmarshal(corpus, &b); err != nil {
		return err
	}
	count := func(es []examples) string {
		var sb strings.Builder
		for _, e := range es {
			fmt.Fprintf(&sb, "%s %d %d\n", e.ID, len(e.TPs), len(e.FPs))
		}
		return sb.String()
	}
	if count(a) != count(b) {
		return fmt.Errorf("%s does not hold the examples of gitleaks %s's rules: run 'go generate ./internal/redact' and commit", corpusPath, version)
	}
	fmt.Printf("%s and %s are up to date with gitleaks %s\n", rulesPath, corpusPath, version)
	return nil
}

// moduleDir downloads the pinned module (checked against go.sum's database)
// and returns where it is.
func moduleDir() (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("while downloading %s@%s: %w", module, version, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(b, &info); err != nil {
		return "", err
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("downloading %s@%s: %s", module, version, info.Error)
	}
	return info.Dir, nil
}

func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
}

type allowlist struct {
	And       bool     // all of its criteria must hold (gitleaks' condition AND)
	Target    string   // what Regexes test: "" the secret, "match", "line"
	Regexes   []string //
	StopWords []string
	Other     bool // it also has path or commit criteria, which never hold for a result
}

type rule struct {
	ID, Regex, Path string
	Group           int
	Entropy         float64
	SkipReport      bool
	Keywords        []string
	Required        []string
	Allowlists      []allowlist
}

type config struct {
	Global []allowlist
	Rules  []rule
}

// parseRules reads what rules.tmpl wrote.
func parseRules(path string) (*config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cfg := &config{}
	var cur *rule
	lists := func() *[]allowlist {
		if cur == nil {
			return &cfg.Global
		}
		return &cur.Allowlists
	}
	last := func() (*allowlist, error) {
		l := *lists()
		if len(l) == 0 {
			return nil, errors.New("an allowlist field before any allowlist")
		}
		return &l[len(l)-1], nil
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		field, value, _ := strings.Cut(line, " ")
		var err error
		switch field {
		case "rule":
			cfg.Rules = append(cfg.Rules, rule{})
			cur = &cfg.Rules[len(cfg.Rules)-1]
			cur.ID, err = strconv.Unquote(value)
		case "regex":
			cur.Regex, err = strconv.Unquote(value)
		case "path":
			cur.Path, err = strconv.Unquote(value)
		case "group":
			cur.Group, err = strconv.Atoi(value)
		case "entropy":
			cur.Entropy, err = strconv.ParseFloat(value, 64)
		case "skipreport":
			cur.SkipReport = true
		case "keyword":
			var k string
			k, err = strconv.Unquote(value)
			cur.Keywords = append(cur.Keywords, strings.ToLower(k))
		case "required":
			var k string
			k, err = strconv.Unquote(value)
			cur.Required = append(cur.Required, k)
		case "allow":
			var cond, target string
			var paths, commits int
			if _, err = fmt.Sscanf(value, "%q %q %d %d", &cond, &target, &paths, &commits); err == nil {
				*lists() = append(*lists(), allowlist{And: cond == "AND", Target: target, Other: paths+commits > 0})
			}
		case "allowregex", "stopword":
			var a *allowlist
			if a, err = last(); err == nil {
				var s string
				if s, err = strconv.Unquote(value); field == "allowregex" {
					a.Regexes = append(a.Regexes, s)
				} else {
					a.StopWords = append(a.StopWords, strings.ToLower(s))
				}
			}
		default:
			err = fmt.Errorf("unknown field %q", field)
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	slices.SortFunc(cfg.Rules, func(a, b rule) int { return strings.Compare(a.ID, b.ID) })
	return cfg, sc.Err()
}

type examples struct {
	ID  string   `json:"id"`
	TPs []string `json:"tps"`
	FPs []string `json:"fps"`
}

func parseExamples(path string) (map[string]examples, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]examples{}
	dec := json.NewDecoder(bytes.NewReader(b))
	for dec.More() {
		var e examples
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out[e.ID] = e
	}
	return out, nil
}

// goSource writes the rules as Go data. Rules that only name files (path),
// and only exist as parts of other rules (skipReport), have nothing to find
// in a result and are left out; the list says which.
func goSource(cfg *config) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by hack/gitleaksgen from %s@%s's default rules; DO NOT EDIT.\n\n", module, version)
	b.WriteString("package redact\n\n")
	fmt.Fprintf(&b, "// gitleaksVersion is the gitleaks release the rules come from.\nconst gitleaksVersion = %q\n\n", version)
	b.WriteString("// gitleaksGlobal is gitleaks' allowlist for every rule.\nvar gitleaksGlobal = ")
	writeAllowlists(&b, cfg.Global)
	b.WriteString("\n\n// gitleaksRules are gitleaks' default rules that can match text.\nvar gitleaksRules = []glRule{\n")
	var skipped []string
	for _, r := range cfg.Rules {
		if r.Regex == "" || r.Path != "" || r.SkipReport {
			skipped = append(skipped, r.ID)
			continue
		}
		fmt.Fprintf(&b, "{ID: %q, Regex: %s", r.ID, quote(r.Regex))
		if r.Group != 0 {
			fmt.Fprintf(&b, ", Group: %d", r.Group)
		}
		if r.Entropy != 0 {
			fmt.Fprintf(&b, ", Entropy: %v", r.Entropy)
		}
		if len(r.Keywords) > 0 {
			fmt.Fprintf(&b, ", Keywords: %#v", r.Keywords)
		}
		if len(r.Allowlists) > 0 {
			b.WriteString(", Allowlists: ")
			writeAllowlists(&b, r.Allowlists)
		}
		b.WriteString("},\n")
	}
	b.WriteString("}\n\n")
	fmt.Fprintf(&b, "// numGitleaksRules is len(gitleaksRules), for the size of Counts.\nconst numGitleaksRules = %d\n\n", len(cfg.Rules)-len(skipped))
	b.WriteString("// gitleaksSkipped are the rules that match file paths or are only parts of other rules.\n")
	fmt.Fprintf(&b, "var gitleaksSkipped = %#v\n", skipped)
	return format.Source(b.Bytes())
}

func writeAllowlists(b *bytes.Buffer, as []allowlist) {
	b.WriteString("[]glAllowlist{")
	for _, a := range as {
		b.WriteString("{")
		var parts []string
		if a.And {
			parts = append(parts, "And: true")
		}
		if a.Other {
			parts = append(parts, "Other: true")
		}
		if a.Target != "" {
			parts = append(parts, fmt.Sprintf("Target: %q", a.Target))
		}
		if len(a.Regexes) > 0 {
			qs := make([]string, len(a.Regexes))
			for i, re := range a.Regexes {
				qs[i] = quote(re)
			}
			parts = append(parts, "Regexes: []string{"+strings.Join(qs, ", ")+"}")
		}
		if len(a.StopWords) > 0 {
			parts = append(parts, fmt.Sprintf("StopWords: %#v", a.StopWords))
		}
		b.WriteString(strings.Join(parts, ", "))
		b.WriteString("},")
	}
	b.WriteString("}")
}

// quote writes a regexp as a raw string where it can.
func quote(s string) string {
	if !strings.Contains(s, "`") && strconv.CanBackquote(s) {
		return "`" + s + "`"
	}
	return strconv.Quote(s)
}

// corpusJSON lists each rule's examples, in rule order; rules left out of
// gitleaks_rules.go keep no examples.
func corpusJSON(cfg *config, ex map[string]examples) ([]byte, error) {
	var list []examples
	for _, r := range cfg.Rules {
		if r.Regex == "" || r.Path != "" || r.SkipReport {
			continue
		}
		e := ex[r.ID]
		e.ID = r.ID
		if e.TPs == nil {
			e.TPs = []string{}
		}
		if e.FPs == nil {
			e.FPs = []string{}
		}
		list = append(list, e)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(list); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
