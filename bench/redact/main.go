// Command redact measures secret redaction (issue 12) on a 10 MiB mixed
// result (prose, JSON lines, source code, base64 blobs, log lines and a few
// secrets) and on a 2 KB result: the new redactor (internal/redact: its own
// shapes and gitleaks' 217 text rules) against the redactor it replaced
// (baseline/: internal/redact at commit 34976b4, which make bench-redact
// takes from the git history) and against gitleaks' own detector with its
// default config, on the same input, in alternating rounds of one run.
// gitleaks runs every rule whose keyword is anywhere in the text over the
// whole text, which takes minutes on 10 MiB of text full of "key" and
// "token": it gets the first MiB of the large input, in one round, and its
// throughput is compared. It prints throughput
// (MB/s of wall time and of the process's CPU time, which the machine's
// other load disturbs less) and the ratios, and checks the target: >= 100
// MB/s on 10 MiB.
//
// It is its own module, so that gitleaks (the detector compared against)
// never enters the operator's dependencies. Run it with `make bench-redact`.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/zricethezav/gitleaks/v8/detect"

	"github.com/mcp-operator/mcp-operator/bench/internal/benchutil"
	"github.com/mcp-operator/mcp-operator/bench/redact/baseline"
	"github.com/mcp-operator/mcp-operator/internal/redact"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type contender struct {
	name   string
	redact func(string) int // returns how many secrets it found
	// most bounds the bytes of the large input it gets (0: all), once a run.
	most int
}

type sample struct{ wall, cpu time.Duration }

func main() {
	rounds := flag.Int("rounds", 5, "rounds; each runs every contender once on each input, alternating")
	withGitleaks := flag.Bool("gitleaks", true, "compare with gitleaks' detector too (minutes)")
	flag.Parse()
	big, planted := mixedInput(10<<20, 1)
	small, _ := mixedInput(2<<10, 2)
	values := []string{"p4ss-w0rd-of-the-db", "another-Secret-value"}
	newR, oldR := redact.New(values...), baseline.New(values...)
	gl, err := detect.NewDetectorDefaultConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gitleaks:", err)
		os.Exit(1)
	}
	contenders := []contender{
		{"new redactor", func(s string) int { var c redact.Counts; newR.String(s, &c); return c.Total() }, 0},
		{"previous redactor", func(s string) int { var c baseline.Counts; oldR.String(s, &c); return c.Total() }, 0},
		{"gitleaks detector", func(s string) int { return len(gl.DetectString(s)) }, 1 << 20},
	}
	if !*withGitleaks {
		contenders = contenders[:2]
	}
	fmt.Printf("redaction benchmark: 10 MiB mixed result (%d secrets planted) and a 2 KB result, %d rounds\n", planted, *rounds)
	for _, c := range contenders {
		c.redact("warm up " + small) // compiles what is compiled on first use
	}
	ok := true
	for _, in := range []struct {
		name  string
		text  string
		reps  int
		bytes int
	}{{"10 MiB", big, 1, len(big)}, {"2 KB", small, 2000, len(small)}} {
		results := make([][]sample, len(contenders))
		found := make([]int, len(contenders))
		sizes := make([]int, len(contenders))
		for r := range *rounds {
			for i, c := range contenders {
				text := in.text
				if c.most > 0 && len(text) > c.most {
					if r > 0 {
						continue
					}
					text = text[:c.most]
				}
				sizes[i] = len(text)
				w, u := time.Now(), cpuTime()
				for range in.reps {
					found[i] = c.redact(text)
				}
				results[i] = append(results[i], sample{time.Since(w) / time.Duration(in.reps), (cpuTime() - u) / time.Duration(in.reps)})
			}
		}
		fmt.Printf("\n%s result (%d bytes):\n", in.name, in.bytes)
		medians := make([]sample, len(contenders))
		perByte := make([]float64, len(contenders))
		for i, c := range contenders {
			medians[i] = median(results[i])
			perByte[i] = float64(medians[i].cpu) / float64(sizes[i])
			fmt.Printf("  %-18s %9.1f MB/s wall %9.1f MB/s cpu  %10s per run (cpu) on %d bytes, %d found\n", c.name,
				mbps(sizes[i], medians[i].wall), mbps(sizes[i], medians[i].cpu), medians[i].cpu.Round(time.Microsecond/10), sizes[i], found[i])
		}
		fmt.Printf("  new / previous: %.2fx the time (cpu)\n", perByte[0]/perByte[1])
		if len(contenders) > 2 {
			fmt.Printf("  gitleaks / new: %.1fx the time per byte (cpu)\n", perByte[2]/perByte[0])
		}
		if in.name == "10 MiB" {
			got := mbps(in.bytes, medians[0].cpu)
			pass := got >= 100
			ok = ok && pass
			fmt.Printf("  target >= 100 MB/s (cpu) on 10 MiB: %.1f MB/s: %s\n", got, benchutil.Verdict(pass))
			if found[0] < planted {
				fmt.Printf("  the new redactor found %d of the %d planted secrets: FAIL\n", found[0], planted)
				ok = false
			}
		}
	}
	if !ok {
		os.Exit(1)
	}
}

func median(s []sample) sample {
	w := make([]time.Duration, len(s))
	c := make([]time.Duration, len(s))
	for i, x := range s {
		w[i], c[i] = x.wall, x.cpu
	}
	slices.Sort(w)
	slices.Sort(c)
	return sample{w[len(w)/2], c[len(c)/2]}
}

func mbps(n int, d time.Duration) float64 { return float64(n) / d.Seconds() / 1e6 }
