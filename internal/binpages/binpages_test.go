package binpages

import (
	"crypto/sha256"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unicode"
)

// A smaps excerpt of a binary with each kind of mapping Release must tell
// apart.
const smaps = `00400000-01bcc000 r-xp 00000000 fe:00 10979208                           /manager
Size:              24368 kB
Rss:               17308 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
01bcc000-035d1000 r--p 017cc000 fe:00 10979208                           /manager
Size:              26644 kB
Rss:               16720 kB
Anonymous:             0 kB
035d1000-035e0000 r--p 031d1000 fe:00 10979208                           /manager
Size:                 60 kB
Rss:                  60 kB
Anonymous:            60 kB
035e0000-0368e000 rw-p 031e0000 fe:00 10979208                           /manager
Size:                696 kB
Rss:                 692 kB
Anonymous:           400 kB
0368e000-056df000 rw-p 00000000 00:00 0 
Size:              33092 kB
Rss:                 160 kB
Anonymous:           160 kB
7f0000000000-7f0000100000 r--s 00000000 fe:00 10979208                   /manager
Size:               1024 kB
Rss:                   8 kB
Anonymous:             0 kB
7f0000100000-7f0000200000 r--p 00000000 fe:00 1234                       /etc/some file
Size:               1024 kB
Rss:                   8 kB
Anonymous:             0 kB
7f0000200000-7f0000300000 r--p 00000000 fe:00 10979208                   /manager
Size:               1024 kB
Rss:                   0 kB
Anonymous:             0 kB
`

func TestReleasableMappings(t *testing.T) {
	maps, err := parseSmaps([]byte(smaps))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		perms, path string
		rssKB       int64
		releasable  bool
		why         string
	}{
		{"r-xp", "/manager", 17308, true, "the code"},
		{"r--p", "/manager", 16720, true, "read-only data and function tables"},
		{"r--p", "/manager", 60, false, "written once, then made read-only (RELRO): its pages exist only in memory"},
		{"rw-p", "/manager", 692, false, "package variables"},
		{"rw-p", "", 160, false, "not a file"},
		{"r--s", "/manager", 8, false, "shared"},
		{"r--p", "/etc/some file", 8, false, "another file (the path has a space)"},
		{"r--p", "/manager", 0, false, "nothing resident"},
	}
	if len(maps) != len(want) {
		t.Fatalf("parsed %d mappings, want %d: %+v", len(maps), len(want), maps)
	}
	for i, w := range want {
		m := maps[i]
		if m.perms != w.perms || m.path != w.path || m.rssKB != w.rssKB {
			t.Errorf("mapping %d: got %s %q %d kB, want %s %q %d kB", i, m.perms, m.path, m.rssKB, w.perms, w.path, w.rssKB)
		}
		if got := m.releasable("/manager"); got != w.releasable {
			t.Errorf("mapping %d (%s): releasable %v, want %v", i, w.why, got, w.releasable)
		}
	}
	if maps[0].start != 0x400000 || maps[0].end != 0x1bcc000 {
		t.Errorf("first mapping %x-%x, want 400000-1bcc000", maps[0].start, maps[0].end)
	}
}

func TestParseSmapsRefusesGarbage(t *testing.T) {
	for _, bad := range []string{"zzzz r-xp 0 fe:00 1 /x\n", "2000-1000 r-xp 0 fe:00 1 /x\n", "1000-2000 r-xp\n"} {
		if _, err := parseSmaps([]byte(bad)); err == nil {
			t.Errorf("parseSmaps(%q) took it", bad)
		}
	}
}

// status reads a kB figure of /proc/self/status.
func status(t *testing.T, key string) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, key+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatalf("no %s in /proc/self/status", key)
	return 0
}

// outcome is what a process that released its pages reports.
type outcome struct {
	UID                     int
	Released                int64
	FileBefore, FileAfter   int64
	TablesSame, CodeWorking bool
}

// releaseAndCheck releases this process's binary pages and checks that
// what was on them reads the same after: a read-only table and code that
// had not run yet.
func releaseAndCheck(t *testing.T) outcome {
	t.Helper()
	tablesBefore := sha256.Sum256(tableBytes())
	o := outcome{UID: os.Geteuid(), FileBefore: status(t, "RssFile")}
	released, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	o.Released, o.FileAfter = released, status(t, "RssFile")
	o.TablesSame = sha256.Sum256(tableBytes()) == tablesBefore
	_, err = json.Marshal(map[string]any{"still": []int{1, 2, 3}})
	o.CodeWorking = err == nil
	return o
}

// tableBytes is a read-only table of the binary (unicode's tables live in
// its read-only data).
func tableBytes() []byte {
	var b []byte
	for _, r := range unicode.Han.R16 {
		b = append(b, byte(r.Lo), byte(r.Lo>>8), byte(r.Hi), byte(r.Hi>>8))
	}
	return b
}

func checkOutcome(t *testing.T, o outcome) {
	t.Helper()
	t.Logf("uid %d: released %d kB; file-backed RSS %d kB before, %d kB after", o.UID, o.Released>>10, o.FileBefore, o.FileAfter)
	// The test binary's start touched well over a megabyte of its code and
	// tables; reading a file and a table needs little of it back.
	if o.FileBefore-o.FileAfter < 1024 || o.Released < 1<<20 {
		t.Errorf("file-backed RSS went from %d kB to %d kB (%d kB released); want at least 1 MB less", o.FileBefore, o.FileAfter, o.Released>>10)
	}
	if !o.TablesSame || !o.CodeWorking {
		t.Errorf("after the release: tables the same %v, code working %v", o.TablesSame, o.CodeWorking)
	}
}

func TestReleaseUnmapsTheBinarysStartPages(t *testing.T) {
	checkOutcome(t, releaseAndCheck(t))
}

// The shipped image runs a root-owned binary as another user; the kernel
// reclaims a file's pages on request (MADV_PAGEOUT) only for its owner, but
// unmaps them (MADV_DONTNEED) for anyone. When the test runs as root it
// runs a root-owned copy of itself as an unprivileged user to show that.
func TestReleaseWorksForAUserWhoDoesNotOwnTheBinary(t *testing.T) {
	if os.Getenv("BINPAGES_CHILD") != "" {
		o := releaseAndCheck(t)
		if err := json.NewEncoder(os.Stdout).Encode(o); err != nil {
			t.Fatal(err)
		}
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Not under t.TempDir: its parent is private to the test's user.
	dir, err := os.MkdirTemp("", "binpages-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "binpages.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	// Mapped as a binary read from disk is: a file just written stays
	// cached in large folios, and every fault would map 256 KB of it back.
	if err := DropFromPageCache(bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestReleaseWorksForAUserWhoDoesNotOwnTheBinary$")
	cmd.Env = append(os.Environ(), "BINPAGES_CHILD=1")
	cmd.Dir = dir
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
	} else {
		t.Log("not root: the child runs as the binary's owner")
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var o outcome
	line, _, _ := strings.Cut(string(out), "\n")
	if err := json.Unmarshal([]byte(line), &o); err != nil {
		t.Fatalf("child said %q: %v", out, err)
	}
	if os.Geteuid() == 0 && o.UID != 65532 {
		t.Fatalf("child ran as uid %d, want 65532", o.UID)
	}
	checkOutcome(t, o)
}
