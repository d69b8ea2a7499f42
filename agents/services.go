package agents

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/wheelhouse-dev/wheelhouse/agents/dns"
	"github.com/wheelhouse-dev/wheelhouse/agents/network"
	"github.com/wheelhouse-dev/wheelhouse/agents/proxy"
	"github.com/wheelhouse-dev/wheelhouse/agents/proxy/nft"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/managed"
)

// The proxy modes of --proxy-mode.
const (
	ProxyAuto     = "auto"     // IPVS when the kernel has it, else nftables
	ProxyIPVS     = "ipvs"     // agents/proxy/ipvs
	ProxyNFTables = "nftables" // agents/proxy/nft
	ProxyNone     = "none"     // no Service proxy (another one runs on the node)
)

// serviceInformers are the node's watches of the cluster's Services and EndpointSlices, on its own credential
// (the node authorizer lets nodes read both): the kubelet's service links, the proxy and DNS share them.
type serviceInformers struct {
	factory  informers.SharedInformerFactory
	services corelisters.ServiceLister
	svcInf   cache.SharedIndexInformer
	sliceInf cache.SharedIndexInformer
}

// newServiceInformers makes the informers; start runs them.
func newServiceInformers(cs kubernetes.Interface) *serviceInformers {
	f := informers.NewSharedInformerFactory(cs, 0)
	s := &serviceInformers{factory: f, services: f.Core().V1().Services().Lister(),
		svcInf: f.Core().V1().Services().Informer(), sliceInf: f.Discovery().V1().EndpointSlices().Informer()}
	return s
}

// onRelist calls fn whenever a watch broke (the informer lists again: what happened meanwhile may be missed
// by a backend's incremental view, so the proxy reads back the kernel).
func (s *serviceInformers) onRelist(fn func()) error {
	for _, inf := range []cache.SharedIndexInformer{s.svcInf, s.sliceInf} {
		if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			cache.DefaultWatchErrorHandler(ctx, r, err)
			fn()
		}); err != nil {
			return err
		}
	}
	return nil
}

// start runs the informers until ctx ends and waits until they have listed once.
func (s *serviceInformers) start(ctx context.Context) error {
	s.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), s.svcInf.HasSynced, s.sliceInf.HasSynced) {
		return fmt.Errorf("agent: the Service and EndpointSlice watches did not start: %w", context.Cause(ctx))
	}
	return nil
}

// handle sends every change of both kinds to h.
func (s *serviceInformers) handle(h cache.ResourceEventHandler) error {
	if _, err := s.svcInf.AddEventHandler(h); err != nil {
		return err
	}
	_, err := s.sliceInf.AddEventHandler(h)
	return err
}

// proxyConfig is what the Service proxy of a node needs.
type proxyConfig struct {
	mode, scheduler string
	clusterCIDR     netip.Prefix
	minSync         time.Duration
	fullSync        time.Duration
}

// newProxyBackend opens the backend of mode (auto: IPVS when the kernel has it, else nftables); nil for none.
func newProxyBackend(cfg proxyConfig, log *slog.Logger) (proxy.Backend, string, error) {
	mode := cfg.mode
	if mode == "" || mode == ProxyAuto {
		mode = ProxyNFTables
		if err := ipvsAvailable(); err == nil {
			mode = ProxyIPVS
		} else {
			log.Info("the kernel has no IPVS: the Service proxy uses nftables", "reason", err)
		}
	}
	cleanupOtherModes(mode, cfg, log)
	switch mode {
	case ProxyNone:
		return nil, mode, nil
	case ProxyNFTables:
		b, err := nft.NewSharded(nft.Config{PodCIDR: cfg.clusterCIDR, Logger: log}, nft.DefaultShards)
		return b, mode, err
	case ProxyIPVS:
		b, err := newIPVSBackend(cfg, log)
		return b, mode, err
	}
	return nil, mode, fmt.Errorf("agent: --proxy-mode %q: want auto, ipvs, nftables or none", cfg.mode)
}

// cleanupOtherModes removes what the other proxy modes left on this node (after a change of --proxy-mode), as
// kube-proxy does at start: failures are logged, not fatal.
func cleanupOtherModes(mode string, cfg proxyConfig, log *slog.Logger) {
	if err := removeProxyModes(mode, cfg, log); err != nil {
		log.Warn("removing the rules of an earlier proxy mode failed", "err", err)
	}
}

// removeProxyModes removes the rules of every proxy mode but keep (IPVS only when the kernel has it).
func removeProxyModes(keep string, cfg proxyConfig, log *slog.Logger) error {
	ctx := context.Background()
	var errs []error
	if keep != ProxyIPVS && ipvsAvailable() == nil {
		if b, err := newIPVSBackend(cfg, log); err != nil {
			errs = append(errs, fmt.Errorf("looking for IPVS rules: %w", err))
		} else {
			errs = append(errs, b.Cleanup(ctx), b.Close())
		}
	}
	if keep != ProxyNFTables {
		if b, err := nft.NewSharded(nft.Config{PodCIDR: cfg.clusterCIDR, Logger: log}, nft.DefaultShards); err != nil {
			errs = append(errs, fmt.Errorf("looking for nftables rules: %w", err))
		} else {
			errs = append(errs, b.Cleanup(ctx), b.Close())
		}
	}
	return errors.Join(errs...)
}

// Cleanup removes what agents made on this node: the pods they ran through containerd (when its socket is at
// containerdEndpoint; other sandboxes there are left), the Service proxy's rules of every mode and the pod network
// (host-gw routes, the masquerade table, the pods' veths, the bridge). With no containerdEndpoint, it looks at the
// system's containerd (when one answers on cri.DefaultEndpoint) and at the one the agent runs itself under
// dataDir/containerd (when it has run one: Cleanup starts it, removes the pods and stops it, after stopping one
// left running). It is for uninstalling, once the agent has stopped (`wheelhouse agent cleanup`, which the
// uninstall script runs); what is already gone is not an error.
func Cleanup(ctx context.Context, containerdEndpoint, dataDir string, log *slog.Logger) error {
	var errs []error
	socket := strings.TrimPrefix(cmp.Or(containerdEndpoint, cri.DefaultEndpoint), "unix://")
	if _, err := os.Stat(socket); err == nil && (containerdEndpoint != "" || managed.Answers(ctx, socket, answerTimeout)) {
		errs = append(errs, removeOwnSandboxes(ctx, socket, log))
	}
	if containerdEndpoint == "" && dataDir != "" {
		errs = append(errs, cleanupManagedContainerd(ctx, dataDir, log))
	}
	cfg := proxyConfig{clusterCIDR: netip.MustParsePrefix(defaultClusterCIDR)} // the rules are found by their tables' names
	errs = append(errs, removeProxyModes(ProxyNone, cfg, log), network.CleanupNode(ctx, "", ""))
	return errors.Join(errs...)
}

// newProxyLoop makes the loop that keeps the kernel's Service rules in sync with the informers (register it
// before they start); its Run runs it. A sync the kernel refuses is retried and reported as a Warning event on
// the Node (FailedToSyncProxyRules, as kube-proxy's).
//
// apiEndpoint, when valid, is this node's API proxy: the `kubernetes` Service's only endpoint (localAPIEndpoint).
func newProxyLoop(b proxy.Backend, cfg proxyConfig, inf *serviceInformers, node func() proxy.Node, apiEndpoint netip.AddrPort,
	recorder record.EventRecorder, nodeRef *corev1.ObjectReference, log *slog.Logger) (*proxy.Loop, error) {
	var loop *proxy.Loop // set before the informers start, so before the tracker's first event
	tracker := proxy.NewTracker(node, func() { loop.Changed() })
	loop, err := proxy.NewLoop(proxy.LoopConfig{Backend: b, Desired: func() (proxy.State, error) { return tracker.State(), nil },
		MinSync: cfg.minSync, FullSync: cfg.fullSync,
		OnError: func(err error) {
			recorder.Eventf(nodeRef, corev1.EventTypeWarning, "FailedToSyncProxyRules", "syncing the Service proxy failed: %s", oneLine(err))
		}, Logger: log})
	if err != nil {
		return nil, err
	}
	h := tracker.Handler()
	if apiEndpoint.IsValid() {
		h = localAPIEndpoint{h: h, node: node().Name, ep: apiEndpoint}
	}
	if err := inf.handle(h); err != nil {
		return nil, err
	}
	if err := inf.onRelist(loop.Resync); err != nil {
		return nil, err
	}
	return loop, nil
}

// oneLine is an error's message on one line (a joined error has one line per failure).
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// proxyNode is the proxy's view of this node: its name and the addresses its node ports listen on.
func proxyNode(name string, internalIP func() string) func() proxy.Node {
	return func() proxy.Node {
		n := proxy.Node{Name: name}
		if a, err := netip.ParseAddr(internalIP()); err == nil {
			n.Addrs = []netip.Addr{a}
		}
		return n
	}
}

// startDNS serves the cluster's DNS on the pod network's gateway (port 53), answering from the informers.
func startDNS(ctx context.Context, inf *serviceInformers, gateway netip.Addr, domain string, log *slog.Logger) (*dns.Server, error) {
	idx := dns.NewIndex()
	if err := inf.handle(idx.Handler()); err != nil {
		return nil, err
	}
	srv, err := dns.New(ctx, dns.Config{Domain: domain, Listen: netip.AddrPortFrom(gateway, 53).String(), Logger: log}, idx)
	if errors.Is(err, dns.ErrNoUpstreams) {
		// Cluster names still resolve; others fail (SERVFAIL) rather than pods having no nameserver at all.
		log.Warn("the host's resolv.conf lists no nameserver: the cluster DNS answers only the cluster's names")
		srv, err = dns.New(ctx, dns.Config{Domain: domain, Listen: netip.AddrPortFrom(gateway, 53).String(), Logger: log,
			NoForward: true}, idx)
	}
	if err != nil {
		return nil, err
	}
	go func() {
		if err := srv.Start(ctx); err != nil && ctx.Err() == nil {
			log.Error("the cluster DNS server stopped", "err", err)
		}
	}()
	return srv, nil
}

// The cluster's API Service, default/kubernetes.
const apiServiceNamespace, apiServiceName = "default", "kubernetes"

// localAPIEndpoint passes the informers' events on to h with default/kubernetes served by this node: its
// EndpointSlices are replaced by one holding this node's API proxy at ep (agents/apiproxy,
// docs/design/incluster.md), for every TCP port of the Service.
type localAPIEndpoint struct {
	h    cache.ResourceEventHandler
	node string
	ep   netip.AddrPort
}

func (l localAPIEndpoint) OnAdd(obj any, initial bool) {
	if isAPISlice(obj) {
		return
	}
	l.h.OnAdd(obj, initial)
	if es := l.slice(obj); es != nil {
		l.h.OnAdd(es, initial)
	}
}

func (l localAPIEndpoint) OnUpdate(old, obj any) {
	if isAPISlice(obj) {
		return
	}
	l.h.OnUpdate(old, obj)
	if es := l.slice(obj); es != nil {
		l.h.OnUpdate(es, es)
	}
}

func (l localAPIEndpoint) OnDelete(obj any) {
	if isAPISlice(obj) {
		return
	}
	l.h.OnDelete(obj)
	if es := l.slice(obj); es != nil {
		l.h.OnDelete(es)
	}
}

// isAPISlice reports an EndpointSlice of default/kubernetes (also as a deletion's last known state).
func isAPISlice(obj any) bool {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	es, ok := obj.(*discoveryv1.EndpointSlice)
	return ok && es.Namespace == apiServiceNamespace && es.Labels[discoveryv1.LabelServiceName] == apiServiceName
}

// slice is this node's EndpointSlice for obj when obj is default/kubernetes, else nil.
func (l localAPIEndpoint) slice(obj any) *discoveryv1.EndpointSlice {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	svc, ok := obj.(*corev1.Service)
	if !ok || svc.Namespace != apiServiceNamespace || svc.Name != apiServiceName {
		return nil
	}
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: apiServiceNamespace, Name: apiServiceName + "-node-local",
			Labels: map[string]string{discoveryv1.LabelServiceName: apiServiceName}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{l.ep.Addr().String()}, NodeName: &l.node,
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}}},
	}
	for _, p := range svc.Spec.Ports {
		if p.Protocol == corev1.ProtocolTCP || p.Protocol == "" {
			es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Protocol: ptr.To(corev1.ProtocolTCP),
				Port: ptr.To(int32(l.ep.Port()))})
		}
	}
	return es
}
