package agents

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/wheelhouse-dev/wheelhouse/agents/join"
	"github.com/wheelhouse-dev/wheelhouse/agents/network"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
)

// defaultClusterCIDR is tenancy's default pod CIDR, for an identity kept before joins reported the cluster's.
const defaultClusterCIDR = "10.244.0.0/16"

// podNetwork waits for the control plane to give the node its pod CIDR (the node IPAM controller), then sets up
// the node's pod network: bridge, masquerade, forwarding.
func podNetwork(ctx context.Context, cs kubernetes.Interface, id *join.Identity, dataDir string, log *slog.Logger) (*network.Network, error) {
	var podCIDR string
	for waited := false; ; waited = true {
		node, err := cs.CoreV1().Nodes().Get(ctx, id.NodeName, metav1.GetOptions{})
		if err == nil && node.Spec.PodCIDR != "" {
			podCIDR = node.Spec.PodCIDR
			break
		}
		if !waited {
			log.Info("waiting for the node's pod CIDR from the control plane")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second): // polling the API until the controller has allocated
		}
	}
	cluster := id.PodCIDR
	if cluster == "" {
		cluster = defaultClusterCIDR
	}
	nodeNet, err := netip.ParsePrefix(podCIDR)
	if err != nil {
		return nil, fmt.Errorf("agent: the node's pod CIDR %q: %w", podCIDR, err)
	}
	clusterNet, err := netip.ParsePrefix(cluster)
	if err != nil {
		return nil, fmt.Errorf("agent: the cluster's pod CIDR %q: %w", cluster, err)
	}
	n, err := network.New(network.Config{PodCIDR: nodeNet, ClusterCIDR: clusterNet, StateDir: filepath.Join(dataDir, "network")})
	if err != nil {
		return nil, err
	}
	if err := n.Setup(ctx); err != nil {
		n.Close()
		return nil, fmt.Errorf("agent: pod network: %w", err)
	}
	log.Info("pod network ready", "podCIDR", podCIDR, "gateway", n.Gateway())
	return n, nil
}

// syncRoutes keeps host-gw routes to the other nodes' pod CIDRs via their InternalIPs: at once when a Node is
// added, changed or deleted (a node that joins is reachable as soon as it has its pod CIDR and address), and
// every 10 s to repair routes someone else removed.
func syncRoutes(ctx context.Context, cs kubernetes.Interface, n *network.Network, self string, log *slog.Logger) {
	factory := informers.NewSharedInformerFactory(cs, 0)
	defer factory.Shutdown()
	nodes := factory.Core().V1().Nodes()
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default: // a sync is already due
		}
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) { poke() },
		UpdateFunc: func(any, any) { poke() }, DeleteFunc: func(any) { poke() }}); err != nil {
		log.Error("cannot watch the nodes for routes", "err", err)
		return
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced) {
		return
	}
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		all, err := nodes.Lister().List(labels.Everything())
		if err == nil {
			peers := map[netip.Prefix]netip.Addr{}
			for _, node := range all {
				if p, a, ok := peerRoute(node, self); ok {
					peers[p] = a
				}
			}
			err = n.SyncRoutes(ctx, peers)
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("syncing routes to other nodes failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-t.C:
		}
	}
}

// peerRoute is the route to another node's pods: its pod CIDR via its InternalIP.
func peerRoute(node *corev1.Node, self string) (netip.Prefix, netip.Addr, bool) {
	if node.Name == self || node.Spec.PodCIDR == "" {
		return netip.Prefix{}, netip.Addr{}, false
	}
	p, err := netip.ParsePrefix(node.Spec.PodCIDR)
	if err != nil {
		return netip.Prefix{}, netip.Addr{}, false
	}
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			if addr, err := netip.ParseAddr(a.Address); err == nil {
				return p, addr, true
			}
		}
	}
	return netip.Prefix{}, netip.Addr{}, false
}

// reclaimAddresses releases the pod addresses (and veth pairs) of sandboxes the runtime no longer has: they
// vanished while the agent was down. It runs before any pod worker, so no sandbox is being created.
func reclaimAddresses(ctx context.Context, n *network.Network, rt runtime.Runtime, log *slog.Logger) error {
	sandboxes, err := rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return err
	}
	live := make(map[string]bool, len(sandboxes))
	for _, sb := range sandboxes {
		live[sb.Id] = true
	}
	gone, err := n.Reclaim(ctx, live)
	if len(gone) > 0 {
		log.Info("released the pod addresses of vanished sandboxes", "sandboxes", gone)
	}
	return err
}
