package policy

import (
	"sync"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

// SessionGrants are the approvals a human gave in one session, when a rule
// said ask: "allow once" (the next call of that tool) and "allow for this
// session" (every later call of that tool). The bridge keeps one per session
// and drops it with the session (Close), so a grant never outlives it.
//
// A grant turns ask into allow, never deny into allow, and only in the modes
// the deciding policy offers (Result.Approval). A destructive tool is never
// offered AllowSession, so each of its calls is asked.
type SessionGrants struct {
	mu      sync.Mutex
	closed  bool
	once    map[string]int
	session map[string]bool
}

// NewSessionGrants returns the empty grants of a new session.
func NewSessionGrants() *SessionGrants {
	return &SessionGrants{once: map[string]int{}, session: map[string]bool{}}
}

// AllowOnce grants the next call of the tool (its namespaced name).
func (g *SessionGrants) AllowOnce(tool string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.once[tool]++
	}
}

// AllowSession grants every later call of the tool for the session.
func (g *SessionGrants) AllowSession(tool string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.session[tool] = true
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

// Apply turns an ask for r's tool into allow when the session holds a grant
// the policy offers; an allow-once grant is used up. Any other result is
// returned as it is. The result must come from Engine.DecideTool.
func (g *SessionGrants) Apply(r Result) Result {
	if g == nil || r.Decision != v1alpha1.DecisionAsk || r.tool == "" {
		return r
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.closed:
		return r
	case g.session[r.tool] && r.Approval.Allows(v1alpha1.ApprovalAllowSession):
		r.SourcedFrom = SourceSessionAllow
		r.Reason = "allowed for this session by the user's approval"
	case g.once[r.tool] > 0 && r.Approval.Allows(v1alpha1.ApprovalAllowOnce):
		g.once[r.tool]--
		if g.once[r.tool] == 0 {
			delete(g.once, r.tool)
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
