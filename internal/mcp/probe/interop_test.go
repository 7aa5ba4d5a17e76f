package probe_test

// These tests probe real MCP servers nobody in this project wrote, installed
// by `make peers`: the reference TypeScript servers (everything, filesystem)
// and the go-sdk conformance everything-server.

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/internal/mcp/catalog"
	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/internal/testproc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/probe"
	"github.com/mcp-operator/mcp-operator/internal/mcp/stdio"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
	"github.com/mcp-operator/mcp-operator/internal/testpeers"
)

func peer(t *testing.T, find func() (string, error)) string {
	t.Helper()
	p, err := find()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func npm(name string) func() (string, error) {
	return func() (string, error) { return testpeers.NPMBin(name) }
}

func runProbe(t *testing.T, target probe.Target, opts probe.Options) *probe.Result {
	t.Helper()
	ctx := testkit.Context(t)
	if opts.Timeout == 0 {
		opts.Timeout = 20 * time.Second
	}
	start := time.Now()
	res, err := probe.Run(ctx, target, opts)
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	t.Logf("probed %s in %s: %s %s, %d tools, %d resources, %d prompts, digest %s",
		target, time.Since(start).Round(time.Millisecond), res.Era, res.ProtocolVersion,
		len(res.Catalog.Tools), len(res.Resources), len(res.Prompts), res.Catalog.Digest)
	return res
}

func tool(t *testing.T, c *catalog.Catalog, upstream string) catalog.Tool {
	t.Helper()
	for _, tl := range c.Tools {
		if tl.UpstreamName == upstream {
			return tl
		}
	}
	t.Fatalf("tool %q is not in the catalog of %s", upstream, c.Server)
	return catalog.Tool{}
}

func prompt(t *testing.T, ps []catalog.Prompt, upstream string) catalog.Prompt {
	t.Helper()
	for _, p := range ps {
		if p.UpstreamName == upstream {
			return p
		}
	}
	t.Fatalf("prompt %q is missing", upstream)
	return catalog.Prompt{}
}

func hasResource(rs []catalog.Resource, uri string) bool {
	for _, r := range rs {
		if r.URI == uri {
			return true
		}
	}
	return false
}

// checkEverythingTS asserts what @modelcontextprotocol/server-everything offers.
func checkEverythingTS(t *testing.T, res *probe.Result, trusted bool) {
	t.Helper()
	if res.Era != client.EraSession || res.ProtocolVersion != "2025-11-25" {
		t.Errorf("era %s version %s, want session 2025-11-25 (the server does not implement server/discover)", res.Era, res.ProtocolVersion)
	}
	if res.DiscoverNote == "" {
		t.Error("no note on why server/discover did not settle the era")
	}
	if res.ServerInfo.Name != "mcp-servers/everything" {
		t.Errorf("serverInfo.name = %q", res.ServerInfo.Name)
	}
	if !res.Capabilities.Tools || !res.Capabilities.Prompts || !res.Capabilities.Resources || !res.Capabilities.ResourcesSubscribe {
		t.Errorf("capabilities %+v lack tools, prompts or resources", res.Capabilities)
	}
	echo := tool(t, res.Catalog, "echo")
	if echo.Name != "mcp.everything.echo" || echo.UnderscoreName != "mcp__everything__echo" {
		t.Errorf("echo named %q / %q", echo.Name, echo.UnderscoreName)
	}
	// echo says readOnlyHint: true. Lowering below network needs trust.
	wantEcho := v1alpha1.RiskNetwork
	if trusted {
		wantEcho = v1alpha1.RiskRead
	}
	if echo.Risk != wantEcho {
		t.Errorf("echo risk %s (%s), want %s", echo.Risk, echo.RiskSource, wantEcho)
	}
	// gzip-file-as-resource is neither read-only nor destructive: network.
	if g := tool(t, res.Catalog, "gzip-file-as-resource"); g.Risk != v1alpha1.RiskNetwork {
		t.Errorf("gzip-file-as-resource risk %s, want network", g.Risk)
	}
	for _, name := range []string{"get-sum", "get-env", "trigger-long-running-operation"} {
		tool(t, res.Catalog, name)
	}
	if len(res.Catalog.Rejected) != 0 {
		t.Errorf("valid tools rejected: %v", res.Catalog.Rejected)
	}
	args := prompt(t, res.Prompts, "args-prompt")
	if args.Name != "mcp.everything.args-prompt" || len(args.Arguments) != 2 ||
		args.Arguments[0].Name != "city" || !args.Arguments[0].Required ||
		args.Arguments[1].Name != "state" || args.Arguments[1].Required {
		t.Errorf("args-prompt = %+v, want city (required) and state (optional)", args)
	}
	if p := prompt(t, res.Prompts, "simple-prompt"); len(p.Arguments) != 0 {
		t.Errorf("simple-prompt has arguments %+v", p.Arguments)
	}
	if !hasResource(res.Resources, "demo://resource/static/document/architecture.md") {
		t.Errorf("resources %+v lack the static architecture.md document", res.Resources)
	}
}

func TestProbeEverythingTSOverStdio(t *testing.T) {
	bin := peer(t, npm("mcp-server-everything"))
	target := probe.Target{Stdio: &stdio.Options{Command: bin}}
	res := runProbe(t, target, probe.Options{Server: "everything"})
	checkEverythingTS(t, res, false)
	again := runProbe(t, target, probe.Options{Server: "everything", Tools: v1alpha1.ToolsSpec{TrustAnnotations: true}})
	checkEverythingTS(t, again, true)
	if res.Catalog.Digest != again.Catalog.Digest {
		t.Errorf("digest changed between two probes of the same server (%s, %s); risk is not part of it", res.Catalog.Digest, again.Catalog.Digest)
	}
}

func TestProbeEverythingTSOverHTTP(t *testing.T) {
	bin := peer(t, npm("mcp-server-everything"))
	port := testkit.FreePort(t)
	testpeers.Start(t, port, []string{"PORT=" + strconv.Itoa(port)}, bin, "streamableHttp")
	target := probe.Target{HTTP: &streamhttp.Options{URL: "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp"}}
	res := runProbe(t, target, probe.Options{Server: "everything"})
	checkEverythingTS(t, res, false)
	// The same server over stdio publishes the same catalog.
	viaStdio := runProbe(t, probe.Target{Stdio: &stdio.Options{Command: bin}}, probe.Options{Server: "everything"})
	if res.Catalog.Digest != viaStdio.Catalog.Digest {
		t.Errorf("catalog digest over HTTP %s differs from stdio %s", res.Catalog.Digest, viaStdio.Catalog.Digest)
	}
}

func TestProbeFilesystemDestructiveTools(t *testing.T) {
	bin := peer(t, npm("mcp-server-filesystem"))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := probe.Target{Stdio: &stdio.Options{Command: bin, Args: []string{dir}}}
	spec := v1alpha1.ToolsSpec{
		Exclude:       []string{"read_media_*"},
		RiskOverrides: []v1alpha1.RiskOverride{{Tool: "create_directory", Risk: v1alpha1.RiskWrite}},
	}
	res := runProbe(t, target, probe.Options{Server: "files", Tools: spec})
	if res.Era != client.EraSession || res.ServerInfo.Name != "secure-filesystem-server" {
		t.Errorf("era %s, serverInfo %+v", res.Era, res.ServerInfo)
	}
	for _, name := range []string{"write_file", "edit_file", "move_file"} {
		tl := tool(t, res.Catalog, name)
		if tl.Risk != v1alpha1.RiskDestructive || tl.RiskSource != catalog.RiskFromAnnotation {
			t.Errorf("%s risk %s from %s, want destructive from its annotation (raising needs no trust)", name, tl.Risk, tl.RiskSource)
		}
	}
	if r := tool(t, res.Catalog, "read_text_file"); r.Risk != v1alpha1.RiskNetwork {
		t.Errorf("read_text_file risk %s: an untrusted readOnlyHint must not lower it below network", r.Risk)
	}
	if c := tool(t, res.Catalog, "create_directory"); c.Risk != v1alpha1.RiskWrite || c.RiskSource != catalog.RiskFromOverride {
		t.Errorf("create_directory risk %s from %s, want write from the override", c.Risk, c.RiskSource)
	}
	if len(res.Catalog.Excluded) != 1 || res.Catalog.Excluded[0] != "read_media_file" {
		t.Errorf("excluded %v, want [read_media_file]", res.Catalog.Excluded)
	}
	for _, tl := range res.Catalog.Tools {
		if tl.UpstreamName == "read_media_file" {
			t.Error("an excluded tool is in the catalog")
		}
	}
	if res.Capabilities.Prompts || res.Capabilities.Resources || len(res.Prompts) != 0 || len(res.Resources) != 0 {
		t.Errorf("the filesystem server advertises only tools, yet prompts/resources were listed: %+v", res.Capabilities)
	}
}

func TestProbeGoSDKEverythingServerBothEras(t *testing.T) {
	bin := peer(t, testpeers.EverythingServer)
	cases := []struct {
		name      string
		stateless bool
		wantEra   client.Era
		wantVer   string
	}{
		{"stateless", true, client.EraStateless, "2026-07-28"},
		{"sessions", false, client.EraSession, "2025-11-25"},
	}
	var digests []string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			port := testkit.FreePort(t)
			testpeers.Start(t, port, nil, bin, "-http=127.0.0.1:"+strconv.Itoa(port), "-stateless="+strconv.FormatBool(tc.stateless))
			target := probe.Target{HTTP: &streamhttp.Options{URL: "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp"}}
			res := runProbe(t, target, probe.Options{})
			if res.Era != tc.wantEra || res.ProtocolVersion != tc.wantVer {
				t.Errorf("era %s version %s, want %s %s", res.Era, res.ProtocolVersion, tc.wantEra, tc.wantVer)
			}
			if res.Server != "mcp-conformance-test-server" || res.ServerInfo.Version != "1.0.0" {
				t.Errorf("server %q, info %+v", res.Server, res.ServerInfo)
			}
			for _, name := range []string{"test_simple_text", "test_tool_with_progress", "json_schema_2020_12_tool", "test_x_mcp_header"} {
				if tl := tool(t, res.Catalog, name); tl.Risk != v1alpha1.RiskNetwork || tl.RiskSource != catalog.RiskFromDefault {
					t.Errorf("%s risk %s from %s, want the default (no annotations)", name, tl.Risk, tl.RiskSource)
				}
			}
			p := prompt(t, res.Prompts, "test_prompt_with_arguments")
			if len(p.Arguments) != 2 || !p.Arguments[0].Required || !p.Arguments[1].Required {
				t.Errorf("test_prompt_with_arguments = %+v", p)
			}
			if !hasResource(res.Resources, "test://static-text") {
				t.Errorf("resources %+v lack test://static-text", res.Resources)
			}
			digests = append(digests, res.Catalog.Digest)
		})
	}
	if len(digests) == 2 && digests[0] != digests[1] {
		t.Errorf("the same server publishes different catalogs in the two eras: %v", digests)
	}
	t.Run("stdio", func(t *testing.T) {
		res := runProbe(t, probe.Target{Stdio: &stdio.Options{Command: bin}}, probe.Options{})
		if res.Era != client.EraStateless || res.ProtocolVersion != "2026-07-28" {
			t.Errorf("over stdio: era %s version %s, want stateless 2026-07-28", res.Era, res.ProtocolVersion)
		}
		if len(digests) > 0 && res.Catalog.Digest != digests[0] {
			t.Errorf("stdio digest %s differs from HTTP %s", res.Catalog.Digest, digests[0])
		}
	})
}

// The client API the bridge will use: connect, call a tool with raw JSON,
// close — and the child process is gone afterwards.
func TestClientCallsToolsAndLeavesNoProcess(t *testing.T) {
	bin := peer(t, npm("mcp-server-filesystem"))
	dir := t.TempDir()
	conn, err := stdio.Start(stdio.Options{Command: bin, Args: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	pid := conn.PID()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, conn, client.Options{})
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	path := filepath.Join(dir, "note.txt")
	args := []byte(`{"path":` + strconv.Quote(path) + `,"content":"written by a real destructive tool"}`)
	if _, err := c.CallTool(ctx, "write_file", args); err != nil {
		t.Fatalf("write_file: %v", err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "written by a real destructive tool" {
		t.Fatalf("file after write_file: %q, %v", got, err)
	}
	raw, err := c.CallTool(ctx, "read_text_file", []byte(`{"path":`+strconv.Quote(path)+`}`))
	if err != nil {
		t.Fatalf("read_text_file: %v", err)
	}
	if !strings.Contains(string(raw), "written by a real destructive tool") {
		t.Fatalf("read_text_file result %s lacks the content", raw)
	}
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("closed the stdio server in %s", time.Since(start).Round(time.Millisecond))
	testproc.WaitGone(t, pid, 5*time.Second)
	if kids := testproc.Children(os.Getpid()); slices.Contains(kids, pid) {
		t.Fatalf("child %d still listed under the test process (not reaped)", pid)
	}
}
