// Command netpol enforces NetworkPolicy on the dev node: it runs the policy
// engine of kube-network-policies (sigs.k8s.io/kube-network-policies, pinned
// in go.mod) as a host process beside kube-proxy, with the node's admin
// kubeconfig instead of an in-cluster ServiceAccount.
//
// The engine decides on the first packet of every connection that netfilter
// queues to it (NFQUEUE) and lets established connections through. Upstream
// queues those packets with an nftables "queue" rule; kernels built without
// nft_queue (this project's machines) reject that rule, so the dev cluster's
// scripts queue the same packets with the iptables NFQUEUE target instead
// (hack/cluster/netpol-rules.sh). The engine's own nftables sync then fails
// and is only logged: it leaves no table behind.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster whose NetworkPolicies to enforce")
	nodeName := flag.String("hostname-override", "", "the node's name (pods on this node are the ones enforced)")
	queueID := flag.Int("nfqueue-id", 100, "the NFQUEUE number the node's iptables rules send first packets to")
	klog.InitFlags(nil)
	flag.Parse()
	if *kubeconfig == "" || *nodeName == "" {
		fmt.Fprintln(os.Stderr, "netpol: --kubeconfig and --hostname-override are required")
		os.Exit(2)
	}
	if err := run(*kubeconfig, *nodeName, *queueID); err != nil {
		fmt.Fprintln(os.Stderr, "netpol:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, nodeName string, queueID int) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading %s: %w", kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	controller, err := networkpolicy.NewController(client,
		factory.Networking().V1().NetworkPolicies(),
		factory.Core().V1().Namespaces(),
		factory.Core().V1().Pods(),
		nil, nil, nil, nil, // nodes and (Baseline)AdminNetworkPolicy: not used here
		networkpolicy.Config{
			QueueID:  queueID,
			NodeName: nodeName,
			// Fail closed: a packet the engine cannot judge is dropped.
			FailOpen: false,
			// The race this works around is fixed in the kernels we run (6.12+).
			NetfilterBug1766Fix: false,
		})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	// Run returns when ctx ends (SIGTERM from down.sh) or when it cannot
	// open the queue.
	return controller.Run(ctx)
}
