package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDispatch(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{name: "no subcommand prints usage", args: nil, code: 2, stderr: "usage: manager <subcommand>"},
		{name: "help lists every subcommand", args: []string{"--help"}, code: 0, stderr: "stdio-adapter"},
		{name: "unknown subcommand", args: []string{"frobnicate"}, code: 2, stderr: `unknown subcommand "frobnicate"`},
		{name: "version", args: []string{"version"}, code: 0, stdout: "mcp-operator "},
		{name: "controller rejects stray arguments", args: []string{"controller", "--operator-namespace=x", "extra"}, code: 2, stderr: "unexpected arguments"},
		{name: "controller needs the operator namespace", args: []string{"controller"}, code: 2, stderr: "--operator-namespace"},
		{name: "controller rejects unknown flags", args: []string{"controller", "--no-such-flag"}, code: 2, stderr: "flag provided but not defined"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := dispatch(tc.args, &stdout, &stderr); code != tc.code {
				t.Errorf("exit code %d, want %d (stderr: %s)", code, tc.code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.stdout) {
				t.Errorf("stdout %q does not contain %q", stdout.String(), tc.stdout)
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tc.stderr)
			}
		})
	}
}

// TestStdioAdapterInstallsItself: `manager stdio-adapter --install` is the
// adapter's command line (internal/stdioadapter tests what it does, on the
// stdio-adapter binary pods run): the manager copies itself too.
func TestStdioAdapterInstallsItself(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "manager")
	var stderr bytes.Buffer
	if code := dispatch([]string{"stdio-adapter", "--install", dst}, io.Discard, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	self, _ := os.Stat(os.Args[0])
	if got, err := os.Stat(dst); err != nil || self == nil || got.Size() != self.Size() {
		t.Fatalf("installed %v (%v), want a copy of this binary", got, err)
	}
}
