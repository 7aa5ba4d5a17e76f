package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/interpreter"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// ConditionCostLimit is the CEL cost budget of one `when` evaluation. A
// condition that needs more is stopped and its call denied: a policy must not
// be able to stall the bridge with a large argument (an all() over an all()
// of a long list, say). Ordinary conditions cost well under 100.
const ConditionCostLimit = 100_000

// maxConditionLen matches the CRD's limit on `when`.
const maxConditionLen = 4096

// Condition is a compiled `when` expression.
type Condition struct {
	expr string
	prog cel.Program
}

// String is the CEL source of the condition.
func (c *Condition) String() string { return c.expr }

var conditionEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("tool", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("subject", cel.MapType(cel.StringType, cel.DynType)),
		// JSON numbers arrive as doubles: let args.limit > 100 compare them
		// with integer literals.
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(maxConditionLen),
		pathClean,
		uriCanonical,
	)
})

// CompileCondition type-checks a `when` expression: it must be a boolean
// over args, tool and subject. The error carries CEL's message with the line
// and column.
func CompileCondition(expr string) (*Condition, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, errors.New("empty CEL expression")
	}
	env, err := conditionEnv()
	if err != nil {
		return nil, fmt.Errorf("while creating the CEL environment: %w", err)
	}
	ast, issues := env.CompileSource(common.NewStringSource(expr, "when"))
	if issues != nil && issues.Err() != nil {
		return nil, fmt.Errorf("CEL: %s", celIssues(issues.Err().Error()))
	}
	if !ast.OutputType().IsExactType(cel.BoolType) && !ast.OutputType().IsExactType(cel.DynType) {
		return nil, fmt.Errorf("CEL: the expression gives %s, but a condition must give a bool", ast.OutputType())
	}
	prog, err := env.Program(ast, cel.CostLimit(ConditionCostLimit))
	if err != nil {
		return nil, fmt.Errorf("CEL: while building the program: %w", err)
	}
	return &Condition{expr: expr, prog: prog}, nil
}

// celIssues keeps CEL's messages with their line:column and drops the
// source excerpts under them, so a status condition reads on one line.
func celIssues(text string) string {
	var msgs []string
	for _, line := range strings.Split(text, "\n") {
		if msg, ok := strings.CutPrefix(line, "ERROR: "); ok {
			msgs = append(msgs, strings.TrimSuffix(msg, " (in container '')"))
		}
	}
	if len(msgs) == 0 {
		return text
	}
	return strings.Join(msgs, "; ")
}

// Eval evaluates the condition for one tool call. An error means the call
// must be denied: the condition failed (a missing key, a wrong type, a
// result that is not a bool) or ran over ConditionCostLimit.
func (c *Condition) Eval(subject Subject, call ToolCall) (bool, error) {
	return c.eval(&conditionInput{subject: subject, call: call})
}

func (c *Condition) eval(in *conditionInput) (bool, error) {
	out, _, err := c.prog.Eval(in)
	if err != nil {
		var cancelled interpreter.EvalCancelledError
		if errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
			return false, fmt.Errorf("the condition ran over its cost budget of %d", ConditionCostLimit)
		}
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("the condition gave %s, not a bool", out.Type().TypeName())
	}
	return b, nil
}

// conditionInput is the activation of one evaluation: it hands CEL the
// call's arguments as they are and builds tool and subject only when a
// condition looks at them.
type conditionInput struct {
	subject Subject
	call    ToolCall
	tool    map[string]any
	subj    map[string]any
}

var _ interpreter.Activation = (*conditionInput)(nil)

func (in *conditionInput) ResolveName(name string) (any, bool) {
	switch name {
	case "args":
		if in.call.Args == nil && len(in.call.RawArgs) > 0 {
			// Decoded once per decision (in.call is this input's copy).
			// Text that is not an object leaves args unresolved: the
			// condition fails, which denies the call.
			if err := json.Unmarshal(in.call.RawArgs, &in.call.Args); err != nil {
				return nil, false
			}
		}
		if in.call.Args == nil {
			return map[string]any{}, true
		}
		return in.call.Args, true
	case "tool":
		if in.tool == nil {
			in.tool = in.call.celValue()
		}
		return in.tool, true
	case "subject":
		if in.subj == nil {
			in.subj = in.subject.celValue()
		}
		return in.subj, true
	}
	return nil, false
}

func (in *conditionInput) Parent() interpreter.Activation { return nil }

// celValue is the tool as `when` conditions see it.
func (c *ToolCall) celValue() map[string]any {
	ann := map[string]any{}
	if a := c.Annotations; a != nil {
		for key, v := range map[string]*bool{
			"readOnlyHint":    a.ReadOnlyHint,
			"destructiveHint": a.DestructiveHint,
			"idempotentHint":  a.IdempotentHint,
			"openWorldHint":   a.OpenWorldHint,
		} {
			if v != nil {
				ann[key] = *v
			}
		}
	}
	return map[string]any{
		"name":        c.Name,
		"server":      c.Server,
		"namespace":   c.Namespace,
		"risk":        string(effectiveRisk(c.Risk)),
		"annotations": ann,
	}
}

// effectiveRisk is the risk a decision is made at: the default for an MCP
// tool is network; a value the engine does not know is taken as the worst.
func effectiveRisk(r v1alpha1.Risk) v1alpha1.Risk {
	switch r {
	case "":
		return v1alpha1.RiskNetwork
	case v1alpha1.RiskRead, v1alpha1.RiskWrite, v1alpha1.RiskNetwork, v1alpha1.RiskDestructive:
		return r
	}
	return v1alpha1.RiskDestructive
}
