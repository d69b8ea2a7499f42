// Package agents is the node agent, `wheelhouse agent`: it turns a Linux machine into a node of one cluster.
// Run joins the cluster once (agents/join), then runs the kubelet (agents/kubelet: the Node, its Lease and
// status, the pods bound to it, through a runtime from agents/runtime), the Service proxy (agents/proxy) and the
// cluster DNS server (agents/dns) on one watch of Services and EndpointSlices (services.go), and keeps the tunnel
// (agents/tunnel) over which the server reaches the kubelet's API for logs, exec and port-forward. Only outbound
// connections: the agent works behind NAT. See docs/design/agent.md and docs/design/proxy.md.
package agents

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/wheelhouse-dev/wheelhouse/agents/apiproxy"
	"github.com/wheelhouse-dev/wheelhouse/agents/dns"
	"github.com/wheelhouse-dev/wheelhouse/agents/join"
	"github.com/wheelhouse-dev/wheelhouse/agents/kubelet"
	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
	"github.com/wheelhouse-dev/wheelhouse/agents/registries"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/process"
	"github.com/wheelhouse-dev/wheelhouse/agents/tunnel"
	"github.com/wheelhouse-dev/wheelhouse/version"
)

// Config is the agent's configuration (flags and WHEELHOUSE_* variables are bound in cmd/wheelhouse).
type Config struct {
	// Server is the server's base URL; Token a join token (needed on the first start only).
	Server, Token string
	// TokenFile holds the join token when Token is empty; it is deleted once the node's credential is kept
	// (jointoken.go).
	TokenFile string
	// NodeName names the node (default: the host name, lower-cased).
	NodeName string
	// DataDir keeps the identity, the runtime's state, volumes and logs (default /var/lib/wheelhouse-agent).
	DataDir string
	// Runtime is RuntimeProcess (host processes in the pod's namespaces) or RuntimeContainerd (images, through
	// containerd's CRI plugin at ContainerdEndpoint, pods networked by the CNI configuration the agent writes in
	// CNIConfDir).
	Runtime string
	// ContainerdEndpoint is containerd's socket. "" is the system's at cri.DefaultEndpoint when one answers
	// there, else one the agent runs itself under DataDir/containerd (containerd.go, agents/runtime/cri/managed),
	// supervised and stopped when Run returns. CNIConfDir is the CNI configuration directory a containerd the
	// agent does not run reads (default /etc/cni/net.d); the agent's own reads DataDir/containerd/net.d.
	ContainerdEndpoint, CNIConfDir string
	// NodeIP overrides the InternalIP guess.
	NodeIP string
	// Labels and Taints are added at registration.
	Labels map[string]string
	Taints []corev1.Taint
	// InsecureHTTP allows an http:// server (local development).
	InsecureHTTP bool
	// Hollow > 0 runs that many simulated nodes in this process instead of this machine's node (hollow mode,
	// hollow.go): NodeName is then their names' prefix, Runtime is ignored (they run on the fake runtime) and
	// Token must allow Hollow uses on the first start.
	Hollow int
	// LeaseDuration is the node Lease's leaseDurationSeconds (default 40 s, kubelet's
	// --node-lease-duration-seconds); the Lease renews every quarter of it, as kubelet's.
	LeaseDuration time.Duration
	// ProxyMode is the Service proxy's backend: ProxyAuto (default: IPVS when the kernel has it, else
	// nftables), ProxyIPVS, ProxyNFTables or ProxyNone.
	ProxyMode string
	// IPVSScheduler is IPVS mode's scheduler (default rr; lc, sh, ... as ipvsadm names them).
	IPVSScheduler string
	// ProxyMinSync and ProxySync are the proxy's least time between syncs and its full read-back period
	// (defaults 1 s and 1 min, kube-proxy's --min-sync-period and --sync-period).
	ProxyMinSync, ProxySync time.Duration
	// ClusterDomain is the cluster's DNS domain (default cluster.local), served by the agent's DNS server.
	ClusterDomain string
	// MaxParallelPodStarts is how many pods start at once at most, the others waiting their turn in the order
	// they came (0: twice the CPUs; negative: no limit); kubelet.PodsConfig.MaxParallelStarts.
	MaxParallelPodStarts int
	// Registries is a registries.yaml (k3s's format, agents/registries): its mirrors, CAs and client
	// certificates go into containerd's hosts directory, its credentials into the agent's pulls ("": none).
	Registries string
	// PauseImage is the sandbox image of a containerd the agent runs itself and the image garbage collection
	// keeps (default kubelet.DefaultSandboxImage).
	PauseImage string
	// ImagePulls are kubelet's serializeImagePulls and maxParallelImagePulls (the zero value: one at a time).
	ImagePulls kubelet.ImagePullLimits
	Logger     *slog.Logger
}

// The runtimes (Config.Runtime).
const (
	RuntimeProcess    = "process"
	RuntimeContainerd = "containerd"
)

// DefaultCNIConfDir is where containerd reads CNI configurations by default.
const DefaultCNIConfDir = "/etc/cni/net.d"

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Server == "":
		return errors.New("agent: --server is required")
	case c.DataDir == "":
		return errors.New("agent: --data-dir is required")
	case c.LeaseDuration != 0 && c.LeaseDuration < 4*time.Second:
		return fmt.Errorf("agent: --node-lease-duration-seconds %d: want at least 4", int(c.LeaseDuration/time.Second))
	case c.Hollow < 0 || c.Hollow > MaxHollow:
		return fmt.Errorf("agent: --hollow %d: want 0 to %d nodes", c.Hollow, MaxHollow)
	case c.Hollow == 0 && c.Runtime != RuntimeProcess && c.Runtime != RuntimeContainerd:
		return fmt.Errorf("agent: --runtime %q: want %s or %s", c.Runtime, RuntimeProcess, RuntimeContainerd)
	case !slices.Contains([]string{"", ProxyAuto, ProxyIPVS, ProxyNFTables, ProxyNone}, c.ProxyMode):
		return fmt.Errorf("agent: --proxy-mode %q: want auto, ipvs, nftables or none", c.ProxyMode)
	case c.IPVSScheduler != "" && !slices.Contains(ipvsSchedulers, c.IPVSScheduler):
		return fmt.Errorf("agent: --ipvs-scheduler %q: want one of %s", c.IPVSScheduler, strings.Join(ipvsSchedulers, ", "))
	case c.ProxyMinSync < 0 || c.ProxySync < 0 || c.ProxySync > 0 && c.ProxySync < c.ProxyMinSync:
		return fmt.Errorf("agent: --proxy-min-sync-period %s, --proxy-sync-period %s: want the sync period at least the minimum", c.ProxyMinSync, c.ProxySync)
	}
	if err := c.ImagePulls.Validate(); err != nil {
		return fmt.Errorf("agent: --serialize-image-pulls, --max-parallel-image-pulls: %w", err)
	}
	if c.Registries != "" {
		// Read now, before a join spends a single-use token; the agent reads it again when it starts containerd.
		if _, err := registries.Load(c.Registries); err != nil {
			return fmt.Errorf("agent: --registries: %w", err)
		}
	}
	if c.ClusterDomain != "" {
		if errs := validation.IsDNS1123Subdomain(strings.TrimSuffix(c.ClusterDomain, ".")); len(errs) > 0 {
			return fmt.Errorf("agent: --cluster-domain %q: %s", c.ClusterDomain, strings.Join(errs, "; "))
		}
	}
	return nil
}

// The agent's client rate limits, kubelet's defaults (--kube-api-qps 50, --kube-api-burst 100). client-go's own
// (5/s, burst 10) would hold a node starting a few pods at once for seconds: each pod's start takes several
// requests (its service account token, status writes). As in kubelet, events have a client and limits of their
// own (--event-qps 50, --event-burst 100) and the node's heartbeat (Lease, node status) one without a limit, so
// that neither waits behind the other: with one shared limit, 50 pods started at 20/s spent their tokens by the
// 20th pod and the last ones waited 0.6 s for their status writes (make perf-agent).
const (
	kubeAPIQPS   = 50
	kubeAPIBurst = 100
	eventQPS     = 50
	eventBurst   = 100
)

// clients are the agent's clientsets on one credential, each with its own rate limit (see kubeAPIQPS).
type clients struct {
	api, events, heartbeat kubernetes.Interface
}

func newClients(rc *rest.Config) (clients, error) {
	with := func(qps float32, burst int) (kubernetes.Interface, error) {
		c := rest.CopyConfig(rc)
		c.QPS, c.Burst = qps, burst
		return kubernetes.NewForConfig(c)
	}
	var (
		cl  clients
		err error
	)
	if cl.api, err = with(kubeAPIQPS, kubeAPIBurst); err != nil {
		return cl, err
	}
	if cl.events, err = with(eventQPS, eventBurst); err != nil {
		return cl, err
	}
	cl.heartbeat, err = with(-1, 0) // a negative QPS: no client-side limit
	return cl, err
}

// DefaultNodeName is the host name, lower-cased, other characters than a DNS subdomain allows made "-".
func DefaultNodeName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "node"
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		}
		return '-'
	}, h)
}

// Run runs the agent until ctx ends. Pods keep running when it returns; the next start adopts them.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	// The runtime keeps absolute paths in its state (and its helpers change directory): a relative data dir
	// (`make run`'s ./.wheelhouse/agent) is taken from the working directory once, here.
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("agent: data dir %q: %w", cfg.DataDir, err)
	}
	cfg.DataDir = dir
	if cfg.Token, err = cfg.joinToken(); err != nil {
		return err
	}
	if cfg.Hollow > 0 {
		return runHollow(ctx, cfg, log)
	}
	if cfg.NodeName == "" {
		cfg.NodeName = DefaultNodeName()
	}
	id, err := join.Join(ctx, join.Config{Server: cfg.Server, Token: cfg.Token, NodeName: cfg.NodeName,
		DataDir: filepath.Join(cfg.DataDir, "identity"), InsecureHTTP: cfg.InsecureHTTP})
	if err != nil {
		return err
	}
	cfg.forgetJoinToken(log)
	log = log.With("node", id.NodeName, "cluster", id.Cluster)
	cl, err := newClients(id.RESTConfig())
	if err != nil {
		return err
	}
	cs := cl.api
	host, err := kubelet.ReadHost(cfg.DataDir, cfg.NodeIP)
	if err != nil {
		return err
	}
	events := record.NewBroadcaster(record.WithContext(ctx))
	defer events.Shutdown()
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cl.events.CoreV1().Events("")})
	recorder := events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: id.NodeName})
	// containerd is asked first: the node reports its version, and is not Ready while it is down.
	var (
		crt *cri.Runtime
		ctd containerd
	)
	runtimeVersion, healthy := process.RuntimeName+"://"+process.Version, func() error { return nil }
	var regs nodeRegistries
	if cfg.Runtime == RuntimeContainerd {
		if regs, err = loadRegistries(cfg, log); err != nil {
			return err
		}
		if ctd, err = useContainerd(ctx, cfg, regs, log); err != nil {
			return err
		}
		defer ctd.stop() // after the runtime's client is closed (defers run last first)
		if crt, err = cri.Open(ctx, cri.Config{Endpoint: ctd.endpoint, Logger: log.With("component", "runtime")}); err != nil {
			return err
		}
		defer crt.Close()
		v, err := crt.Version(ctx, "v1")
		if err != nil {
			return fmt.Errorf("agent: containerd's version: %w", err)
		}
		runtimeVersion = v.RuntimeName + "://" + v.RuntimeVersion
		healthy = func() error {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			return crt.Healthy(ctx)
		}
	}
	node, err := kubelet.NewNode(cl.heartbeat, kubelet.NodeConfig{Name: id.NodeName, Labels: cfg.Labels, Taints: cfg.Taints,
		LeaseDuration: cfg.LeaseDuration, RenewInterval: cfg.LeaseDuration / 4,
		KubeletVersion: version.Get().GitVersion, RuntimeVersion: runtimeVersion, Healthy: healthy, Recorder: recorder,
		Host: func() (kubelet.Host, error) { return kubelet.ReadHost(cfg.DataDir, cfg.NodeIP) }, Logger: log})
	if err != nil {
		return err
	}
	if err := node.Register(ctx); err != nil {
		return err
	}
	podNet, err := podNetwork(ctx, cs, id, cfg.DataDir, log)
	if err != nil {
		return err
	}
	defer podNet.Close()
	var (
		imageGC     kubelet.ImageGCPolicy
		rt          kubeletRuntime
		runtimeName string
		serveStream func(context.Context) error // the process runtime's streaming server
	)
	if crt != nil {
		cniDir := ctd.cniConfDir
		if err := podNet.WriteCNIConfig(cniDir, filepath.Join(cfg.DataDir, "cni")); err != nil {
			return err
		}
		log.Info("CNI configuration written for containerd", "dir", cniDir)
		rt, runtimeName = crt, RuntimeContainerd
		imageGC.SandboxImage = cmp.Or(crt.SandboxImage(ctx), cfg.PauseImage, kubelet.DefaultSandboxImage)
	} else {
		prt, err := process.New(process.Config{StateDir: filepath.Join(cfg.DataDir, "runtime"), Network: podNet,
			Logger: log.With("component", "runtime")})
		if err != nil {
			return err
		}
		defer prt.Close()
		if err := reclaimAddresses(ctx, podNet, prt, log); err != nil {
			log.Warn("reclaiming pod addresses failed", "err", err)
		}
		rt, runtimeName, serveStream = prt, RuntimeProcess, prt.Start
	}

	domain := cmp.Or(strings.TrimSuffix(cfg.ClusterDomain, "."), dns.DefaultDomain)
	// The cluster's API for its pods: this node serves it on its gateway, and the kubernetes Service leads there
	// (docs/design/incluster.md). Without it (the port taken) the Service has no endpoint on this node.
	var apiEndpoint netip.AddrPort
	serverTLS, err := id.TLSConfig()
	if err != nil {
		return err
	}
	apiProxy, err := apiproxy.New(apiproxy.Config{Listen: netip.AddrPortFrom(podNet.Gateway(), apiproxy.Port),
		APIServer: id.APIServer, ServerTLS: serverTLS, Credential: id.Credential, ClusterDomain: domain, Node: id.NodeName,
		Logger: log.With("component", "apiproxy")})
	if err != nil {
		return err
	}
	if err := apiProxy.Listen(); err != nil {
		log.Error("the in-cluster API endpoint cannot start: the kubernetes Service has no endpoint on this node", "err", err)
		apiProxy = nil
	} else {
		defer apiProxy.Close()
		apiEndpoint = netip.AddrPortFrom(podNet.Gateway(), apiproxy.Port)
	}

	// Services: one watch of Services and EndpointSlices for the kubelet's service links, the proxy and DNS.
	svcInf := newServiceInformers(cs)
	svcCtx, stopServices := context.WithCancel(ctx)
	defer stopServices()
	pcfg := proxyConfig{mode: cfg.ProxyMode, scheduler: cfg.IPVSScheduler, clusterCIDR: podNet.ClusterCIDR(),
		minSync: cfg.ProxyMinSync, fullSync: cfg.ProxySync}
	backend, mode, err := newProxyBackend(pcfg, log.With("component", "proxy"))
	if err != nil {
		return err
	}
	var proxyLoop *proxy.Loop
	if backend != nil {
		defer backend.Close()
		if err := podNet.EnableBridgeNetfilter(); err != nil {
			log.Warn("pods will not reach Services whose endpoints share their node", "err", err)
		}
		proxyRecorder := events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "wheelhouse-proxy", Host: id.NodeName})
		nodeRef := &corev1.ObjectReference{Kind: "Node", Name: id.NodeName, UID: types.UID(id.NodeName)}
		if proxyLoop, err = newProxyLoop(backend, pcfg, svcInf, proxyNode(id.NodeName, func() string { return host.InternalIP }),
			apiEndpoint, proxyRecorder, nodeRef, log.With("component", "proxy")); err != nil {
			return err
		}
	}
	// Without its DNS server (port 53 of the gateway taken by another program) the node still runs pods: they get
	// the host's resolver and a MissingClusterDNS event, as on a kubelet without --cluster-dns.
	clusterDNS := []string{podNet.Gateway().String()}
	if _, err := startDNS(svcCtx, svcInf, podNet.Gateway(), domain, log.With("component", "dns")); err != nil {
		log.Error("the cluster DNS server cannot start: pods get the host's resolver", "err", err)
		clusterDNS = nil
	}
	hostResolver, err := dns.ReadResolver(dns.DefaultResolvConf)
	if err != nil {
		log.Warn("pods with dnsPolicy Default get no nameserver", "err", err)
	}
	if err := svcInf.start(svcCtx); err != nil {
		return err
	}
	if clusterDNS != nil {
		log.Info("cluster DNS ready", "listen", netip.AddrPortFrom(podNet.Gateway(), 53), "domain", domain)
	}

	pods, err := kubelet.NewPods(cs, kubelet.PodsConfig{NodeName: id.NodeName, Runtime: rt, Images: rt, ImageGC: imageGC, RuntimeName: runtimeName,
		DataDir: cfg.DataDir, NodeIP: func() string { return host.InternalIP }, Recorder: recorder, Services: svcInf.services,
		DNS:               dns.ClusterDNS{Servers: clusterDNS, Domain: domain, Host: hostResolver},
		MaxParallelStarts: cfg.MaxParallelPodStarts, ImagePulls: cfg.ImagePulls, NodeCredentials: regs.credentials(),
		Logger: log.With("component", "pods")})
	if err != nil {
		return err
	}
	log.Info("agent running", "server", id.Server, "version", version.Get().GitVersion)
	var wg sync.WaitGroup
	if serveStream != nil {
		wg.Go(func() {
			if err := serveStream(ctx); err != nil && ctx.Err() == nil {
				log.Error("the runtime's streaming server stopped", "err", err)
			}
		})
	}
	wg.Go(func() { node.Run(ctx) })
	wg.Go(func() { syncRoutes(ctx, cs, podNet, id.NodeName, log) })
	wg.Go(func() {
		if err := pods.Run(ctx); err != nil {
			log.Error("the pod manager stopped", "err", err)
		}
	})
	wg.Go(func() { serveTunnel(ctx, id, pods.APIHandler(), log) })
	if apiProxy != nil {
		log.Info("in-cluster API endpoint running", "listen", apiEndpoint)
		wg.Go(func() {
			if err := apiProxy.Serve(ctx); err != nil && ctx.Err() == nil {
				log.Error("the in-cluster API endpoint stopped", "err", err)
			}
		})
	}
	if proxyLoop != nil {
		log.Info("service proxy running", "mode", mode)
		wg.Go(func() { proxyLoop.Run(ctx) })
	}
	wg.Wait()
	return nil
}

// kubeletRuntime is what the kubelet needs of a runtime: the runtime itself and its images (pulled by cri,
// recorded by process).
type kubeletRuntime interface {
	runtime.Runtime
	runtime.ImagePuller
}

// serveTunnel keeps the node's tunnel to the server, serving h (its kubelet API), until ctx ends.
func serveTunnel(ctx context.Context, id *join.Identity, h http.Handler, log *slog.Logger) {
	tlsCfg, err := id.TLSConfig()
	if err == nil {
		var u string
		if u, err = connectURL(id.APIServer); err == nil {
			err = tunnel.Serve(ctx, tunnel.Config{URL: u, Token: id.Credential, TLS: tlsCfg, Handler: h,
				Logger: log.With("component", "tunnel")})
		}
	}
	if err != nil && ctx.Err() == nil {
		log.Error("the tunnel stopped", "err", err)
	}
}

// connectURL is the tunnel endpoint of the cluster API at apiServer (https → wss).
func connectURL(apiServer string) (string, error) {
	u, err := url.Parse(apiServer)
	if err != nil {
		return "", err
	}
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	case "http":
		u.Scheme = "ws"
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/agent/connect"
	return u.String(), nil
}
