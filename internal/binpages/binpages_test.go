package binpages

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssFile is the process's file-backed resident memory in kB.
func rssFile(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

func TestReleaseGivesBackTheBinarysPages(t *testing.T) {
	before := rssFile(t)
	if err := Release(); err != nil {
		t.Fatal(err)
	}
	after := rssFile(t)
	t.Logf("file-backed RSS: %d kB before, %d kB after", before, after)
	// The test binary's start touched well over a megabyte of its own
	// code and tables; most of it is not needed to read a file.
	if before-after < 1024 {
		t.Fatalf("file-backed RSS went from %d kB to %d kB; want at least 1 MB released", before, after)
	}
}
