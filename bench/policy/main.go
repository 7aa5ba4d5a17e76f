// Command policy measures the cost of one permission decision: the
// compiled, indexed engine against a naive linear scan of the same rules, both
// in the same run, on 1,000 rules across 100 policies and a catalog of 5,000
// tools; once without a CEL condition and once with one condition that runs
// on every call. It prints the medians, the ratio, and whether the engine meets
// the targets (median under 5 µs without CEL, under 20 µs with one condition).
//
// Run it with `make bench-policy`, or `go run ./bench/policy -h` for flags.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/bench/internal/benchutil"
	"github.com/mcp-operator/mcp-operator/internal/policy"
)

func main() {
	sampleCount := flag.Int("samples", 2000, "distinct (caller, tool) calls per round")
	rounds := flag.Int("rounds", 15, "rounds; each times every sample with the engine and with the linear scan, alternating")
	seed := flag.Uint64("seed", 1, "seed of the generated rules and calls")
	flag.Parse()
	fmt.Printf("policy decision benchmark: %d policies, %d rules, %d catalog tools, %d samples x %d rounds, GOMAXPROCS=%d\n",
		policyCount, policyCount*rulesPerPolicy, serverCount*toolsPerServer, *sampleCount, *rounds, runtime.GOMAXPROCS(0))
	ok := true
	for _, sc := range []struct {
		name          string
		withCondition bool
		target        time.Duration
	}{
		{"without CEL", false, 5 * time.Microsecond},
		{"with one CEL condition", true, 20 * time.Microsecond},
	} {
		passed, err := run(sc.name, sc.withCondition, sc.target, *sampleCount, *rounds, *seed)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench/policy: %s: %v\n", sc.name, err)
			os.Exit(1)
		}
		ok = ok && passed
	}
	if !ok {
		os.Exit(1)
	}
}

// run measures one scenario and reports whether the engine met its target.
func run(name string, withCondition bool, target time.Duration, sampleCount, rounds int, seed uint64) (bool, error) {
	rng := rand.New(rand.NewPCG(seed, 2))
	list := policies(rng, withCondition)
	// The CEL environment is built once per process: keep it out of the
	// policies' compile time.
	if _, err := policy.CompileCondition("true"); err != nil {
		return false, err
	}
	compileStart := time.Now()
	engine, errs := policy.Compile(list)
	compileTime := time.Since(compileStart)
	if len(errs) > 0 {
		return false, fmt.Errorf("the generated policies did not compile: %v", errs)
	}
	scan, err := newNaive(list)
	if err != nil {
		return false, err
	}
	calls := samples(rng, catalog(), sampleCount)

	// Both must decide alike, or the comparison means nothing.
	counts := map[v1alpha1.Decision]int{}
	for _, s := range calls {
		got, want := engine.DecideTool(s.subject, s.call).Decision, scan.decide(s.subject, s.call)
		if got != want {
			return false, fmt.Errorf("engine says %s, linear scan %s, for %s calling %s", got, want, s.subject.Username(), s.call.Name)
		}
		counts[got]++
	}
	scan.conditionRuns = 0

	engineTimes := make([]time.Duration, 0, sampleCount*rounds)
	scanTimes := make([]time.Duration, 0, sampleCount*rounds)
	var sink v1alpha1.Decision
	for range rounds {
		for _, s := range calls {
			start := time.Now()
			sink = engine.DecideTool(s.subject, s.call).Decision
			engineTimes = append(engineTimes, time.Since(start))
		}
		for _, s := range calls {
			start := time.Now()
			sink = scan.decide(s.subject, s.call)
			scanTimes = append(scanTimes, time.Since(start))
		}
	}
	_ = sink
	e, n := summarize(engineTimes), summarize(scanTimes)
	met := e.median < target
	fmt.Printf("\n%s (compile of all policies: %s; decisions: %d allow, %d ask, %d deny per round; conditions run per call: %.2f)\n",
		name, compileTime.Round(time.Microsecond), counts[v1alpha1.DecisionAllow], counts[v1alpha1.DecisionAsk], counts[v1alpha1.DecisionDeny],
		float64(scan.conditionRuns)/float64(len(scanTimes)))
	fmt.Printf("  engine       median %8s  p90 %8s  p99 %8s\n", e.median, e.p90, e.p99)
	fmt.Printf("  linear scan  median %8s  p90 %8s  p99 %8s\n", n.median, n.p90, n.p99)
	fmt.Printf("  ratio (linear scan / engine, medians): %.1fx\n", float64(n.median)/float64(e.median))
	fmt.Printf("  target: engine median < %s: %s\n", target, benchutil.Verdict(met))
	return met, nil
}

type summary struct{ median, p90, p99 time.Duration }

func summarize(times []time.Duration) summary {
	slices.Sort(times)
	at := func(q float64) time.Duration { return times[int(q*float64(len(times)-1))] }
	return summary{median: at(0.5), p90: at(0.9), p99: at(0.99)}
}
