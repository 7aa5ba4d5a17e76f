package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/mcp-operator/mcp-operator/api/v1alpha1"
	"github.com/mcp-operator/mcp-operator/bench/internal/benchutil"
	"github.com/mcp-operator/mcp-operator/bench/internal/rssmap"
	"github.com/mcp-operator/mcp-operator/internal/binpages"
	mcpclient "github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/authn"
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/idlemem"
	"github.com/mcp-operator/mcp-operator/internal/testenv"
)

// managerIdleWait is how long the manager idles before its RSS is read:
// past two of the bridge's quiet periods (idlemem.DefaultQuiet), so that it
// has given back its heap's free pages as it does between conversations.
const managerIdleWait = 2*idlemem.DefaultQuiet + 5*time.Second

// managerIdleRSS runs the real `manager bridge` (built from cmd/manager) on
// a real kube-apiserver and etcd (envtest), serving the fast upstream as an
// MCPServer with one ToolPolicy, with real TokenReview authentication of a
// real ServiceAccount token. After 200 calls through it, and a moment idle,
// its RSS is what the process holds with its informers and caches. With
// attribute, it also prints whose the binary's resident pages are
// (bench/internal/rssmap).
func managerIdleRSS(root string, fast *mcpServer, idleWait time.Duration, attribute bool) (int64, error) {
	// Under the repository's bin/, on disk: dropping a file's pages from
	// the page cache does nothing on a tmpfs /tmp.
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp(filepath.Join(root, "bin"), "bench-manager-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "manager")
	// Built as make build builds the image's binary: a static binary
	// without symbol tables.
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/manager")
	build.Dir, build.Stderr = root, os.Stderr
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if err := build.Run(); err != nil {
		return 0, fmt.Errorf("building cmd/manager: %w", err)
	}
	symbols := bin + ".symbols"
	if attribute {
		// The same build with its symbol table, for rssmap: -s -w leave the
		// loaded sections where they are.
		build := exec.Command("go", "build", "-trimpath", "-o", symbols, "./cmd/manager")
		build.Dir, build.Stderr, build.Env = root, os.Stderr, append(os.Environ(), "CGO_ENABLED=0")
		if err := build.Run(); err != nil {
			return 0, fmt.Errorf("building cmd/manager with symbols: %w", err)
		}
	}
	if err := binpages.DropFromPageCache(bin); err != nil {
		fmt.Fprintf(os.Stderr, "warning: the manager's file-backed RSS is that of a binary just written, not read from disk (about 5 MB more): %v\n", err)
	}
	env, err := testenv.New()
	if err != nil {
		return 0, err
	}
	cfg, err := env.Start()
	if err != nil {
		return 0, err
	}
	defer func() { _ = env.Stop() }()
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		return 0, err
	}
	ctx := context.Background()
	for _, ns := range []string{"tools", "agents"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return 0, err
		}
	}
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "bench"}}); err != nil {
		return 0, err
	}
	s, err := serverFromProbe(ctx, fast.name, fast.url)
	if err != nil {
		return 0, err
	}
	status := s.Status
	s.Spec.Transport = v1alpha1.TransportStreamableHTTP
	s.Spec.Remote = &v1alpha1.Remote{URL: fast.url} // no pod to run
	if err := c.Create(ctx, &s); err != nil {
		return 0, err
	}
	s.Status = status
	if err := c.Status().Update(ctx, &s); err != nil {
		return 0, err
	}
	for _, p := range benchPolicy() {
		if err := c.Create(ctx, &p); err != nil {
			return 0, err
		}
	}
	token, err := saToken(cfg)
	if err != nil {
		return 0, err
	}
	kubeconfig, err := kubeconfigFile(env, dir)
	if err != nil {
		return 0, err
	}
	addr, ops := benchutil.FreeAddr(), benchutil.FreeAddr()
	cmd, err := start(addr, []string{"KUBECONFIG=" + kubeconfig}, bin, "bridge", "--namespaces=tools", "--listen="+addr,
		"--metrics-bind-address="+ops, "--audit-log="+filepath.Join(dir, "audit.jsonl"), "--artifact-dir="+filepath.Join(dir, "artifacts"))
	if err != nil {
		return 0, err
	}
	defer benchutil.Stop(cmd)
	url := "http://" + addr + "/mcp"
	// The informers fill the table shortly after the process listens.
	var callErr error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, callErr = sequential(url, token, mcpclient.EraSession, "mcp.fast.echo", fast.args, 200); callErr == nil {
			break
		}
	}
	if callErr != nil {
		return 0, callErr
	}
	time.Sleep(idleWait) // idle: what the process keeps, not what a call had in hand
	rss := benchutil.RSS(cmd.Process.Pid)
	// Where the MB are: the kernel's split of the RSS and the Go runtime's
	// own accounting (its /metrics), so a change can be aimed at the part
	// that grew.
	anon, file := smapsRollup(cmd.Process.Pid)
	gos, err := goMemStats("http://" + ops + "/metrics")
	if err != nil {
		// Only the breakdown is lost: the RSS was measured.
		fmt.Fprintf(os.Stderr, "warning: no Go memory breakdown of the manager: %v\n", err)
		gos = map[string]int64{}
	}
	fmt.Printf("real manager bridge at idle: RSS %.1f MB = anonymous %.1f MB + file-backed %.1f MB; Go heap in use %.1f MB (objects %.1f MB, live and not yet collected), stacks %.1f MB of %d goroutines, runtime metadata %.1f MB, heap idle not yet returned %.1f MB\n",
		mb(rss), mb(anon), mb(file), mb(gos["go_memstats_heap_inuse_bytes"]), mb(gos["go_memstats_heap_alloc_bytes"]), mb(gos["go_memstats_stack_inuse_bytes"]), gos["go_goroutines"],
		mb(gos["go_memstats_mspan_sys_bytes"]+gos["go_memstats_mcache_sys_bytes"]+gos["go_memstats_buck_hash_sys_bytes"]+gos["go_memstats_gc_sys_bytes"]+gos["go_memstats_other_sys_bytes"]),
		mb(gos["go_memstats_heap_idle_bytes"]-gos["go_memstats_heap_released_bytes"]))
	if attribute {
		r, err := rssmap.Attribute(cmd.Process.Pid, symbols)
		if err != nil {
			return 0, fmt.Errorf("while attributing the manager's resident pages: %w", err)
		}
		fmt.Println("the manager's binary pages, resident at idle:")
		r.Print(os.Stdout, 25)
	}
	return rss, nil
}

func mb(n int64) float64 { return float64(n) / 1e6 }

// smapsRollup is a process's resident memory that is anonymous (heap,
// stacks, runtime) and the rest, file-backed (the binary's pages read so far).
func smapsRollup(pid int) (anon, file int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, 0
	}
	kb := map[string]int64{}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[2] == "kB" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			kb[strings.TrimSuffix(f[0], ":")] = n * 1024
		}
	}
	return kb["Anonymous"], kb["Rss"] - kb["Anonymous"]
}

// goMemStats reads the go_memstats_* and go_goroutines gauges of a
// Prometheus endpoint.
func goMemStats(url string) (map[string]int64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(body), "\n") {
		if name, value, ok := strings.Cut(line, " "); ok && (strings.HasPrefix(name, "go_memstats_") || name == "go_goroutines") {
			v, _ := strconv.ParseFloat(value, 64)
			out[name] = int64(v)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no go_memstats_ gauges at %s", url)
	}
	return out, nil
}

// memoryOnly measures the idle RSS of a real manager bridge alone (make
// bench-bridge-memory): a minute instead of the whole comparison, and no
// ToolHive build.
func memoryOnly(idleWait time.Duration, attribute bool) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	self, _ := os.Executable()
	var procs children
	defer procs.stop()
	addr := benchutil.FreeAddr()
	fast := &mcpServer{name: "fast", args: fastArgs, url: "http://" + addr + "/mcp"}
	if fast.pid, err = procs.start(addr, nil, self, "-role=fast", "-listen="+addr); err != nil {
		return err
	}
	rss, err := managerIdleRSS(root, fast, idleWait, attribute)
	if err != nil {
		return err
	}
	fmt.Printf("idle RSS %.1f MB (target <= 40 MB) ", mb(rss))
	if rss > 40e6 {
		fmt.Println("MISSED")
		return errMissed
	}
	fmt.Println("met")
	return nil
}

// saToken is a real token of agents/bench for the bridge's audience.
func saToken(cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	exp := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts("agents").CreateToken(context.Background(), "bench", &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{Audiences: []string{authn.Audience}, ExpirationSeconds: &exp},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("TokenRequest for agents/bench: %w", err)
	}
	return tr.Status.Token, nil
}

// kubeconfigFile is a kubeconfig of a user of the test API server that may
// do anything, as the bridge's ServiceAccount may do what its role allows.
func kubeconfigFile(env *envtest.Environment, dir string) (string, error) {
	user, err := env.AddUser(envtest.User{Name: "bench-bridge", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}
