package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/wheelhouse-dev/wheelhouse/store"
)

// Service address allocation. Every ClusterIP and NodePort in use is one allocation object in the store
// (resources serviceipallocations / servicenodeportallocations, keyed by the address), taken with the store's
// create-if-absent: two concurrent creates can never take the same address, in one process or many. A Service
// create that fails releases what it took; deleting a Service releases its addresses.
const (
	ipAllocations       = "serviceipallocations"
	nodePortAllocations = "servicenodeportallocations"
	nodePortMin         = 30000
	nodePortMax         = 32767
	randomAttempts      = 32
)

var svcGK = corev1.SchemeGroupVersion.WithKind("Service").GroupKind()

// allocation is what a create took, to release on failure.
type allocation struct {
	resource, name string
}

// allocateService fills in and reserves svc's cluster IP and node ports. old is the stored Service on update
// (nil on create): addresses it already holds are kept.
func (a *API) allocateService(ctx context.Context, cluster Cluster, svc, old *corev1.Service) ([]allocation, error) {
	var took []allocation
	fail := func(err error) ([]allocation, error) {
		a.release(ctx, cluster.ID, took)
		return nil, err
	}
	if old != nil {
		keepAddresses(svc, old)
	}
	needsIP := svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.ClusterIP != corev1.ClusterIPNone
	if needsIP && (old == nil || old.Spec.ClusterIP == "" || old.Spec.ClusterIP == corev1.ClusterIPNone) {
		ip, err := a.allocateIP(ctx, cluster, svc.Spec.ClusterIP)
		if err != nil {
			return fail(err)
		}
		took = append(took, allocation{ipAllocations, ip})
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = ip, []string{ip}
	}
	if svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		held := map[int32]bool{}
		if old != nil {
			for _, p := range old.Spec.Ports {
				held[p.NodePort] = p.NodePort != 0
			}
		}
		for i := range svc.Spec.Ports {
			p := &svc.Spec.Ports[i]
			if p.NodePort != 0 && held[p.NodePort] {
				continue
			}
			port, err := a.allocateNodePort(ctx, cluster.ID, p.NodePort, field.NewPath("spec", "ports").Index(i).Child("nodePort"))
			if err != nil {
				return fail(err)
			}
			took = append(took, allocation{nodePortAllocations, strconv.Itoa(int(port))})
			p.NodePort = port
		}
	} else {
		for i := range svc.Spec.Ports {
			svc.Spec.Ports[i].NodePort = 0
		}
	}
	return took, nil
}

// dropTypeDependentFields clears, on an update that changes a Service's type, the fields the old type needed and
// the new one does not — when the client left them as they were, as upstream does — so that `kubectl patch` of
// the type alone is valid: cluster IPs and IP families for ExternalName, node ports for a type without them, the
// health check node port and the load balancer fields for a type that is no load balancer.
func dropTypeDependentFields(svc, old *corev1.Service) {
	s, o := &svc.Spec, &old.Spec
	if s.Type == o.Type {
		return
	}
	if s.Type == corev1.ServiceTypeExternalName && o.Type != corev1.ServiceTypeExternalName {
		if s.ClusterIP == o.ClusterIP && slices.Equal(s.ClusterIPs, o.ClusterIPs) {
			s.ClusterIP, s.ClusterIPs = "", nil
		}
		if slices.Equal(s.IPFamilies, o.IPFamilies) {
			s.IPFamilies = nil
		}
		if reflect.DeepEqual(s.IPFamilyPolicy, o.IPFamilyPolicy) {
			s.IPFamilyPolicy = nil
		}
		if reflect.DeepEqual(s.InternalTrafficPolicy, o.InternalTrafficPolicy) {
			s.InternalTrafficPolicy = nil
		}
	}
	nodePorts := func(t corev1.ServiceType) bool {
		return t == corev1.ServiceTypeNodePort || t == corev1.ServiceTypeLoadBalancer
	}
	if nodePorts(o.Type) && !nodePorts(s.Type) {
		held := map[string]int32{}
		for _, p := range o.Ports {
			held[string(p.Protocol)+"/"+strconv.Itoa(int(p.Port))] = p.NodePort
		}
		for i := range s.Ports {
			p := &s.Ports[i]
			if p.NodePort != 0 && held[string(p.Protocol)+"/"+strconv.Itoa(int(p.Port))] == p.NodePort {
				p.NodePort = 0
			}
		}
	}
	if o.Type == corev1.ServiceTypeLoadBalancer && s.Type != corev1.ServiceTypeLoadBalancer {
		if s.HealthCheckNodePort == o.HealthCheckNodePort {
			s.HealthCheckNodePort = 0
		}
		if reflect.DeepEqual(s.AllocateLoadBalancerNodePorts, o.AllocateLoadBalancerNodePorts) {
			s.AllocateLoadBalancerNodePorts = nil
		}
		if reflect.DeepEqual(s.LoadBalancerClass, o.LoadBalancerClass) {
			s.LoadBalancerClass = nil
		}
	}
}

// keepAddresses carries the stored cluster IPs and node ports into an update that left them out, as upstream
// does, so `kubectl replace` of a manifest without them works.
func keepAddresses(svc, old *corev1.Service) {
	if svc.Spec.ClusterIP == "" && svc.Spec.Type != corev1.ServiceTypeExternalName {
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = old.Spec.ClusterIP, old.Spec.ClusterIPs
	}
	if svc.Spec.Type != corev1.ServiceTypeNodePort && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return // no node ports to keep
	}
	byPort := map[string]int32{}
	for _, p := range old.Spec.Ports {
		byPort[string(p.Protocol)+"/"+strconv.Itoa(int(p.Port))] = p.NodePort
	}
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if p.NodePort == 0 {
			proto := p.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			p.NodePort = byPort[string(proto)+"/"+strconv.Itoa(int(p.Port))]
		}
	}
}

// allocateIP reserves want (validated against the cluster's range) or a random free address of the range.
func (a *API) allocateIP(ctx context.Context, cluster Cluster, want string) (string, error) {
	prefix, err := netip.ParsePrefix(cluster.ServiceCIDR)
	if err != nil {
		return "", internalf("cluster %s: service CIDR %q: %v", cluster.ID, cluster.ServiceCIDR, err)
	}
	path := field.NewPath("spec", "clusterIPs").Index(0)
	if want != "" {
		ip, err := netip.ParseAddr(want)
		if err != nil || !prefix.Contains(ip) {
			return "", apierrors.NewInvalid(svcGK, "", field.ErrorList{field.Invalid(path, want,
				fmt.Sprintf("failed to allocate IP %s: the provided IP is not in the valid range (%s)", want, prefix))})
		}
		return want, a.reserve(ctx, cluster.ID, ipAllocations, want, path)
	}
	size := rangeSize(prefix)
	if size < 3 {
		return "", apierrors.NewInternalError(errors.New("the service CIDR has no free address"))
	}
	for range randomAttempts {
		ip := nthAddr(prefix, 2+rand.Int64N(size-2)) // .0 is the network, .1 the kubernetes service
		err := a.reserve(ctx, cluster.ID, ipAllocations, ip.String(), path)
		if err == nil {
			return ip.String(), nil
		}
		if !apierrors.IsInvalid(err) {
			return "", err
		}
	}
	return "", apierrors.NewServiceUnavailable("no free cluster IP found in " + prefix.String() + "; the range is nearly full")
}

// allocateNodePort reserves want or a random free port of 30000-32767.
func (a *API) allocateNodePort(ctx context.Context, cluster string, want int32, path *field.Path) (int32, error) {
	if want != 0 {
		if want < nodePortMin || want > nodePortMax {
			return 0, apierrors.NewInvalid(svcGK, "", field.ErrorList{field.Invalid(path, want,
				fmt.Sprintf("provided port is not in the valid range. The range of valid ports is %d-%d", nodePortMin, nodePortMax))})
		}
		return want, a.reserve(ctx, cluster, nodePortAllocations, strconv.Itoa(int(want)), path)
	}
	for range randomAttempts {
		port := nodePortMin + rand.Int32N(nodePortMax-nodePortMin+1)
		err := a.reserve(ctx, cluster, nodePortAllocations, strconv.Itoa(int(port)), path)
		if err == nil {
			return port, nil
		}
		if !apierrors.IsInvalid(err) {
			return 0, err
		}
	}
	return 0, apierrors.NewServiceUnavailable("no free node port found; the range is nearly full")
}

// reserve creates the allocation object; an address already taken is 422 with the upstream message.
func (a *API) reserve(ctx context.Context, cluster, resource, name string, path *field.Path) error {
	_, err := a.cfg.Storage.Create(ctx, store.Key{Cluster: cluster, Resource: resource, Name: name}, []byte(`{}`))
	if errors.Is(err, store.ErrExists) {
		return apierrors.NewInvalid(svcGK, "", field.ErrorList{field.Invalid(path, name,
			fmt.Sprintf("provided %s is already allocated", map[string]string{ipAllocations: "IP", nodePortAllocations: "port"}[resource]))})
	}
	if err != nil {
		return storeError(err, schema.GroupResource{Resource: resource}, name)
	}
	return nil
}

// release frees allocations (best effort: a leftover allocation only keeps an address out of use).
func (a *API) release(ctx context.Context, cluster string, took []allocation) {
	for _, al := range took {
		_, err := a.cfg.Storage.Delete(context.WithoutCancel(ctx), store.Key{Cluster: cluster, Resource: al.resource, Name: al.name}, 0)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			a.log.Warn("releasing a service address failed", "cluster", cluster, "resource", al.resource, "address", al.name, "err", err)
		}
	}
}

// serviceAllocations lists what svc holds.
func serviceAllocations(svc *corev1.Service) []allocation {
	var out []allocation
	for _, ip := range svc.Spec.ClusterIPs {
		if ip != "" && ip != corev1.ClusterIPNone {
			out = append(out, allocation{ipAllocations, ip})
		}
	}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 {
			out = append(out, allocation{nodePortAllocations, strconv.Itoa(int(p.NodePort))})
		}
	}
	return out
}

// droppedAllocations is what old held that svc no longer does.
func droppedAllocations(svc, old *corev1.Service) []allocation {
	keep := map[allocation]bool{}
	for _, al := range serviceAllocations(svc) {
		keep[al] = true
	}
	var out []allocation
	for _, al := range serviceAllocations(old) {
		if !keep[al] {
			out = append(out, al)
		}
	}
	return out
}

func rangeSize(p netip.Prefix) int64 {
	bits := p.Addr().BitLen() - p.Bits()
	if bits > 62 {
		bits = 62
	}
	return int64(1) << bits
}

// nthAddr is the n-th address of prefix p.
func nthAddr(p netip.Prefix, n int64) netip.Addr {
	base := new(big.Int).SetBytes(p.Masked().Addr().AsSlice())
	b := new(big.Int).Add(base, big.NewInt(n)).FillBytes(make([]byte, len(p.Addr().AsSlice())))
	addr, _ := netip.AddrFromSlice(b)
	return addr
}
