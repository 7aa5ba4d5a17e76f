package policy

import (
	"sync"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// SessionGrants are the approvals a human gave in one session, when a rule
// said ask: "allow once" (the next call of that tool) and "allow for this
// session" (every later call of that tool). Prompts (by name) and resources
// (by exact URI) are granted the same way, each kind apart: a grant for a
// tool never covers a prompt of the same name. The bridge keeps one per
// session and drops it with the session (Close), so a grant never outlives
// it.
//
// A grant turns ask into allow, never deny into allow, and only in the modes
// the deciding policy offers (Result.Approval). A destructive tool is never
// offered AllowSession, so each of its calls is asked.
type SessionGrants struct {
	mu      sync.Mutex
	closed  bool
	once    map[target]int
	session map[target]bool
}

// NewSessionGrants returns the empty grants of a new session.
func NewSessionGrants() *SessionGrants {
	return &SessionGrants{once: map[target]int{}, session: map[target]bool{}}
}

// AllowOnce grants the next call of the tool (its namespaced name).
func (g *SessionGrants) AllowOnce(tool string) { g.allowOnce(toolTarget(tool)) }

// AllowSession grants every later call of the tool for the session.
func (g *SessionGrants) AllowSession(tool string) { g.allowSession(toolTarget(tool)) }

// AllowSessionFor grants, for the session, every later request like the one
// r decided: a call of the same tool, a get of the same prompt, a read of
// the same resource. r must come from one of the Engine's Decide methods.
func (g *SessionGrants) AllowSessionFor(r Result) {
	if r.target != (target{}) {
		g.allowSession(r.target)
	}
}

func (g *SessionGrants) allowOnce(t target) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.once[t]++
	}
}

func (g *SessionGrants) allowSession(t target) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.session[t] = true
	}
}

// Close forgets every grant and refuses new ones: the session is over.
func (g *SessionGrants) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	clear(g.once)
	clear(g.session)
}

// Apply turns an ask for r's tool, prompt or resource into allow when the
// session holds a grant the policy offers; an allow-once grant is used up.
// Any other result is returned as it is. The result must come from one of
// the Engine's Decide methods.
func (g *SessionGrants) Apply(r Result) Result {
	if g == nil || r.Decision != v1alpha1.DecisionAsk || r.target == (target{}) {
		return r
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.closed:
		return r
	case g.session[r.target] && r.Approval.Allows(v1alpha1.ApprovalAllowSession):
		r.SourcedFrom = SourceSessionAllow
		r.Reason = "allowed for this session by the user's approval"
	case g.once[r.target] > 0 && r.Approval.Allows(v1alpha1.ApprovalAllowOnce):
		g.once[r.target]--
		if g.once[r.target] == 0 {
			delete(g.once, r.target)
		}
		r.SourcedFrom = SourceSessionAllowOnce
		r.Reason = "allowed once by the user's approval"
	default:
		return r
	}
	r.Decision = v1alpha1.DecisionAllow
	r.Approval = nil
	return r
}
