package controller

import (
	"hash/fnv"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// When the controller comes back to a server, named once.
const (
	// requeueSoon: right after this reconcile's status write, such as the
	// write that counted a crash (the next reconcile deletes the crashed pod).
	requeueSoon = 100 * time.Millisecond
	// probeRetry: a running pod that failed a probe is probed again this soon;
	// probeFailuresToCrash failures in a row are a crash.
	probeRetry = 2 * time.Second
	// earlyProbeRetry: a pod whose server runs but is not Ready yet, and
	// did not answer a probe, is probed again this soon while it is younger
	// than earlyProbeWindow; most servers listen within a second of their
	// start, and the kubelet reports them Ready up to a second later.
	earlyProbeRetry   = 200 * time.Millisecond
	earlyProbeWindow  = 5 * time.Second
	earlyProbeRetries = int(earlyProbeWindow / earlyProbeRetry)
	// remoteProbeRetry: a remote server that failed its probe.
	remoteProbeRetry = 10 * time.Second
	// credentialsRecheck: Secrets are not watched (the controller may only get
	// them), so a server whose Secret is missing looks again this often.
	credentialsRecheck = 30 * time.Second
	// defaultProbeInterval is spec.probe.interval's default.
	defaultProbeInterval = 5 * time.Minute
	// stableSlack: a crashed server comes back this long after it has been up
	// for stableAfter, to start counting its crashes from zero.
	stableSlack = time.Second
)

// probeFailuresToCrash is how many probes in a row a running pod may fail
// before it counts as crashed: one slow answer is not a crash.
const probeFailuresToCrash = 3

// nextProbe is how long until a server's next periodic probe: every
// interval, at a phase of the interval fixed by the server's UID, and at least
// half an interval from now. Servers that were probed together (created in a
// burst, or all reconciled at a controller start) would otherwise stay
// together: a random jitter per probe spreads them only as a random walk,
// hours at the default interval, while a fixed phase spreads them evenly from
// the second probe on.
func nextProbe(d time.Duration, uid types.UID, now time.Time) time.Duration {
	if d <= 0 {
		d = defaultProbeInterval
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(uid))
	phase := int64(h.Sum64() % uint64(d))
	earliest := now.Add(d / 2).UnixNano()
	wait := ((phase-earliest%int64(d))%int64(d) + int64(d)) % int64(d)
	return d/2 + time.Duration(wait)
}

// earliest is the sooner of two requeue delays, where 0 means none.
func earliest(a, b time.Duration) time.Duration {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}
