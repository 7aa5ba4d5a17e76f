package controller

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/textcut"
)

// The restart policy (docs/mcpserver.md) as pure functions over status, so the
// crash → restarting → permanently failed sequence survives a controller
// restart and is table-tested with a fixed clock.

// restartSettings are a server's restart policy with the defaults applied.
type restartSettings struct {
	enabled     bool
	maxRestarts int32
	base, cap   time.Duration
	stableAfter time.Duration
}

func restartSettingsOf(p mcpv1alpha1.RestartPolicy) restartSettings {
	r := restartSettings{enabled: true, maxRestarts: 3, base: 500 * time.Millisecond, cap: 10 * time.Second, stableAfter: 2 * time.Minute}
	if p.Enabled != nil {
		r.enabled = *p.Enabled
	}
	if p.MaxRestarts != nil {
		r.maxRestarts = *p.MaxRestarts
	}
	if p.BackoffBase.Duration > 0 {
		r.base = p.BackoffBase.Duration
	}
	if p.BackoffCap.Duration > 0 {
		r.cap = p.BackoffCap.Duration
	}
	if p.StableAfter.Duration > 0 {
		r.stableAfter = p.StableAfter.Duration
	}
	return r
}

// backoff is the wait before the n-th restart in a row (n ≥ 1): base, then
// doubling, never above cap.
func (r restartSettings) backoff(n int32) time.Duration {
	d := r.base
	for i := int32(1); i < n && d < r.cap; i++ {
		d *= 2
	}
	return min(d, r.cap)
}

// crashOutcome is what the controller does after a crash.
type crashOutcome struct {
	// giveUp: no new pod; the server is PermanentlyFailed.
	giveUp bool
	// restartAt is when the next pod may start (when not giving up).
	restartAt time.Time
}

// recordCrash counts a crash seen at now in st and decides what follows: the
// n-th crash in a row is restarted after backoff(n) while n ≤ maxRestarts;
// the next one gives up.
func recordCrash(st *mcpv1alpha1.RestartStatus, r restartSettings, reason string, now time.Time) crashOutcome {
	st.Consecutive++
	st.Total++
	st.LastExitReason = textcut.Cut(reason, 250)
	st.LastCrashTime = ptrTime(now)
	if !r.enabled || st.Consecutive > r.maxRestarts {
		st.NextRestartTime = nil
		return crashOutcome{giveUp: true}
	}
	at := now.Add(r.backoff(st.Consecutive))
	st.NextRestartTime = ptrTime(at)
	return crashOutcome{restartAt: at}
}

// markStable starts the crash count over once the server has been up for
// stableAfter; it reports whether it changed anything.
func markStable(st *mcpv1alpha1.RestartStatus, r restartSettings, upSince, now time.Time) bool {
	if st.Consecutive == 0 || now.Sub(upSince) < r.stableAfter {
		return false
	}
	st.Consecutive = 0
	st.NextRestartTime = nil
	return true
}

// ptrTime keeps restart times at microsecond precision, as the API server
// stores them, so a status written and read back compares equal.
func ptrTime(t time.Time) *metav1.MicroTime {
	mt := metav1.NewMicroTime(t.Truncate(time.Microsecond))
	return &mt
}
