package policy

import (
	"regexp"
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
// string tests on an argument: x.startsWith(…), x.endsWith(…) and
// x.matches(…) with a pattern anchored by ^ or $ (after any (?flags)), where
// x is args.<name> itself, or the variable of a comprehension over it
// (args.paths.exists(p, p.startsWith(…)) tests each of args.paths); and
// path.clean(x).startsWith(…) and uri.canonical(x).startsWith(…), which
// the lints look at for their prefix. A condition that does not parse has
// neither: compiling reports it.
func readArgs(expr string) ([]argRead, []prefixTest) {
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
	var reads []argRead
	var tests []prefixTest
	// elements maps a comprehension's variable to the argument it ranges
	// over. Pre-order visits a comprehension before the tests inside it.
	elements := map[string]string{}
	celast.PreOrderVisit(ast.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		if key, ok := argKey(e); ok {
			inHas := e.Kind() == celast.SelectKind && e.AsSelect().IsTestOnly()
			i := slices.IndexFunc(reads, func(r argRead) bool { return r.key == key })
			switch {
			case i < 0:
				reads = append(reads, argRead{key: key, onlyHas: inHas})
			case !inHas:
				reads[i].onlyHas = false
			}
		}
		if e.Kind() == celast.ComprehensionKind {
			c := e.AsComprehension()
			if key, ok := argKey(c.IterRange()); ok {
				elements[c.IterVar()] = key
			}
		}
		if t, ok := asPrefixTest(e, elements); ok {
			tests = append(tests, t)
		}
	}))
	return reads, tests
}

// argRead is an argument a condition reads, and whether it only tests
// that it is there (has(args.x)).
type argRead struct {
	key     string
	onlyHas bool
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

// argumentOf reports which argument e is: args.<key> itself (not
// has(args.<key>)), or the variable of a comprehension over it, written
// as the condition writes it.
func argumentOf(e celast.Expr, elements map[string]string) (key, subject string, ok bool) {
	if e.Kind() == celast.SelectKind && e.AsSelect().IsTestOnly() {
		return "", "", false
	}
	if key, ok := argKey(e); ok {
		return key, "args." + key, true
	}
	if e.Kind() == celast.IdentKind {
		if key, ok := elements[e.AsIdent()]; ok {
			return key, e.AsIdent(), true
		}
	}
	return "", "", false
}

// cleanedBy reports whether e is path.clean(x) or uri.canonical(x) of an
// argument x, and which of the two.
func cleanedBy(e celast.Expr, elements map[string]string) (fn, key, subject string, ok bool) {
	if e.Kind() != celast.CallKind {
		return "", "", "", false
	}
	c := e.AsCall()
	if len(c.Args()) != 1 {
		return "", "", "", false
	}
	fn = c.FunctionName()
	if c.IsMemberFunction() && c.Target().Kind() == celast.IdentKind {
		fn = c.Target().AsIdent() + "." + fn
	}
	if fn != "path.clean" && fn != "uri.canonical" {
		return "", "", "", false
	}
	key, subject, ok = argumentOf(c.Args()[0], elements)
	return fn, key, subject, ok
}

// regexFlags is a leading group of flags, (?i) or (?is): the pattern's
// anchor comes after it.
var regexFlags = regexp.MustCompile(`^(\(\?[a-zA-Z]+\))+`)

// asPrefixTest reports whether e is a string test on an argument.
func asPrefixTest(e celast.Expr, elements map[string]string) (prefixTest, bool) {
	if e.Kind() != celast.CallKind {
		return prefixTest{}, false
	}
	c := e.AsCall()
	fn := c.FunctionName()
	var target, pattern celast.Expr
	switch {
	case c.IsMemberFunction() && len(c.Args()) == 1:
		target, pattern = c.Target(), c.Args()[0]
	case !c.IsMemberFunction() && fn == overloads.Matches && len(c.Args()) == 2:
		target, pattern = c.Args()[0], c.Args()[1]
	default:
		return prefixTest{}, false
	}
	lit, _ := stringLiteral(pattern)
	if cleaner, key, subject, ok := cleanedBy(target, elements); ok {
		if fn != overloads.StartsWith {
			return prefixTest{}, false
		}
		return prefixTest{fn: fn, arg: key, subject: subject, lit: lit, cleanedBy: cleaner}, true
	}
	key, subject, ok := argumentOf(target, elements)
	if !ok {
		return prefixTest{}, false
	}
	switch fn {
	case overloads.StartsWith, overloads.EndsWith:
	case overloads.Matches:
		re := regexFlags.ReplaceAllString(lit, "")
		if !strings.HasPrefix(re, "^") && !strings.HasPrefix(re, `\A`) && !strings.HasSuffix(re, "$") && !strings.HasSuffix(re, `\z`) {
			return prefixTest{}, false
		}
	default:
		return prefixTest{}, false
	}
	return prefixTest{fn: fn, arg: key, subject: subject, lit: lit}, true
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
