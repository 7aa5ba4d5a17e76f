package main

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// The test binary runs as the pause process when this is set, so the tests
// signal the real main.
const asPause = "PAUSE_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asPause) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestExitsOnTerm: the kubelet stops a sandbox with SIGTERM; pause must exit
// 0 at once rather than wait for SIGKILL.
func TestExitsOnTerm(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), asPause+"=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// Still running after a moment: it waits, it does not exit on its own.
		select {
		case err := <-done:
			t.Fatalf("pause exited before any signal: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("after %v: exit %v, want 0", sig, err)
			}
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("pause did not exit within 5s of %v", sig)
		}
	}
}

// TestReapCollectsExitedChildren: a child that exited and was never waited
// for is a zombie until reap collects it.
func TestReapCollectsExitedChildren(t *testing.T) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := syscall.ForkExec(truePath, []string{"true"}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the child has exited (a zombie: its /proc entry stays).
	deadline := time.Now().Add(5 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			t.Fatalf("child %d vanished before reap: %v", pid, err)
		}
		if zombie(stat) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d did not exit", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	reap()
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("child %d still exists after reap: %v", pid, err)
	}
}

// zombie reads the state field of /proc/PID/stat ("pid (comm) Z ...").
func zombie(stat []byte) bool {
	for i := len(stat) - 1; i >= 0; i-- {
		if stat[i] == ')' {
			return i+2 < len(stat) && stat[i+2] == 'Z'
		}
	}
	return false
}
