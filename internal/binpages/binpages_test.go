package binpages

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// A smaps excerpt of a binary with each kind of mapping Release must tell
// apart.
const smaps = `00400000-01bcc000 r-xp 00000000 fe:00 10979208                           /manager
Size:              24368 kB
Rss:               17308 kB
Private_Dirty:         0 kB
Anonymous:             0 kB
Swap:                  0 kB
SwapPss:               0 kB
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
7f0000300000-7f0000400000 r--p 00000000 fe:00 10979208                   /manager
Size:               1024 kB
Rss:                 100 kB
Private_Dirty:         0 kB
Anonymous:             0 kB
Swap:                  4 kB
SwapPss:               4 kB
7f0000400000-7f0000500000 r--p 00000000 fe:00 10979208                   /manager
Size:               1024 kB
Rss:                 100 kB
Private_Dirty:         4 kB
Anonymous:             0 kB
Swap:                  0 kB
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
		{"r--p", "/manager", 100, false, "a written page swapped out: its copy is in swap, not in Anonymous"},
		{"r--p", "/manager", 100, true, "dirty in the page cache (a binary just linked, not yet written back): still the file's pages"},
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

// String constants: the linker keeps their bytes in the binary's
// read-only data, which Release unmaps. Each is used by one test only
// (identical constants would share their bytes).
const (
	readMarker    = "binpages: a constant read before and after the release, whose bytes must come back from the file"
	writtenMarker = "binpages: a constant a debugger-like writer changes through /proc/self/mem before the release"
)

// bytesOf is the bytes of s where the binary keeps them. Not inlined, so
// that each read is a load from that memory, never a folded constant.
//
//go:noinline
func bytesOf(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

func addressOf(s string) uintptr { return uintptr(unsafe.Pointer(unsafe.StringData(s))) }

// mappingAt is this process's mapping holding addr, as smaps shows it now.
func mappingAt(t *testing.T, addr uintptr) mapping {
	t.Helper()
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	maps, err := parseSmaps(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range maps {
		if m.start <= uint64(addr) && uint64(addr) < m.end {
			return m
		}
	}
	t.Fatalf("no mapping holds %x", addr)
	return mapping{}
}

// pagemap reads /proc/self/pagemap, which says which pages are mapped in
// this process.
type pagemap struct {
	f     *os.File
	entry [8]byte
}

func openPagemap(t *testing.T) *pagemap {
	t.Helper()
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &pagemap{f: f}
}

// resident says whether the page holding addr is mapped (its entry's bit
// 63). It reads nothing of the binary's data itself: the kernel maps a
// faulting page's cached neighbours with it, so reading data near addr
// would map addr's page again.
func (p *pagemap) resident(t *testing.T, addr uintptr) bool {
	t.Helper()
	if _, err := p.f.ReadAt(p.entry[:], int64(addr)/int64(os.Getpagesize())*8); err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint64(p.entry[:])&(1<<63) != 0
}

func self(t *testing.T) string {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// releaseAndCheck releases this process's binary pages and checks what
// that did: at least a megabyte of file-backed RSS less, a page of
// read-only data unmapped and read back the same from the file, and code
// that had not run yet running.
func releaseAndCheck(t *testing.T) {
	t.Helper()
	addr := addressOf(readMarker)
	if m := mappingAt(t, addr); !m.releasable(self(t)) {
		t.Fatalf("the constant is not in a mapping Release unmaps: %+v (the check below would prove nothing)", m)
	}
	pages := openPagemap(t)
	before := bytes.Clone(bytesOf(readMarker))
	if !pages.resident(t, addr) {
		t.Fatal("the constant's page is not mapped after reading it")
	}
	fileBefore := status(t, "RssFile")
	released, err := Release()
	unmapped := !pages.resident(t, addr) // before anything reads other data

	if err != nil {
		t.Fatal(err)
	}
	fileAfter := status(t, "RssFile")
	t.Logf("uid %d: released %d kB; file-backed RSS %d kB before, %d kB after", os.Geteuid(), released>>10, fileBefore, fileAfter)
	// The test binary's start touched well over a megabyte of its code and
	// data; reading two files needs little of it back.
	if fileBefore-fileAfter < 1024 || released < 1<<20 {
		t.Errorf("file-backed RSS went from %d kB to %d kB (%d kB released); want at least 1 MB less", fileBefore, fileAfter, released>>10)
	}
	if !unmapped {
		t.Error("the constant's page is still mapped after the release")
	}
	if got := bytesOf(readMarker); !bytes.Equal(got, before) || string(got) != readMarker {
		t.Errorf("the constant reads %q after the release", got)
	}
	if !pages.resident(t, addr) {
		t.Error("reading the constant did not map its page again")
	}
	// Code this test had not run before the release, mapped at its call.
	if got := strconv.QuoteToGraphic("\u263a\x00"); got != "\"\u263a\\x00\"" {
		t.Errorf("code run after the release returned %s", got)
	}
}

func TestReleaseUnmapsTheBinarysStartPages(t *testing.T) {
	releaseAndCheck(t)
}

// A page of the binary's read-only data that something wrote (as a
// debugger writes a breakpoint, through /proc/PID/mem) is the process's
// own copy: Release must leave its mapping alone, or the write would be
// lost. It runs in a child of its own, as the written page keeps the
// whole mapping mapped for the rest of the process.
func TestReleaseKeepsAPageSomethingWrote(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		runChild(t, self(t), nil)
		return
	}
	addr := addressOf(writtenMarker)
	if m := mappingAt(t, addr); !m.releasable(self(t)) {
		t.Fatalf("the constant is not in a mapping Release unmaps: %+v", m)
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if _, err := mem.WriteAt([]byte{'#'}, int64(addr)); err != nil {
		t.Fatalf("writing the binary's read-only data through /proc/self/mem: %v", err)
	}
	if got := bytesOf(writtenMarker)[0]; got != '#' {
		t.Fatalf("the write did not take: the constant starts with %q", got)
	}
	written := mappingAt(t, addr)
	if written.releasable(self(t)) || written.anonKB == 0 {
		t.Fatalf("smaps does not show the written page: %+v", written)
	}
	released, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	if released == 0 {
		t.Error("nothing released: the code's mapping should have been")
	}
	if got := bytesOf(writtenMarker)[0]; got != '#' {
		t.Errorf("the written byte was lost: the constant starts with %q again", got)
	}
	if after := mappingAt(t, addr); after.rssKB < written.rssKB/2 || after.anonKB != written.anonKB {
		t.Errorf("the written mapping was touched: %+v before the release, %+v after", written, after)
	}
}

// childEnv names the test a child process runs; it is set only there.
const childEnv = "BINPAGES_CHILD"

// runChild runs the calling test alone in a new process of bin (as the
// user cred names, if any) and fails if it fails there.
func runChild(t *testing.T, bin string, cred *syscall.Credential) {
	t.Helper()
	cmd := exec.Command(bin, "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name())
	cmd.Dir = filepath.Dir(bin)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatal("the child did not run the test")
	}
}

// imageUser is the unprivileged user the image runs its root-owned binary
// as.
const imageUser = 65532

// The shipped image runs a root-owned binary as another user; the kernel
// reclaims a file's pages on request (MADV_PAGEOUT) only for its owner, but
// unmaps them (MADV_DONTNEED) for anyone. The test runs a root-owned copy
// of itself as an unprivileged user to show that, so it needs root, as CI
// runs it.
func TestReleaseWorksForAUserWhoDoesNotOwnTheBinary(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		if uid := os.Geteuid(); uid != imageUser {
			t.Fatalf("the child runs as uid %d, want %d", uid, imageUser)
		}
		releaseAndCheck(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test runs a root-owned binary as another user, which takes root (CI runs as root)")
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
	data, err := os.ReadFile(self(t))
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
	runChild(t, bin, &syscall.Credential{Uid: imageUser, Gid: imageUser})
}
