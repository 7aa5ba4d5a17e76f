package policy

// ToolVisible reports whether the caller may ever call the tool, whatever
// the arguments: tools/list shows only such tools. It is true when some
// matching rule allows or asks — with or without a `when` condition, since
// some arguments may meet it — and no rule without a condition denies (a
// conditional deny hides nothing: other arguments may pass). call.Args is
// not looked at. A destructive tool the rules allow is visible: it is asked
// about, not refused.
func (e *Engine) ToolVisible(s Subject, call ToolCall) bool {
	risk := effectiveRisk(call.Risk)
	n, ok := cutName(call.Name, call.Server)
	if !ok {
		return false
	}
	var matchBuf, condBuf [64]*rule
	matched, conditional := e.matchTool(s, call, n, riskBit(risk), matchBuf[:0], condBuf[:0])
	if topLevel(matched) == levelDeny {
		return false
	}
	if topLevel(matched) >= levelAllow {
		return true
	}
	for _, r := range conditional {
		if r.level == levelAllow || r.level == levelAsk {
			return true
		}
	}
	return false
}
