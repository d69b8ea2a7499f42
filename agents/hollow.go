package agents

// Hollow mode (docs/design/agent.md): `wheelhouse agent --hollow N` runs N simulated nodes in one process, for
// scale tests and perf. Each hollow node is what the control plane sees of a real one — its own name
// (<prefix>-<i>), its own credential (joined with one token allowing N uses) and identity dir, registration, a
// Lease renewed every 10 s, its status, an informer over the pods bound to it and one worker per pod writing
// their statuses and events — on the in-memory runtime (agents/runtime/fake): containers are Running at once
// and every probe and lifecycle hook succeeds (kubelet.PodsConfig.HandlersSucceed). Each node keeps its own
// tunnel to the server, serving its kubelet API (healthz, nodes/proxy, pod logs; exec and port-forward of the
// fake runtime's containers fail). Left out: the pod network (pods get no IP: the fake runtime reports none),
// route syncing and the host's real facts (a synthetic machine of 4 CPUs, 16 GiB and 110 pods, InternalIP
// 10.250.x.y from the node's index).
//
// Memory: every node has its own clientset and so its own HTTP/2 connection (client-go's transport cache is
// skipped on purpose, so the server sees N connections as with N machines), one pod informer, one event
// broadcaster and one fake runtime; nothing else per node.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/wheelhouse-dev/wheelhouse/agents/dns"
	"github.com/wheelhouse-dev/wheelhouse/agents/join"
	"github.com/wheelhouse-dev/wheelhouse/agents/kubelet"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/fake"
	"github.com/wheelhouse-dev/wheelhouse/version"
)

// MaxHollow bounds --hollow: the InternalIPs come from 10.250.0.0/16.
const MaxHollow = 10_000

// hollowJoiners is how many hollow nodes join (and register) at once.
const hollowJoiners = 16

// hollowNode is one simulated node: its name, its index (for its synthetic addresses) and a client with its
// credential.
type hollowNode struct {
	name  string
	index int
	cs    kubernetes.Interface
	id    *join.Identity // nil in tests that give the node no tunnel
}

// hollowOptions is what every hollow node shares.
type hollowOptions struct {
	// DataDir holds hollow/<name>/ per node: its identity and its pods' volumes.
	DataDir string
	Labels  map[string]string
	Taints  []corev1.Taint
	// Resync is each pod's relist interval (default 1 minute, upstream kubelet's --sync-frequency, which its
	// hollow nodes in kubemark keep: the fake runtime changes only when told to, and every change to a pod
	// in the API wakes its worker at once).
	Resync time.Duration
	// RenewInterval is the Lease's renew interval (default kubelet's 10 s); node starts are spread over it.
	RenewInterval time.Duration
	// Services lists the cluster's Services for the pods' service links: one informer for all the nodes
	// (runHollowNodes makes it when nil).
	Services corelisters.ServiceLister
	Logger   *slog.Logger
}

// hollowName is the name of the i-th hollow node.
func hollowName(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }

// runHollow joins cfg.Hollow nodes named <prefix>-<i> with cfg.Token (or their kept identities) and runs them
// until ctx ends.
func runHollow(ctx context.Context, cfg Config, log *slog.Logger) error {
	prefix := cfg.NodeName
	if prefix == "" {
		prefix = DefaultNodeName()
	}
	log.Info("joining hollow nodes", "count", cfg.Hollow, "prefix", prefix)
	nodes := make([]hollowNode, cfg.Hollow)
	err := forEach(ctx, cfg.Hollow, hollowJoiners, func(ctx context.Context, i int) error {
		name := hollowName(prefix, i)
		id, err := join.Join(ctx, join.Config{Server: cfg.Server, Token: cfg.Token, NodeName: name,
			DataDir: filepath.Join(cfg.DataDir, "hollow", name, "identity"), InsecureHTTP: cfg.InsecureHTTP})
		if err != nil {
			return fmt.Errorf("hollow node %s: %w", name, err)
		}
		cs, err := hollowClient(id)
		if err != nil {
			return fmt.Errorf("hollow node %s: %w", name, err)
		}
		nodes[i] = hollowNode{name: name, index: i, cs: cs, id: id}
		return nil
	})
	if err != nil {
		return err
	}
	cfg.forgetJoinToken(log)
	return runHollowNodes(ctx, nodes, hollowOptions{DataDir: cfg.DataDir, Labels: cfg.Labels, Taints: cfg.Taints, Logger: log})
}

// hollowClient is a clientset with the node's credential on a transport of its own (one connection per node).
func hollowClient(id *join.Identity) (kubernetes.Interface, error) {
	rc := id.RESTConfig()
	rc.QPS, rc.Burst = kubeAPIQPS, kubeAPIBurst
	rc.UserAgent = "wheelhouse-agent-hollow/" + id.NodeName
	// A dialer of its own keeps client-go from sharing one cached transport between all nodes.
	rc.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return kubernetes.NewForConfig(rest.CopyConfig(rc))
}

// runHollowNodes registers every node, then runs each one's lease and status loop and pod manager until ctx
// ends. A node that cannot register stops them all (the error says which); later API failures are logged and
// retried by the loops, as on a real node.
func runHollowNodes(ctx context.Context, nodes []hollowNode, opt hollowOptions) error {
	if opt.Resync == 0 {
		opt.Resync = time.Minute
	}
	if opt.RenewInterval == 0 {
		opt.RenewInterval = 10 * time.Second
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	bootID := randomID()
	kubes := make([]*kubelet.Node, len(nodes))
	err := forEach(ctx, len(nodes), hollowJoiners, func(ctx context.Context, i int) error {
		n := nodes[i]
		host := hollowHost(n.name, n.index, bootID)
		node, err := kubelet.NewNode(n.cs, kubelet.NodeConfig{Name: n.name, Labels: opt.Labels, Taints: opt.Taints,
			KubeletVersion: version.Get().GitVersion, RuntimeVersion: fake.RuntimeName + "://0.1.0",
			Host: func() (kubelet.Host, error) { return host, nil }, RenewInterval: opt.RenewInterval,
			Logger: log.With("node", n.name)})
		if err != nil {
			return err
		}
		if err := node.Register(ctx); err != nil {
			return fmt.Errorf("hollow node %s: %w", n.name, err)
		}
		kubes[i] = node
		return nil
	})
	if err != nil {
		return err
	}
	log.Info("hollow nodes registered", "count", len(nodes))
	if opt.Services == nil && len(nodes) > 0 {
		// One watch of the Services for every node of the process (on the first node's credential), not one each.
		inf := newServiceInformers(nodes[0].cs)
		if err := inf.start(ctx); err != nil {
			return err
		}
		defer inf.factory.Shutdown()
		opt.Services = inf.services
	}
	var wg sync.WaitGroup
	for i, n := range nodes {
		// Spread the nodes' lease renewals over the interval instead of renewing all at once.
		delay := opt.RenewInterval * time.Duration(i) / time.Duration(len(nodes))
		wg.Go(func() { runHollowNode(ctx, n, kubes[i], delay, opt, log.With("node", n.name)) })
	}
	wg.Wait()
	return nil
}

// runHollowNode runs one registered node's loops until ctx ends, the first after delay.
func runHollowNode(ctx context.Context, n hollowNode, node *kubelet.Node, delay time.Duration, opt hollowOptions, log *slog.Logger) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(delay):
	}
	rt := fake.New(fake.WithoutCallLog())
	events := record.NewBroadcaster(record.WithContext(ctx))
	defer events.Shutdown()
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: n.cs.CoreV1().Events("")})
	recorder := events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: n.name})
	ip := hollowIP(n.index)
	pods, err := kubelet.NewPods(n.cs, kubelet.PodsConfig{NodeName: n.name, Runtime: rt, Images: rt, RuntimeName: "fake",
		DataDir: filepath.Join(opt.DataDir, "hollow", n.name), NodeIP: func() string { return ip }, Resync: opt.Resync,
		HandlersSucceed: true, Recorder: recorder, Services: opt.Services,
		// Hollow pods have no network: their resolver names the node's address, which is never asked.
		DNS:    dns.ClusterDNS{Servers: []string{ip}},
		Logger: log.With("component", "pods")})
	if err != nil {
		log.Error("the hollow node's pod manager cannot start", "err", err)
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { node.Run(ctx) })
	wg.Go(func() {
		if err := pods.Run(ctx); err != nil {
			log.Error("the pod manager stopped", "err", err)
		}
	})
	if n.id != nil {
		wg.Go(func() { serveTunnel(ctx, n.id, pods.APIHandler(), log) })
	}
	wg.Wait()
}

// hollowHost is the synthetic machine of the i-th hollow node: 4 CPUs, 16 GiB, no pressure of any kind.
func hollowHost(name string, i int, bootID string) kubelet.Host {
	sum := sha256.Sum256([]byte(name))
	return kubelet.Host{Hostname: name, CPUs: 4, MemoryBytes: 16 << 30, MemoryAvailableBytes: 14 << 30,
		DiskBytes: 100 << 30, DiskAvailableBytes: 80 << 30, PIDs: 300, PIDMax: 4194304,
		MachineID: hex.EncodeToString(sum[:16]), BootID: bootID, KernelVersion: "hollow", OSImage: "Wheelhouse hollow node",
		Arch: goruntime.GOARCH, InternalIP: hollowIP(i)}
}

// hollowIP is the i-th hollow node's InternalIP: 10.250.0.1, 10.250.0.2, ... (i < MaxHollow).
func hollowIP(i int) string {
	n := i + 1
	return fmt.Sprintf("10.250.%d.%d", n/256, n%256)
}

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// forEach runs f for 0..n-1, at most limit at once, and returns the first error (which cancels the rest).
func forEach(ctx context.Context, n, limit int, f func(context.Context, int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	for i := range n {
		g.Go(func() error { return f(ctx, i) })
	}
	return g.Wait()
}
