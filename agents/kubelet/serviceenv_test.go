package kubelet

import (
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/wheelhouse-dev/wheelhouse/agents/dns"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
)

func service(ns, name, ip string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}, Ports: ports}}
}

func TestServiceEnv(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, svc := range []*corev1.Service{
		service("default", "kubernetes", "10.96.0.1", corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}),
		service("default", "other", "10.96.0.9", corev1.ServicePort{Port: 80}),
		service("apps", "web-front", "10.96.0.10", corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
			corev1.ServicePort{Name: "dns-udp", Port: 53, Protocol: corev1.ProtocolUDP}),
		service("apps", "headless", corev1.ClusterIPNone, corev1.ServicePort{Port: 80}),
		service("apps", "pending", "", corev1.ServicePort{Port: 80}),
	} {
		if err := idx.Add(svc); err != nil {
			t.Fatal(err)
		}
	}
	lister := corelisters.NewServiceLister(idx)
	api := map[string]string{
		"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443", "KUBERNETES_SERVICE_PORT_HTTPS": "443",
		"KUBERNETES_PORT": "tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP": "tcp://10.96.0.1:443",
		"KUBERNETES_PORT_443_TCP_PROTO": "tcp", "KUBERNETES_PORT_443_TCP_PORT": "443", "KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1",
	}
	web := map[string]string{
		"WEB_FRONT_SERVICE_HOST": "10.96.0.10", "WEB_FRONT_SERVICE_PORT": "80",
		"WEB_FRONT_SERVICE_PORT_HTTP": "80", "WEB_FRONT_SERVICE_PORT_DNS_UDP": "53",
		"WEB_FRONT_PORT":        "tcp://10.96.0.10:80",
		"WEB_FRONT_PORT_80_TCP": "tcp://10.96.0.10:80", "WEB_FRONT_PORT_80_TCP_PROTO": "tcp",
		"WEB_FRONT_PORT_80_TCP_PORT": "80", "WEB_FRONT_PORT_80_TCP_ADDR": "10.96.0.10",
		"WEB_FRONT_PORT_53_UDP": "udp://10.96.0.10:53", "WEB_FRONT_PORT_53_UDP_PROTO": "udp",
		"WEB_FRONT_PORT_53_UDP_PORT": "53", "WEB_FRONT_PORT_53_UDP_ADDR": "10.96.0.10",
	}
	other := map[string]string{"OTHER_SERVICE_HOST": "10.96.0.9", "OTHER_SERVICE_PORT": "80", "OTHER_PORT": "tcp://10.96.0.9:80",
		"OTHER_PORT_80_TCP": "tcp://10.96.0.9:80", "OTHER_PORT_80_TCP_PROTO": "tcp", "OTHER_PORT_80_TCP_PORT": "80",
		"OTHER_PORT_80_TCP_ADDR": "10.96.0.9"}
	union := func(ms ...map[string]string) map[string]string {
		out := map[string]string{}
		for _, m := range ms {
			maps.Copy(out, m)
		}
		return out
	}
	off := false
	for _, tt := range []struct {
		name  string
		ns    string
		links *bool
		want  map[string]string
	}{
		{"the namespace's Services with cluster IPs and the API's", "apps", nil, union(api, web)},
		{"links off: the API's only", "apps", &off, api},
		{"in the default namespace", "default", nil, union(api, other)},
		{"links off in the default namespace: the API's only", "default", &off, api},
		{"a namespace without Services", "empty", nil, api},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tt.ns, Name: "p"}, Spec: corev1.PodSpec{EnableServiceLinks: tt.links}}
			got, err := serviceEnv(lister, pod)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("variables (-want +got):\n%s", diff)
			}
		})
	}
	if got, err := serviceEnv(nil, &corev1.Pod{}); err != nil || got != nil {
		t.Errorf("without a lister: %v, %v; want none", got, err)
	}
}

// TestPodGetsServiceLinksAndResolver runs the pod manager with a Service informer on the node's own credential
// (the node authorizer lets nodes list and watch Services) and the node's cluster DNS: containers get the
// variables, which $(VAR) references expand to and which the container's own variables override; sandboxes get
// the resolver of the pod's dnsPolicy.
func TestPodGetsServiceLinksAndResolver(t *testing.T) {
	events := record.NewFakeRecorder(100)
	var services corelisters.ServiceLister
	e := newPodEnvConfigured(t, func(e *podEnv, c *PodsConfig) {
		factory := informers.NewSharedInformerFactory(e.node, 0)
		services = factory.Core().V1().Services().Lister()
		c.Services = services
		factory.Start(e.t.Context().Done())
		e.t.Cleanup(factory.Shutdown)
		if !cache.WaitForCacheSync(e.t.Context().Done(), factory.Core().V1().Services().Informer().HasSynced) {
			e.t.Fatal("the Service informer did not sync")
		}
		c.DNS = dns.ClusterDNS{Servers: []string{"10.244.0.1"}, Host: dns.Resolver{Servers: []string{"192.0.2.53"}, Searches: []string{"corp.example"}}}
		c.Recorder = events
	})
	svc := service("default", "web", "", corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP})
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "", nil
	created, err := e.admin.CoreV1().Services("default").Create(t.Context(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ip := created.Spec.ClusterIP
	apiSvc, err := e.admin.CoreV1().Services("default").Get(t.Context(), "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The informer must have seen the Service before the pod's containers are made.
	apitest.Eventually(t, "the node's informer sees the Service", func() bool {
		env, err := serviceEnv(services, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default"}})
		return err == nil && env["WEB_SERVICE_HOST"] == ip
	})

	e.create(simple("app", corev1.RestartPolicyAlways, corev1.Container{Name: "c", Image: "x", Command: []string{"serve", "$(WEB_SERVICE_HOST)"},
		Env: []corev1.EnvVar{{Name: "UPSTREAM", Value: "http://$(WEB_SERVICE_HOST):$(WEB_SERVICE_PORT_HTTP)"}, {Name: "WEB_PORT", Value: "mine"}}}))
	apitest.Eventually(t, "the container created", func() bool { return e.rt.config("c") != nil })
	env := map[string]string{}
	for _, kv := range e.rt.config("c").Envs {
		env[kv.Key] = string(kv.Value)
	}
	for k, v := range map[string]string{"UPSTREAM": "http://" + ip + ":80", "WEB_PORT": "mine", "WEB_SERVICE_HOST": ip,
		"WEB_PORT_80_TCP_ADDR": ip, "KUBERNETES_SERVICE_HOST": apiSvc.Spec.ClusterIP, "KUBERNETES_SERVICE_PORT": "443"} {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if got := e.rt.config("c").Command; len(got) != 2 || got[1] != ip {
		t.Errorf("command %q: want $(WEB_SERVICE_HOST) expanded", got)
	}
	dc := e.rt.sandboxConfig("c").GetDnsConfig()
	want := dns.Resolver{Servers: []string{"10.244.0.1"}, Searches: []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"},
		Options: []string{"ndots:5"}}
	if got := (dns.Resolver{Servers: dc.GetServers(), Searches: dc.GetSearches(), Options: dc.GetOptions()}); !cmp.Equal(got, want) {
		t.Errorf("sandbox resolver %+v, want %+v", got, want)
	}

	// dnsPolicy Default: the host's resolver.
	host := simple("host-dns", corev1.RestartPolicyAlways, corev1.Container{Name: "h", Image: "x", Command: []string{"serve"}})
	host.Spec.DNSPolicy = corev1.DNSDefault
	e.create(host)
	apitest.Eventually(t, "the second container created", func() bool { return e.rt.config("h") != nil })
	if got := e.rt.sandboxConfig("h").GetDnsConfig(); strings.Join(got.GetServers(), ",") != "192.0.2.53" || strings.Join(got.GetSearches(), ",") != "corp.example" {
		t.Errorf("dnsPolicy Default: %+v, want the host's resolver", got)
	}
	select {
	case ev := <-events.Events:
		if strings.Contains(ev, "MissingClusterDNS") {
			t.Errorf("unexpected event %q", ev)
		}
	default:
	}
}

// TestPodWithoutClusterDNS: a pod asking for cluster DNS on a node without any gets the host's resolver and a
// MissingClusterDNS event, as kubelet's.
func TestPodWithoutClusterDNS(t *testing.T) {
	events := record.NewFakeRecorder(100)
	e := newPodEnvConfigured(t, func(e *podEnv, c *PodsConfig) {
		c.DNS = dns.ClusterDNS{Host: dns.Resolver{Servers: []string{"192.0.2.53"}}}
		c.Recorder = events
	})
	e.create(simple("app", corev1.RestartPolicyAlways))
	apitest.Eventually(t, "the container created", func() bool { return e.rt.config("app") != nil })
	if got := e.rt.sandboxConfig("app").GetDnsConfig().GetServers(); strings.Join(got, ",") != "192.0.2.53" {
		t.Errorf("nameservers %q, want the host's", got)
	}
	apitest.Eventually(t, "a MissingClusterDNS event", func() bool {
		select {
		case ev := <-events.Events:
			return strings.HasPrefix(ev, "Warning MissingClusterDNS ")
		default:
			return false
		}
	})
}
