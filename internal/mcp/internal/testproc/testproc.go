// Package testproc starts server processes for tests on free loopback
// ports and checks that nothing a test started is left running.
package testproc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// procStat reads a process's state, parent and process group from /proc.
func procStat(pid int) (state string, ppid, pgrp int, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, 0, false
	}
	// The fields after the command name (in parentheses, which may itself
	// hold spaces): state ppid pgrp ...
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", 0, 0, false
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 3 {
		return "", 0, 0, false
	}
	ppid, _ = strconv.Atoi(fields[1])
	pgrp, _ = strconv.Atoi(fields[2])
	return fields[0], ppid, pgrp, true
}

// Alive says whether a process with this pid exists and is not a zombie.
func Alive(pid int) bool {
	state, _, _, ok := procStat(pid)
	return ok && state != "Z"
}

// pidsWhere lists the processes (zombies included) whose parent and
// process group pass keep.
func pidsWhere(keep func(ppid, pgrp int) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, ppid, pgrp, ok := procStat(pid); ok && keep(ppid, pgrp) {
			out = append(out, pid)
		}
	}
	return out
}

// GroupMembers lists the pids whose process group is pgid, zombies included
// (a zombie is a process nobody reaped: a leak too).
func GroupMembers(pgid int) []int {
	return pidsWhere(func(_, pgrp int) bool { return pgrp == pgid })
}

// Children lists the direct children of pid (zombies included).
func Children(pid int) []int {
	return pidsWhere(func(ppid, _ int) bool { return ppid == pid })
}

// WaitGone waits until no process of group pgid is left, or fails the test.
// A zombie counts only while it is this process's child (ours to reap): a
// grandchild that died after its parent belongs to init, which reaps it in
// its own time.
func WaitGone(t testing.TB, pgid int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var left []int
		for _, pid := range GroupMembers(pgid) {
			if Alive(pid) || parentOf(pid) == os.Getpid() {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of group %d still exist after %s: %v", pgid, within, left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func parentOf(pid int) int {
	_, ppid, _, _ := procStat(pid)
	return ppid
}
