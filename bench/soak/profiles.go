package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"golang.org/x/sys/unix"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/mcp-operator/mcp-operator/bench/internal/benchutil"
)

// pprofAddr is where the bridge and the controller serve their profiles
// during a run with -profiles: loopback inside each pod, reached from this
// node through the pod's network namespace.
const pprofAddr = "127.0.0.1:6060"

// withArgs adds args to the manager container of the dev cluster's
// Deployments that run one of parts (bridge, controller), where it has not
// got them; their pods are replaced (set-up waits for the bridge's).
func withArgs(ctx context.Context, cs *kubernetes.Clientset, parts []string, args ...string) error {
	deps, err := cs.AppsV1().Deployments(benchutil.DevBridgeNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range deps.Items {
		dep := &deps.Items[i]
		if !addArgs(dep, parts, args) {
			continue
		}
		if _, err := cs.AppsV1().Deployments(dep.Namespace).Update(ctx, dep, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("while adding %v to %s: %w", args, dep.Name, err)
		}
	}
	return nil
}

// addArgs adds to dep's manager container, if it runs one of parts, those
// of args it has not got; it says whether it added any.
func addArgs(dep *appsv1.Deployment, parts, args []string) bool {
	for i := range dep.Spec.Template.Spec.Containers {
		c := &dep.Spec.Template.Spec.Containers[i]
		if len(c.Args) == 0 || !slices.Contains(parts, c.Args[0]) {
			continue
		}
		added := false
		for _, a := range args {
			if !slices.Contains(c.Args, a) {
				c.Args = append(c.Args, a)
				added = true
			}
		}
		return added
	}
	return false
}

// saveProfiles writes the heap and goroutine profiles of every bridge and
// controller process on this node to dir, named by part, pid and stage:
// two stages of a process compare with go tool pprof -base.
func saveProfiles(dir, stage string) {
	for _, part := range []string{"bridge", "controller"} {
		pids, _ := benchutil.ManagerPIDs(part)
		for _, pid := range pids {
			for _, p := range []struct{ path, file string }{
				{"/debug/pprof/heap", "heap.pb.gz"},
				{"/debug/pprof/goroutine?debug=1", "goroutines.txt"},
			} {
				name := filepath.Join(dir, fmt.Sprintf("%s-%d-%s-%s", part, pid, stage, p.file))
				if err := fetchInNetns(pid, p.path, name); err != nil {
					fmt.Printf("profile %s not saved: %v\n", name, err)
				}
			}
		}
	}
}

// fetchInNetns GETs path from pprofAddr in the network namespace of pid
// into file.
func fetchInNetns(pid int, path, file string) error {
	// One connection a fetch, closed after it: a kept-alive one would
	// count as the process's fd and goroutine from then on.
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext:       func(context.Context, string, string) (net.Conn, error) { return dialInNetns(pid, pprofAddr) },
	}}
	resp, err := hc.Get("http://" + pprofAddr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	defer out.Close()
	_, err = io.Copy(out, resp.Body)
	return err
}

// dialInNetns opens a TCP connection to addr from inside the network
// namespace of pid: the socket is made on an OS thread moved into that
// namespace, and keeps to it after. The thread is never given back to the
// scheduler (the goroutine ends locked), so no other goroutine runs there.
func dialInNetns(pid int, addr string) (net.Conn, error) {
	type dialed struct {
		c   net.Conn
		err error
	}
	ch := make(chan dialed, 1)
	go func() {
		runtime.LockOSThread()
		ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			ch <- dialed{nil, err}
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- dialed{nil, fmt.Errorf("while entering the network namespace of %d: %w", pid, err)}
			return
		}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		ch <- dialed{c, err}
	}()
	d := <-ch
	return d.c, d.err
}
