package policy

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// TestAdmissionRegexAgreesWithLint: the admission policy shipped in
// config/admission warns at apply time about the raw prefix tests the
// controller's lint finds in the object alone, by one regular expression
// over the `when` text (CEL's matches is RE2, as Go's regexp). Each
// condition here is warned about by both or by neither, apart from the
// lint's own: comprehensions.
func TestAdmissionRegexAgreesWithLint(t *testing.T) {
	re := admissionRawPrefixRegex(t)
	cases := []string{
		"args.path.startsWith('/data/public/')",
		"args.filePath.endsWith('.pem')",
		"args.file_path.startsWith('/x/')",
		"args.FILE_NAME.startsWith('/x/')",
		"args.PATH.startsWith('/x/')",
		"args.myPATH.startsWith('/x/')",
		"args.path2.startsWith('/x/')",
		"args.src2path.startsWith('/x/')",
		"args.baseURL.startsWith('https://x/')",
		"args.targetUrl.startsWith('https://x/')",
		"args.urls.startsWith('https://x/')",
		"args.FileName.startsWith('/x/')",
		"args['file-path'].startsWith('/x/')",
		"args['file.path'].startsWith('/x/')",
		"args[\"source_file\"].startsWith('/x/')",
		"args.path.matches('^/data/')",
		"args.path.matches('(?i)^/data/')",
		"args.path.matches('\\\\.pem$')",
		"args.path.matches(r'\\A/data/')",
		"matches(args.path, '^/data/')",
		"matches(args['dir'], '[.]pem$')",
		"size(args) > 0 &&\n  args.path\n    .startsWith('/data/')",
		// Not path or URL arguments, or not raw, or not prefix tests.
		"args.profile.startsWith('x')",
		"args.content.startsWith('/x/')",
		"args.XMLPath.startsWith('/x/')",
		"args.pathology.startsWith('/x/')",
		"args.filer.startsWith('/x/')",
		"path.clean(args.path).startsWith('/data/public/')",
		"uri.canonical(args.url).startsWith('https://example.com/')",
		"args.path.matches('secret')",
		"has(args.path) && args.path == '/a'",
		"args.content.path.startsWith('/x/')",
	}
	for _, cond := range cases {
		tp := newPolicy("team", "p", forSA("team", "agent"), withToolRule(toolRule(v1alpha1.DecisionDeny, "mcp.fs.*"), when(cond)))
		lint := len(mustCompile(t, &tp).Lint(&tp.Spec, nil)) > 0
		if admission := re.MatchString(cond); admission != lint {
			t.Errorf("%q: the admission policy warns %v, the lint %v", cond, admission, lint)
		}
	}
}

// admissionRawPrefixRegex is the regular expression of the admission
// policy's rawPrefixTests variable.
func admissionRawPrefixRegex(t *testing.T) *regexp.Regexp {
	t.Helper()
	data, err := os.ReadFile("../../config/admission/toolpolicy_lints.yaml")
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(data), "\n---")
	var vap struct {
		Spec struct {
			Variables []struct{ Name, Expression string }
		}
	}
	if err := yaml.Unmarshal([]byte(first), &vap); err != nil {
		t.Fatal(err)
	}
	for _, v := range vap.Spec.Variables {
		if v.Name != "rawPrefixTests" {
			continue
		}
		_, rest, ok := strings.Cut(v.Expression, "r'''")
		pattern, _, ok2 := strings.Cut(rest, "'''")
		if !ok || !ok2 {
			t.Fatalf("rawPrefixTests holds no r'''...''' pattern: %s", v.Expression)
		}
		return regexp.MustCompile(pattern)
	}
	t.Fatal("the admission policy has no variable rawPrefixTests")
	return nil
}
