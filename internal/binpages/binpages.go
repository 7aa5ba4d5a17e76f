// Package binpages lets a long-running process stop mapping the pages of its
// own binary that only its start used.
//
// A Go process's start runs the package inits of everything linked into the
// binary (client-go's scheme of every built-in group, the API types'
// documentation tables, cel-go's standard library, protobuf registries,
// every subcommand's flags). The kernel maps those pages into the process,
// and with them the neighbouring pages it reads ahead and maps around each
// fault, so a start leaves tens of megabytes of the binary in the process's
// RSS that it never runs again. Release unmaps them; what the process still
// uses is mapped again at its next use.
//
// Unmapping a page of a private file mapping with MADV_DONTNEED is safe
// only while the page is the file's own: a page the process wrote holds
// its private copy, and MADV_DONTNEED would discard that copy, the page
// reading as the file again. Release reads /proc/self/smaps and skips
// every mapping with a written page, resident (Anonymous) or swapped out
// (Swap). Private_Dirty is no such sign: it also counts the file's own
// pages while they are dirty in the page cache (a binary just linked and
// not yet written back), which MADV_DONTNEED leaves in the cache. Between that read and the madvise nothing in the
// process writes these mappings: they are not writable, and Go writes
// neither its code nor its read-only data. Only a writer from outside
// (a debugger's breakpoint through ptrace or /proc/PID/mem, a uprobe)
// could, and a breakpoint set in that window would be lost.
package binpages

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// mapping is one line of /proc/self/smaps's headers with the counts Release
// needs.
type mapping struct {
	start, end uint64
	perms      string
	path       string
	rssKB      int64
	anonKB     int64
	// swapKB is written pages swapped out: not resident, so not in
	// Anonymous, but still the process's own copy.
	swapKB int64
}

// releasable says whether a mapping is a read-only private mapping of the
// executable whose every resident page is the file's own: its code, its
// read-only data, its function tables. A page of a private mapping that
// was ever written (a relocation made read-only afterwards, as a PIE's RELRO
// is, or a debugger's breakpoint) exists nowhere else, resident or in swap,
// so a mapping that holds one is left alone, as are writable ones (package
// variables).
func (m mapping) releasable(exe string) bool {
	return m.path == exe && len(m.perms) == 4 && m.perms[1] != 'w' && m.perms[3] == 'p' &&
		m.anonKB == 0 && m.swapKB == 0 && m.rssKB > 0
}

// parseSmaps reads the mappings of a /proc/PID/smaps file.
func parseSmaps(data []byte) ([]mapping, error) {
	var out []mapping
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if key, ok := strings.CutSuffix(fields[0], ":"); ok {
			if len(out) == 0 || len(fields) < 2 {
				continue
			}
			n, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				continue // VmFlags and the like
			}
			switch key {
			case "Rss":
				out[len(out)-1].rssKB = n
			case "Anonymous":
				out[len(out)-1].anonKB = n
			case "Swap":
				out[len(out)-1].swapKB = n
			}
			continue
		}
		// address perms offset dev inode [path]
		from, to, ok := strings.Cut(fields[0], "-")
		if !ok || len(fields) < 5 {
			return nil, fmt.Errorf("binpages: unexpected smaps line %q", sc.Text())
		}
		start, err1 := strconv.ParseUint(from, 16, 64)
		end, err2 := strconv.ParseUint(to, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			return nil, fmt.Errorf("binpages: unexpected smaps range %q", fields[0])
		}
		m := mapping{start: start, end: end, perms: fields[1]}
		if len(fields) >= 6 {
			m.path = strings.Join(fields[5:], " ")
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// Release unmaps the resident pages of the executable's read-only private
// mappings (madvise(MADV_DONTNEED)) and returns how many bytes were
// resident in them. The pages stay in the page cache as clean, unmapped
// file pages (shared with any other process running the same file, and
// the first memory the kernel takes back when it needs some); the process
// maps again, from the cache or the disk, whichever of them it runs or
// reads next. Unlike MADV_PAGEOUT it works whoever owns the file, as in an
// image whose root-owned binary runs as another user.
func Release() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("binpages: %w", err)
	}
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("binpages: %w", err)
	}
	maps, err := parseSmaps(data)
	if err != nil {
		return 0, err
	}
	var released int64
	for _, m := range maps {
		if !m.releasable(exe) {
			continue
		}
		if err := dontNeed(m.start, m.end-m.start); err != nil {
			return released, fmt.Errorf("binpages: madvise(MADV_DONTNEED) on %x-%x: %w", m.start, m.end, err)
		}
		released += m.rssKB << 10
	}
	return released, nil
}
