package faultserver

import (
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
)

// GrandchildPIDFile names the env var where a Stubborn server writes the pid
// of the grandchild it leaves running, so a test can check it is gone.
const GrandchildPIDFile = "MCP_FAULT_GRANDCHILD_PID_FILE"

// stubborn ignores SIGTERM and starts a grandchild in the same process
// group that would outlive a server stopped only by its pid.
func stubborn() {
	signal.Ignore(syscall.SIGTERM)
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err == nil {
		if path := os.Getenv(GrandchildPIDFile); path != "" {
			_ = os.WriteFile(path, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
		}
	}
}
