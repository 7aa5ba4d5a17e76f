package main

import (
	"fmt"
	"slices"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/policy"
)

// naive decides by scanning every rule of every policy, with the same globs
// and conditions as the engine but no index: the baseline the engine is
// measured against.
type naive struct {
	policies []naivePolicy
	// conditionRuns counts condition evaluations, to show that the scenario
	// with a condition really runs it.
	conditionRuns int
}

type naivePolicy struct {
	namespace string
	subjects  []v1alpha1.Subject
	rules     []naiveRule
}

type naiveRule struct {
	level int
	risks []v1alpha1.Risk
	globs []*policy.Glob
	when  *policy.Condition
}

func newNaive(list []v1alpha1.ToolPolicy) (*naive, error) {
	n := &naive{}
	for _, tp := range list {
		np := naivePolicy{namespace: tp.Namespace, subjects: tp.Spec.Subjects}
		for i, r := range tp.Spec.Rules {
			nr := naiveRule{level: levelOf(r.Decision), risks: r.Risks}
			for _, pattern := range r.Tools {
				g, err := policy.CompileGlob(pattern, policy.NameGlob)
				if err != nil {
					return nil, fmt.Errorf("while compiling %s rules[%d]: %w", tp.Name, i, err)
				}
				nr.globs = append(nr.globs, g)
			}
			if r.When != "" {
				c, err := policy.CompileCondition(r.When)
				if err != nil {
					return nil, fmt.Errorf("while compiling %s rules[%d]: %w", tp.Name, i, err)
				}
				nr.when = c
			}
			np.rules = append(np.rules, nr)
		}
		n.policies = append(n.policies, np)
	}
	return n, nil
}

// levels order decisions by restriction; anything else counts as deny.
var levels = map[v1alpha1.Decision]int{v1alpha1.DecisionAllow: 1, v1alpha1.DecisionAsk: 2, v1alpha1.DecisionDeny: 3}

func levelOf(d v1alpha1.Decision) int {
	if l, ok := levels[d]; ok {
		return l
	}
	return 3
}

var decisionOf = []v1alpha1.Decision{v1alpha1.DecisionDeny, v1alpha1.DecisionAllow, v1alpha1.DecisionAsk, v1alpha1.DecisionDeny}

func (n *naive) decide(s policy.Subject, c policy.ToolCall) v1alpha1.Decision {
	top := 0
	var conditional []*naiveRule
	username := s.Username()
	for i := range n.policies {
		p := &n.policies[i]
		if p.namespace != c.Namespace || !subjectMatches(p.subjects, s, username) {
			continue
		}
		for j := range p.rules {
			r := &p.rules[j]
			if !r.matches(c) {
				continue
			}
			if r.when != nil {
				conditional = append(conditional, r)
			} else {
				top = max(top, r.level)
			}
		}
	}
	for _, r := range conditional {
		if top == 3 {
			break
		}
		n.conditionRuns++
		ok, err := r.when.Eval(s, c)
		if err != nil {
			return v1alpha1.DecisionDeny
		}
		if ok {
			top = max(top, r.level)
		}
	}
	if top == 1 && c.Risk == v1alpha1.RiskDestructive {
		top = 2
	}
	return decisionOf[top]
}

func (r *naiveRule) matches(c policy.ToolCall) bool {
	if len(r.risks) > 0 && !slices.Contains(r.risks, c.Risk) {
		return false
	}
	if len(r.globs) == 0 {
		return true
	}
	for _, g := range r.globs {
		if g.Match(c.Name) {
			return true
		}
	}
	return false
}

func subjectMatches(subjects []v1alpha1.Subject, s policy.Subject, username string) bool {
	for _, sub := range subjects {
		switch sub.Kind {
		case v1alpha1.SubjectServiceAccount:
			if s.Kind == v1alpha1.SubjectServiceAccount && sub.Namespace == s.Namespace && sub.Name == s.Name {
				return true
			}
		case v1alpha1.SubjectUser:
			if sub.Name == username {
				return true
			}
		case v1alpha1.SubjectGroup:
			if slices.Contains(s.Groups, sub.Name) {
				return true
			}
		}
	}
	return false
}
