package policy

import (
	"slices"
	"strings"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
)

// What the lints read in a `when` condition: the arguments it reads and its
// string tests on raw arguments, found in the condition's syntax tree.

// readArgs parses a condition and returns the top-level argument names it
// reads (args.x, args['x'], has(args.x)), in order of first use, and its
// prefix and suffix tests on a raw argument: x.startsWith(…),
// x.endsWith(…) and x.matches(…) with a pattern anchored by ^ or $, where x
// is args.<name> itself rather than path.clean(args.<name>) or
// uri.canonical(args.<name>). A condition that does not parse has
// neither: compiling reports it.
func readArgs(expr string) ([]string, []prefixTest) {
	env, err := conditionEnv()
	if err != nil {
		return nil, nil
	}
	// Parsed, not checked: the shapes looked for are the same, and the
	// policy compiled already (half the cost of linting was checking again).
	ast, issues := env.Parse(expr)
	if issues != nil && issues.Err() != nil {
		return nil, nil
	}
	var reads []string
	var tests []prefixTest
	celast.PreOrderVisit(ast.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		if key, ok := argKey(e); ok && !slices.Contains(reads, key) {
			reads = append(reads, key)
		}
		if t, ok := asPrefixTest(e); ok {
			tests = append(tests, t)
		}
	}))
	return reads, tests
}

// argKey reports whether e is args.<key> or args['<key>'].
func argKey(e celast.Expr) (string, bool) {
	switch e.Kind() {
	case celast.SelectKind:
		s := e.AsSelect()
		if isIdent(s.Operand(), "args") {
			return s.FieldName(), true
		}
	case celast.CallKind:
		c := e.AsCall()
		if c.FunctionName() == operators.Index && len(c.Args()) == 2 && isIdent(c.Args()[0], "args") {
			if lit, ok := stringLiteral(c.Args()[1]); ok {
				return lit, true
			}
		}
	}
	return "", false
}

// asPrefixTest reports whether e is a prefix or suffix test on a raw
// argument.
func asPrefixTest(e celast.Expr) (prefixTest, bool) {
	if e.Kind() != celast.CallKind {
		return prefixTest{}, false
	}
	c := e.AsCall()
	fn := c.FunctionName()
	var subject, pattern celast.Expr
	switch {
	case c.IsMemberFunction() && len(c.Args()) == 1:
		subject, pattern = c.Target(), c.Args()[0]
	case !c.IsMemberFunction() && fn == overloads.Matches && len(c.Args()) == 2:
		subject, pattern = c.Args()[0], c.Args()[1]
	default:
		return prefixTest{}, false
	}
	key, ok := argKey(subject)
	if !ok || subject.Kind() == celast.SelectKind && subject.AsSelect().IsTestOnly() {
		return prefixTest{}, false
	}
	lit, _ := stringLiteral(pattern)
	switch fn {
	case overloads.StartsWith, overloads.EndsWith:
	case overloads.Matches:
		if !strings.HasPrefix(lit, "^") && !strings.HasPrefix(lit, `\A`) && !strings.HasSuffix(lit, "$") && !strings.HasSuffix(lit, `\z`) {
			return prefixTest{}, false
		}
	default:
		return prefixTest{}, false
	}
	return prefixTest{fn: fn, arg: key, lit: lit}, true
}

func isIdent(e celast.Expr, name string) bool {
	return e.Kind() == celast.IdentKind && e.AsIdent() == name
}

func stringLiteral(e celast.Expr) (string, bool) {
	if e.Kind() != celast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}
