package controllers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"

	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// The node IPAM controller, as kube-controller-manager's range allocator (pkg/controller/nodeipam with
// --allocate-node-cidrs), for every cluster at once:
//
//   - Every Node without spec.podCIDR gets a /24 of its cluster's pod CIDR (kubeapi.Cluster.PodCIDR, read
//     through kubeapi.API.Cluster; default 10.244.0.0/16), written once to spec.podCIDR and spec.podCIDRs
//     (the API refuses to change them once set). A cluster's pod CIDR narrower than /24 is one node's.
//   - Clusters are separate networks: each has its own set of used CIDRs, so two clusters hand out the same
//     ones.
//   - The lowest free CIDR is taken, so one released by a deleted node is the next one handed out (upstream
//     rotates through the range before reusing; here a node's routes on other nodes are re-synced from the
//     Node list, so an early reuse costs nothing).
//   - The used set lives only in memory and is rebuilt from the nodes' spec.podCIDR whenever the node
//     collection is (re)delivered, consistently (watchcache.Collection.Fresh: it has every write committed
//     before): nothing is allocated before the whole list has been seen, so a restart, or a new controller
//     leader, never hands out a CIDR a node already has. Each write is on the resourceVersion the allocation
//     was decided on, so a node is never given two.
//   - A full range records a CIDRNotAvailable event on the node and retries it with the queue's backoff, and
//     at once when a node of the cluster is deleted.
//
// Not done: secondary (IPv6) CIDRs, the cloud allocator, --node-cidr-mask-size (fixed at /24).

// nodeCIDRBits is the prefix length of a node's pod CIDR (upstream's --node-cidr-mask-size for IPv4).
const nodeCIDRBits = 24

// defaultPodCIDR is a cluster's pod CIDR when kubeapi.Cluster has none (tenancy.DefaultPodCIDR).
const defaultPodCIDR = "10.244.0.0/16"

// errCIDRNotAvailable is a reconcile's error for a node that found its cluster's range full.
var errCIDRNotAvailable = errors.New("controllers: no pod CIDR available")

// RunNodeIPAM runs the controller until ctx ends. Keys are nodes: (cluster, "", name).
func RunNodeIPAM(ctx context.Context, d Deps) { newNodeIPAM(d).run(ctx) }

type nodeIPAM struct {
	d     Deps
	log   *slog.Logger
	cl    *clients
	q     workqueue.TypedRateLimitingInterface[Key]
	nodes func(context.Context) (*watchcache.Collection, error)

	// mu guards everything below; it is never held across an API call.
	mu sync.Mutex
	// synced is false from a delivery's Reset until its Synced: no CIDR is handed out then, and keys wait in
	// pending.
	synced  bool
	pending []Key
	// seen are the nodes delivered since Reset; at Synced the others are forgotten.
	seen     map[Key]bool
	clusters map[string]*cidrSet
}

// cidrSet is the allocation state of one cluster.
type cidrSet struct {
	rng  netip.Prefix            // the cluster's pod CIDR; invalid until first needed
	used map[netip.Prefix]string // node CIDR → the node holding it
	of   map[string]nodeCIDR     // node → its CIDR
	// waiting are the nodes that found the range full; they are queued again when a CIDR is released.
	waiting map[string]bool
}

// nodeCIDR is a node's CIDR; inflight is one handed out whose write to the Node has not returned yet.
type nodeCIDR struct {
	cidr     netip.Prefix
	inflight bool
}

func newNodeIPAM(d Deps) *nodeIPAM {
	return &nodeIPAM{d: d, log: d.Logger.With("controller", "nodeipam"),
		cl: newClients(d.API, serviceAccountUser("node-controller")), q: newQueue("nodeipam"),
		nodes:    func(ctx context.Context) (*watchcache.Collection, error) { return d.collection(ctx, nodesGVR) },
		seen:     map[Key]bool{},
		clusters: map[string]*cidrSet{}}
}

func (c *nodeIPAM) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() {
		Follow(ctx, c.freshNodes, FollowHandlers{Reset: c.reset, Synced: c.endSync, Event: c.handle}, c.log)
	})
	work(ctx, c.q, 2, c.d.clock(), c.reconcile, c.log)
	wg.Wait()
}

// freshNodes is the node collection once it holds every write committed before the call: the used set is
// rebuilt from a list that has every CIDR handed out so far, by this process or a previous leader.
func (c *nodeIPAM) freshNodes(ctx context.Context) (*watchcache.Collection, error) {
	col, err := c.nodes(ctx)
	if err != nil {
		return nil, err
	}
	return col, col.Fresh(ctx)
}

// reset starts a new delivery of the node list: allocation stops until it has all been seen.
func (c *nodeIPAM) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.synced, c.pending, c.seen = false, nil, map[Key]bool{}
}

// endSync ends a delivery: nodes not seen again are gone (except CIDRs being written), and the nodes that
// wait for a CIDR are queued.
func (c *nodeIPAM) endSync() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for cluster, s := range c.clusters {
		for name, nc := range s.of {
			if k := (Key{Cluster: cluster, Name: name}); !c.seen[k] && !nc.inflight {
				s.release(name)
			}
		}
	}
	c.synced, c.seen = true, nil
	for _, k := range c.pending {
		c.q.Add(k)
	}
	c.pending = nil
}

// handle keeps the used sets in step with the nodes and queues the nodes that need a CIDR.
func (c *nodeIPAM) handle(ev watchcache.Event) {
	node, ok := ev.Object.Object.(*corev1.Node)
	if !ok {
		return
	}
	k := Key{Cluster: ev.Object.Cluster, Name: node.Name}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.set(k.Cluster)
	if ev.Type == store.Deleted {
		if s.release(k.Name) {
			c.wake(k.Cluster, s)
		}
		delete(s.waiting, k.Name)
		return
	}
	if c.seen != nil {
		c.seen[k] = true
	}
	if cidr, err := netip.ParsePrefix(node.Spec.PodCIDR); err == nil {
		if other := s.occupy(k.Name, cidr.Masked()); other != "" {
			c.log.Warn("two nodes have one pod CIDR", "cluster", k.Cluster, "node", k.Name, "other", other,
				"cidr", cidr.String())
		}
		return
	}
	if node.Spec.PodCIDR == "" {
		c.enqueue(k)
	}
}

// enqueue queues k now or, while a delivery is under way, at its end. Call with mu held.
func (c *nodeIPAM) enqueue(k Key) {
	if c.synced {
		c.q.Add(k)
	} else {
		c.pending = append(c.pending, k)
	}
}

// wake queues the nodes of a cluster that wait for a CIDR. Call with mu held.
func (c *nodeIPAM) wake(cluster string, s *cidrSet) {
	for name := range s.waiting {
		c.enqueue(Key{Cluster: cluster, Name: name})
	}
}

// set is the allocation state of a cluster, made on first use. Call with mu held.
func (c *nodeIPAM) set(cluster string) *cidrSet {
	s, ok := c.clusters[cluster]
	if !ok {
		s = &cidrSet{used: map[netip.Prefix]string{}, of: map[string]nodeCIDR{}, waiting: map[string]bool{}}
		c.clusters[cluster] = s
	}
	return s
}

// reconcile gives node k a CIDR if it has none.
func (c *nodeIPAM) reconcile(ctx context.Context, k Key) error {
	col, err := c.nodes(ctx)
	if err != nil {
		return err
	}
	e, ok, _ := col.GetIn(k.Cluster, "", k.Name)
	if !ok {
		return nil // deleted: the event released its CIDR
	}
	node := e.Object.(*corev1.Node)
	if node.Spec.PodCIDR != "" || node.DeletionTimestamp != nil {
		return nil
	}
	rng, err := c.clusterRange(ctx, k.Cluster)
	if err != nil {
		return err
	}
	cidr, ok, err := c.allocate(k, rng)
	if errors.Is(err, errCIDRNotAvailable) {
		c.recordUnavailable(k, node)
	}
	if err != nil || !ok {
		return err
	}
	if err := c.write(ctx, k, node, cidr); err != nil {
		c.mu.Lock()
		if s := c.set(k.Cluster); s.of[k.Name] == (nodeCIDR{cidr: cidr, inflight: true}) && s.release(k.Name) {
			c.wake(k.Cluster, s)
		}
		c.mu.Unlock()
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("node %s: set pod CIDR %s: %w", k, cidr, err)
	}
	c.mu.Lock()
	if s := c.set(k.Cluster); s.of[k.Name].cidr == cidr {
		s.of[k.Name] = nodeCIDR{cidr: cidr}
	}
	c.mu.Unlock()
	c.log.Info("node pod CIDR allocated", "cluster", k.Cluster, "node", k.Name, "cidr", cidr.String())
	return nil
}

// allocate hands node k the lowest free CIDR of rng (ok false: a delivery is under way, or the node has one
// already). A full range records the event and is errCIDRNotAvailable.
func (c *nodeIPAM) allocate(k Key, rng netip.Prefix) (cidr netip.Prefix, ok bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.synced {
		return netip.Prefix{}, false, nil // the delivery's Synced queues it again
	}
	s := c.set(k.Cluster)
	if _, has := s.of[k.Name]; has {
		return netip.Prefix{}, false, nil // being written by another worker, or the cache lags behind
	}
	cidr, ok = s.lowestFree(rng)
	if !ok {
		s.waiting[k.Name] = true
		return netip.Prefix{}, false, fmt.Errorf("node %s: cluster pod CIDR %s: %w", k, rng, errCIDRNotAvailable)
	}
	delete(s.waiting, k.Name)
	s.used[cidr] = k.Name
	s.of[k.Name] = nodeCIDR{cidr: cidr, inflight: true}
	return cidr, true, nil
}

// write sets the node's spec.podCIDR and spec.podCIDRs, on the version the cache had (a Conflict is retried
// on a newer one).
func (c *nodeIPAM) write(ctx context.Context, k Key, node *corev1.Node, cidr netip.Prefix) error {
	cs, err := c.cl.For(k.Cluster)
	if err != nil {
		return err
	}
	n := node.DeepCopy()
	n.Spec.PodCIDR, n.Spec.PodCIDRs = cidr.String(), []string{cidr.String()}
	_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{FieldManager: "node-ipam-controller"})
	return err
}

// clusterRange is the cluster's pod CIDR, read once per cluster.
func (c *nodeIPAM) clusterRange(ctx context.Context, cluster string) (netip.Prefix, error) {
	c.mu.Lock()
	rng := c.set(cluster).rng
	c.mu.Unlock()
	if rng.IsValid() {
		return rng, nil
	}
	cl, err := c.d.API.Cluster(ctx, cluster)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("cluster %s: %w", cluster, err)
	}
	s := cl.PodCIDR
	if s == "" {
		s = defaultPodCIDR
	}
	rng, err = netip.ParsePrefix(s)
	if err != nil || !rng.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("cluster %s: pod CIDR %q is not an IPv4 network", cluster, s)
	}
	rng = rng.Masked()
	c.mu.Lock()
	c.set(cluster).rng = rng
	c.mu.Unlock()
	return rng, nil
}

// recordUnavailable records the event of a node that found the range full (upstream's
// RecordNodeStatusChange).
func (c *nodeIPAM) recordUnavailable(k Key, node *corev1.Node) {
	c.d.recorder(k.Cluster, "cidrAllocator").Eventf(node, corev1.EventTypeNormal, "CIDRNotAvailable",
		"Node %s status is now: CIDRNotAvailable", node.Name)
}

// occupy records that node holds cidr (dropping what it held before) and returns another node that holds it
// too, if any.
func (s *cidrSet) occupy(node string, cidr netip.Prefix) (other string) {
	if old, ok := s.of[node]; ok && old.cidr != cidr {
		s.release(node)
	}
	delete(s.waiting, node)
	if holder, ok := s.used[cidr]; ok && holder != node {
		other = holder
	} else {
		s.used[cidr] = node
	}
	s.of[node] = nodeCIDR{cidr: cidr}
	return other
}

// release frees node's CIDR, reporting whether it held one.
func (s *cidrSet) release(node string) bool {
	nc, ok := s.of[node]
	if !ok {
		return false
	}
	delete(s.of, node)
	if s.used[nc.cidr] == node {
		delete(s.used, nc.cidr)
	}
	return true
}

// lowestFree is the lowest node CIDR of rng that no node holds.
func (s *cidrSet) lowestFree(rng netip.Prefix) (netip.Prefix, bool) {
	bits := max(nodeCIDRBits, rng.Bits())
	step := uint32(1) << (32 - bits)
	base := rng.Addr().As4()
	first := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	count := uint64(1) << (bits - rng.Bits())
	for i := range count {
		v := first + uint32(i)*step
		cidr := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), bits)
		if _, taken := s.used[cidr]; !taken {
			return cidr, true
		}
	}
	return netip.Prefix{}, false
}
