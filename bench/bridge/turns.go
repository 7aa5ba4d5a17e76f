package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/mcp-operator/mcp-operator/bench/internal/benchutil"
)

// The comparison's calls are taken in turns across all targets, sequential
// calls and load alike, so that a drift of the shared machine or a burst
// of someone else's work hits every target alike rather than the one whose
// calls ran in it. Before each turn every child of the run goes quiet
// (quietWaits), so that no target's work still running anywhere (a load's
// last calls, a GC, an audit flush, span batches to Jaeger) lands in
// another's turn; after a turn the target's own hop and upstream go quiet
// again before the end reading, so that work they do after answering is
// charged to the target that caused it.

// turnSizes splits n calls into turns of chunk, the last turn taking the
// remainder.
func turnSizes(n, chunk int) []int {
	var out []int
	for ; n > 0; n -= chunk {
		out = append(out, min(n, chunk))
	}
	return out
}

// order is the targets' order in the pass-th pass: the start rotates each
// two passes and every other pass runs backwards, so that each target
// follows a different one from pass to pass (a rotation alone keeps each
// behind the same one).
func order[T any](ts []T, pass int) []T {
	out := make([]T, len(ts))
	for i := range ts {
		out[i] = ts[(i+pass/2)%len(ts)]
	}
	if pass%2 == 1 {
		slices.Reverse(out)
	}
	return out
}

// cpuOf is a target's processes' CPU: its hop's (none when direct) and
// its upstream's. A process that reads nothing fails the run: a reading
// of 0 would pass any comparison.
func cpuOf(t *target) (hop, up time.Duration, err error) {
	if t.pid != 0 {
		if hop, err = benchutil.ProcCPU(t.pid); err != nil {
			return 0, 0, err
		}
	}
	up, err = benchutil.ProcCPU(t.up.pid)
	return hop, up, err
}

// sequentialRound times one round's sequential calls of every target in
// turns of chunk calls, each target in its own session kept open across
// turns.
func sequentialRound(ctx context.Context, targets []*target, round, calls, chunk int, all []int, quiet *quietWaits) error {
	sizes := turnSizes(calls, chunk)
	for i, n := range sizes {
		for _, t := range order(targets, round*len(sizes)+i) {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := quiet.wait(all...); err != nil {
				return err
			}
			hop0, up0, err := cpuOf(t)
			if err != nil {
				return err
			}
			lat, err := timeCalls(ctx, t.seq, t.tool, t.up.args, n)
			if err != nil {
				return fmt.Errorf("%s to %s: %w", t.name(), t.up.name, err)
			}
			if err := quiet.settle(t.pid, t.up.pid); err != nil {
				return err
			}
			hop1, up1, err := cpuOf(t)
			if err != nil {
				return err
			}
			hop, up := hop1-hop0, up1-up0
			t.hopCPU += hop
			t.upCP += up
			t.seqCalls += int64(len(lat))
			t.lat = append(t.lat, lat...)
			t.chunkCPU = append(t.chunkCPU, float64(hop+up)/float64(len(lat)))
			t.chunkUp = append(t.chunkUp, float64(up)/float64(len(lat)))
		}
	}
	return nil
}

// loadRound runs one round's load of every target in slices of slice,
// each target's sessions open across the run (idle while others run:
// mcp-go's client sends nothing between calls, no GET stream, no ping),
// and sums each target's calls and time.
func loadRound(ctx context.Context, targets []*target, round int, loadFor, slice time.Duration, all []int, quiet *quietWaits) error {
	nSlices := int(max(1, (loadFor+slice/2)/slice))
	for i := range nSlices {
		for _, t := range order(targets, round*nSlices+i) {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := quiet.wait(all...); err != nil {
				return err
			}
			start := time.Now()
			n, err := callFor(ctx, t.load, t.tool, t.up.args, slice)
			if err != nil {
				return fmt.Errorf("%s to %s under load: %w", t.name(), t.up.name, err)
			}
			took := time.Since(start)
			t.loadCalls += n
			t.loadTime += took
			t.sliceRate = append(t.sliceRate, float64(n)/took.Seconds())
			t.rss = max(t.rss, benchutil.RSS(t.pid))
		}
	}
	return nil
}

// quietWaits lets processes go quiet: until their CPU over quietWindow is
// under quietCPU together, for at most quietLimit. It counts the waits and
// those cut at the limit, before turns and after them apart.
type quietWaits struct {
	before, after waitCount
}

type waitCount struct {
	waits, capped int
	total         time.Duration
}

const (
	quietWindow = 100 * time.Millisecond
	quietCPU    = 2 * time.Millisecond // 1 % of two cores
	quietLimit  = time.Second
)

// wait is the wait before a turn, on every child of the run.
func (q *quietWaits) wait(pids ...int) error { return q.before.until(pids) }

// settle is the wait after a turn, on the target's own processes (0, a
// direct target's hop, is skipped).
func (q *quietWaits) settle(pids ...int) error {
	return q.after.until(slices.DeleteFunc(pids, func(p int) bool { return p == 0 }))
}

func (c *waitCount) until(pids []int) error {
	start := time.Now()
	cpu := func() (sum time.Duration, err error) {
		for _, pid := range pids {
			d, err := benchutil.ProcCPU(pid)
			if err != nil {
				return 0, err
			}
			sum += d
		}
		return sum, nil
	}
	for {
		before, err := cpu()
		if err != nil {
			return err
		}
		time.Sleep(quietWindow)
		after, err := cpu()
		if err != nil {
			return err
		}
		if after-before <= quietCPU {
			break
		}
		if time.Since(start) >= quietLimit {
			c.capped++
			break
		}
	}
	c.waits++
	c.total += time.Since(start)
	return nil
}

func (c waitCount) String() string {
	return fmt.Sprintf("%d waits, %s on average, %d cut at %s", c.waits, (c.total / time.Duration(max(c.waits, 1))).Round(time.Millisecond), c.capped, quietLimit)
}

func (q quietWaits) String() string {
	return fmt.Sprintf("quiet (CPU under %s in %s) before each turn, every child: %s; after each sequential turn, its hop and upstream: %s",
		quietCPU, quietWindow, q.before, q.after)
}
