package dns

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestForPod(t *testing.T) {
	host := Resolver{Servers: []string{"192.0.2.53", "192.0.2.54"}, Searches: []string{"corp.example", "cluster.local"},
		Options: []string{"timeout:2"}}
	node := ClusterDNS{Servers: []string{"10.244.0.1"}, Host: host}
	pod := func(policy corev1.DNSPolicy, hostNet bool, cfg *corev1.PodDNSConfig) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "p"},
			Spec: corev1.PodSpec{DNSPolicy: policy, HostNetwork: hostNet, DNSConfig: cfg}}
	}
	cluster := Resolver{Servers: []string{"10.244.0.1"},
		Searches: []string{"apps.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"},
		Options:  []string{"ndots:5"}}
	two, one := "2", "1"
	tests := []struct {
		name         string
		dns          ClusterDNS
		pod          *corev1.Pod
		want         Resolver
		wantFallback bool
	}{
		{"ClusterFirst: the cluster's nameserver, its search list then the host's (duplicates dropped)", node,
			pod(corev1.DNSClusterFirst, false, nil), cluster, false},
		{"no policy is ClusterFirst", node, pod("", false, nil), cluster, false},
		{"ClusterFirst on the host network is the host's", node, pod(corev1.DNSClusterFirst, true, nil), host, false},
		{"ClusterFirstWithHostNet on the host network is the cluster's", node,
			pod(corev1.DNSClusterFirstWithHostNet, true, nil), cluster, false},
		{"Default is the host's", node, pod(corev1.DNSDefault, false, nil), host, false},
		{"None is the pod's dnsConfig only", node, pod(corev1.DNSNone, false, &corev1.PodDNSConfig{
			Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example"}, Options: []corev1.PodDNSConfigOption{{Name: "edns0"}}}),
			Resolver{Servers: []string{"1.1.1.1"}, Searches: []string{"a.example"}, Options: []string{"edns0"}}, false},
		{"dnsConfig adds to ClusterFirst; options merged by name, the pod's value last", node,
			pod(corev1.DNSClusterFirst, false, &corev1.PodDNSConfig{Nameservers: []string{"10.244.0.1", "1.1.1.1"},
				Searches: []string{"svc.cluster.local", "b.example."}, Options: []corev1.PodDNSConfigOption{
					{Name: "ndots", Value: &two}, {Name: "edns0"}, {Name: "attempts", Value: &one}}}),
			Resolver{Servers: []string{"10.244.0.1", "1.1.1.1"}, Searches: append(cluster.Searches[:4:4], "b.example"),
				Options: []string{"ndots:2", "edns0", "attempts:1"}}, false},
		{"a node without cluster DNS gives ClusterFirst pods the host's", ClusterDNS{Host: host},
			pod(corev1.DNSClusterFirst, false, nil), host, true},
		{"another cluster domain", ClusterDNS{Servers: []string{"10.244.0.1"}, Domain: "k8s.example."},
			pod(corev1.DNSClusterFirst, false, nil), Resolver{Servers: []string{"10.244.0.1"},
				Searches: []string{"apps.svc.k8s.example", "svc.k8s.example", "k8s.example"}, Options: []string{"ndots:5"}}, false},
		{"at most 3 nameservers", node, pod(corev1.DNSClusterFirst, false, &corev1.PodDNSConfig{
			Nameservers: []string{"1.1.1.1", "1.0.0.1", "8.8.8.8"}}), Resolver{Servers: []string{"10.244.0.1", "1.1.1.1", "1.0.0.1"},
			Searches: cluster.Searches, Options: cluster.Options}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, fallback := tt.dns.ForPod(tt.pod)
			equal(t, "resolver", got, tt.want)
			if fallback != tt.wantFallback {
				t.Errorf("fallback = %v, want %v", fallback, tt.wantFallback)
			}
		})
	}
}

func TestForPodSearchLimits(t *testing.T) {
	var many []string
	for i := range 40 {
		many = append(many, fmt.Sprintf("d%d.example.com", i))
	}
	long := strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + "." + strings.Repeat("c", 60) + "." + strings.Repeat("d", 60) + ".example.com"
	var wide []string // 30 domains of 100 characters: 3029 characters on the line
	for i := range 30 {
		wide = append(wide, fmt.Sprintf("%03d%s.example.com", i, strings.Repeat("x", 85)))
	}
	base := []string{"apps.svc.cluster.local", "svc.cluster.local", "cluster.local"}
	for _, tt := range []struct {
		name       string
		hostSearch []string
		want       []string
	}{
		{"at most 32 search domains", many, append(base[:3:3], many[:29]...)},
		{"a domain over 253 characters dropped", []string{long, "lab.example"}, append(base[:3:3], "lab.example")},
		{"the line cut at 2048 characters", wide, append(base[:3:3], wide[:19]...)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := ClusterDNS{Servers: []string{"10.244.0.1"}, Host: Resolver{Searches: tt.hostSearch}}
			got, _ := c.ForPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps"}})
			equal(t, "search list", got.Searches, tt.want)
			if line := strings.Join(got.Searches, " "); len(line) > 2048 || len(got.Searches) > 32 {
				t.Errorf("search line over the limits: %d domains, %d characters", len(got.Searches), len(line))
			}
		})
	}
}

func TestReadResolver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(path, []byte("# host\nnameserver 192.0.2.53\nsearch corp.example lab.example\noptions ndots:2 timeout:3 rotate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadResolver(path)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "host resolver", got, Resolver{Servers: []string{"192.0.2.53"}, Searches: []string{"corp.example", "lab.example"},
		Options: []string{"ndots:2", "timeout:3"}})
	if got, err := ReadResolver(filepath.Join(t.TempDir(), "missing")); err != nil || len(got.Servers)+len(got.Searches)+len(got.Options) != 0 {
		t.Errorf("a missing resolv.conf = %+v, %v; want an empty resolver", got, err)
	}
}
