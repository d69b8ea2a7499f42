package kubeapi

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/wheelhouse-dev/wheelhouse/store"
)

// servePodProxy serves pods/proxy and services/proxy, whose URL names "[scheme:]name[:port]": it finds the pod
// and port to reach as upstream's pod and service ResourceLocation do, then hands the request to the Connector,
// which reaches the pod through its node's agent (the server never dials a pod itself).
func (rq *request) servePodProxy() error {
	ri := rq.info
	scheme, name, port, ok := utilnet.SplitSchemeNamePort(ri.name)
	if !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid %s request %q", rq.res.Singular, ri.name))
	}
	if scheme == "" {
		scheme = "http"
	}
	prefix := "/api/" + ri.gv.Version + "/namespaces/" + ri.namespace + "/" + ri.plural + "/" + ri.name + "/proxy"
	rest, ok := strings.CutPrefix(rq.path, prefix)
	if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
		return notFoundPath()
	}
	obj, _, err := rq.load(ri.namespace, name)
	if err != nil {
		return err
	}
	target := &PodProxy{Scheme: scheme, Prefix: prefix}
	var pod *corev1.Pod
	switch o := obj.(type) {
	case *corev1.Pod:
		pod = o
		target.Port, err = podProxyPort(pod, scheme, port)
	case *corev1.Service:
		pod, target.Port, err = rq.serviceEndpoint(o, ri.name, port)
	default:
		return notFoundPath()
	}
	if err != nil {
		return err
	}
	req := ConnectRequest{Cluster: rq.cluster.ID, User: rq.user, Subresource: "proxy", Object: pod,
		Path: proxyPath(rest), Proxy: target}
	return rq.api.cfg.Connector.Connect(rq.w, rq.r, req)
}

// proxyPath cleans the path below /proxy as upstream's connect handler and JoinPreservingTrailingSlash do: ""
// stays "" (the proxy's root without its slash), anything else is made absolute and clean, so that no "." or
// ".." segment reaches the pod or the agent, and keeps its trailing slash.
func proxyPath(rest string) string {
	if rest == "" {
		return ""
	}
	p := path.Clean("/" + rest)
	if strings.HasSuffix(rest, "/") && !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}

// podProxyPort is the port a pods/proxy URL reaches: the number it names, or the container port of that name
// (which upstream leaves to fail when dialled), or without one the first port of the first container that
// declares any, else the scheme's default port.
func podProxyPort(pod *corev1.Pod, scheme, port string) (int32, error) {
	if port == "" {
		for _, c := range pod.Spec.Containers {
			if len(c.Ports) > 0 {
				return c.Ports[0].ContainerPort, nil
			}
		}
		if scheme == "https" {
			return 443, nil
		}
		return 80, nil
	}
	if n, err := strconv.ParseUint(port, 10, 16); err == nil && n > 0 {
		return int32(n), nil
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == port {
				return p.ContainerPort, nil
			}
		}
	}
	return 0, apierrors.NewBadRequest(fmt.Sprintf("pod %s has no port %q", pod.Name, port))
}

// serviceEndpoint chooses where a services/proxy request goes, as upstream's service ResourceLocation does: a
// port number names the service port of that number, then a random ready endpoint serving the port of that
// name (IPv4 slices first) whose target is a pod of the namespace holding its address. id is the name as the URL
// gives it, for upstream's messages.
func (rq *request) serviceEndpoint(svc *corev1.Service, id, port string) (*corev1.Pod, int32, error) {
	if n, err := strconv.ParseInt(port, 10, 64); err == nil {
		i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return int64(p.Port) == n })
		if i < 0 {
			return nil, 0, apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %d found for service %q", n, svc.Name))
		}
		port = svc.Spec.Ports[i].Name
	}
	eps, err := rq.endpointSlices(svc.Namespace, svc.Name)
	if err != nil {
		return nil, 0, err
	}
	if len(eps) == 0 {
		return nil, 0, apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", svc.Name))
	}
	// Slices in a random order, IPv4 first; each slice's endpoints from a random offset.
	rand.Shuffle(len(eps), func(i, j int) { eps[i], eps[j] = eps[j], eps[i] })
	family := func(s *discoveryv1.EndpointSlice) int {
		if s.AddressType == discoveryv1.AddressTypeIPv4 {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(eps, func(a, b *discoveryv1.EndpointSlice) int { return cmp.Compare(family(a), family(b)) })
	for _, s := range eps {
		for _, p := range s.Ports {
			if p.Name == nil || *p.Name != port || p.Port == nil || len(s.Endpoints) == 0 {
				continue
			}
			off := rand.IntN(len(s.Endpoints))
			for i := range s.Endpoints {
				ep := &s.Endpoints[(off+i)%len(s.Endpoints)]
				if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
					continue
				}
				if pod := rq.endpointPod(svc.Namespace, ep); pod != nil {
					return pod, *p.Port, nil
				}
			}
		}
	}
	return nil, 0, apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", id))
}

// endpointPod is the pod an endpoint targets when the proxy may go there: a pod of the service's namespace,
// on a node, holding the endpoint's address (upstream's isValidAddress: an EndpointSlice anyone may write never
// sends the proxy to an address that is not a pod's); else nil.
func (rq *request) endpointPod(namespace string, ep *discoveryv1.Endpoint) *corev1.Pod {
	ref := ep.TargetRef
	if ref == nil || ref.Namespace != namespace || (ref.Kind != "" && ref.Kind != "Pod") || len(ep.Addresses) == 0 {
		return nil
	}
	obj, err := rq.readObject(corev1.SchemeGroupVersion.WithResource("pods"), namespace, ref.Name)
	if err != nil {
		return nil
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return nil
	}
	for _, ip := range pod.Status.PodIPs {
		if ip.IP == ep.Addresses[0] {
			return pod
		}
	}
	return nil
}

// endpointSlices reads the EndpointSlices of the service namespace/name (labelled kubernetes.io/service-name).
func (rq *request) endpointSlices(namespace, name string) ([]*discoveryv1.EndpointSlice, error) {
	res, ok := rq.api.cfg.Registry.Lookup(discoveryv1.SchemeGroupVersion.WithResource("endpointslices"))
	if !ok {
		return nil, nil
	}
	var out []*discoveryv1.EndpointSlice
	opts := store.ListOptions{Cluster: rq.cluster.ID, Resource: res.Storage, Namespace: namespace}
	for {
		page, err := rq.api.cfg.Storage.List(rq.ctx, opts)
		if err != nil {
			return nil, storeError(err, res.GroupVersionResource().GroupResource(), "")
		}
		for _, so := range page.Items {
			obj, err := decodeStored(res, so)
			if err != nil {
				return nil, internal(err)
			}
			if s, ok := obj.(*discoveryv1.EndpointSlice); ok && s.Labels[discoveryv1.LabelServiceName] == name {
				out = append(out, s)
			}
		}
		if page.Continue == "" {
			return out, nil
		}
		opts.Continue = page.Continue
	}
}

// readObject reads one object of another resource than the request's.
func (rq *request) readObject(gvr schema.GroupVersionResource, namespace, name string) (runtime.Object, error) {
	res, ok := rq.api.cfg.Registry.Lookup(gvr)
	if !ok {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	so, err := rq.api.cfg.Storage.Get(rq.ctx, rq.key(res, namespace, name))
	if err != nil {
		return nil, storeError(err, gvr.GroupResource(), name)
	}
	obj, err := decodeStored(res, so)
	if err != nil {
		return nil, internal(err)
	}
	return obj, nil
}
