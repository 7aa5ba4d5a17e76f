package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	mcpv1alpha1 "github.com/mcp-operator/mcp-operator/api/v1alpha1"
)

func TestBackoffDoublesUpToTheCap(t *testing.T) {
	r := restartSettingsOf(mcpv1alpha1.RestartPolicy{})
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i, w := range want {
		if got := r.backoff(int32(i + 1)); got != w {
			t.Errorf("backoff(%d) = %v, want %v", i+1, got, w)
		}
	}
	small := restartSettingsOf(mcpv1alpha1.RestartPolicy{BackoffBase: metav1.Duration{Duration: 3 * time.Second}, BackoffCap: metav1.Duration{Duration: 5 * time.Second}})
	if got := small.backoff(2); got != 5*time.Second {
		t.Errorf("backoff(2) with base 3s, cap 5s = %v, want 5s", got)
	}
	if got := small.backoff(1000); got != 5*time.Second {
		t.Errorf("backoff(1000) = %v, want the cap", got)
	}
}

func TestThreeRestartsThenGiveUp(t *testing.T) {
	r := restartSettingsOf(mcpv1alpha1.RestartPolicy{})
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var st mcpv1alpha1.RestartStatus
	for i, wait := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second} {
		out := recordCrash(&st, r, "Error (exit code 1)", now)
		if out.giveUp {
			t.Fatalf("crash %d: gave up, want a restart", i+1)
		}
		if !out.restartAt.Equal(now.Add(wait)) {
			t.Errorf("crash %d: restart at %v, want now+%v", i+1, out.restartAt, wait)
		}
		if st.Consecutive != int32(i+1) || st.Total != int32(i+1) {
			t.Errorf("crash %d: consecutive %d total %d", i+1, st.Consecutive, st.Total)
		}
	}
	if out := recordCrash(&st, r, "OOMKilled", now); !out.giveUp {
		t.Fatal("4th crash: restarted, want give up")
	}
	if st.NextRestartTime != nil || st.LastExitReason != "OOMKilled" || st.Total != 4 {
		t.Errorf("after giving up: %+v", st)
	}
}

func TestDisabledRestartsGiveUpAtOnce(t *testing.T) {
	r := restartSettingsOf(mcpv1alpha1.RestartPolicy{Enabled: ptr.To(false)})
	var st mcpv1alpha1.RestartStatus
	if out := recordCrash(&st, r, "Error", time.Now()); !out.giveUp {
		t.Fatal("restart policy disabled, but the crash was restarted")
	}
}

func TestStableServerStartsCountingAgain(t *testing.T) {
	r := restartSettingsOf(mcpv1alpha1.RestartPolicy{})
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	st := mcpv1alpha1.RestartStatus{Consecutive: 2, Total: 5}
	if markStable(&st, r, now.Add(-119*time.Second), now) {
		t.Error("reset after 119s, want only after stableAfter (2m)")
	}
	if !markStable(&st, r, now.Add(-2*time.Minute), now) || st.Consecutive != 0 || st.Total != 5 {
		t.Errorf("after 2m up: %+v, want consecutive 0 and total kept", st)
	}
	if markStable(&st, r, now.Add(-time.Hour), now) {
		t.Error("a second reset reported a change")
	}
}
