package dns

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
)

// Limits of a pod's search list, the kubelet's (and the API's validation): glibc before 2.26 took 6
// domains and 256 characters; later ones take these.
const (
	maxSearchDomains   = 32
	maxSearchLineChars = 2048
	maxDomainChars     = 253 // a longer search domain makes some glibc versions abort
	maxNameservers     = 3   // glibc's MAXNS
)

// Resolver is a resolver configuration: a resolv.conf's nameservers, search list and options (CRI's
// DNSConfig).
type Resolver struct {
	Servers, Searches, Options []string
}

// ReadResolver reads a host's resolv.conf (nameservers, search list and options; a missing file is an
// empty configuration, as the kubelet treats it).
func ReadResolver(path string) (Resolver, error) {
	rc, err := dns.ClientConfigFromFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Resolver{}, nil
	} else if err != nil {
		return Resolver{}, fmt.Errorf("dns: %s: %w", path, err)
	}
	r := Resolver{Servers: rc.Servers, Searches: rc.Search}
	// miekg/dns parses the options it knows (ndots, timeout, attempts); the others are not passed on.
	if rc.Ndots != 1 {
		r.Options = append(r.Options, fmt.Sprintf("ndots:%d", rc.Ndots))
	}
	if rc.Timeout != 5 {
		r.Options = append(r.Options, fmt.Sprintf("timeout:%d", rc.Timeout))
	}
	if rc.Attempts != 2 {
		r.Options = append(r.Options, fmt.Sprintf("attempts:%d", rc.Attempts))
	}
	return r, nil
}

// ClusterDNS is the node's cluster DNS as pods see it.
type ClusterDNS struct {
	// Servers are the nameservers of pods with dnsPolicy ClusterFirst (the agent's DNS server); none: such
	// pods get the host's configuration, as a kubelet without --cluster-dns.
	Servers []string
	// Domain is the cluster domain (default cluster.local).
	Domain string
	// Host is the host's resolver (dnsPolicy Default; its search list follows the cluster's).
	Host Resolver
}

// ForPod is pod's resolver, as the kubelet computes it from its dnsPolicy: ClusterFirst (the default), and
// ClusterFirstWithHostNet for a pod on the host network, get the cluster's nameservers and the search list
// <namespace>.svc.<domain> svc.<domain> <domain> followed by the host's, with ndots:5; Default, and
// ClusterFirst on the host network, get the host's; None gets nothing but the pod's dnsConfig. The pod's
// dnsConfig is then added (nameservers and searches appended without duplicates, options merged by name, a
// later value winning), and the search list is cut to the resolver's limits as the kubelet cuts it: 32
// domains, none over 253 characters, 2,048 characters in all. fallback is true when the pod asked for
// cluster DNS but the node has none (the kubelet's MissingClusterDNS event).
func (c ClusterDNS) ForPod(pod *corev1.Pod) (r Resolver, fallback bool) {
	domain := strings.TrimSuffix(cmp.Or(c.Domain, DefaultDomain), ".")
	switch policy := pod.Spec.DNSPolicy; {
	case policy == corev1.DNSNone:
	case policy == corev1.DNSClusterFirstWithHostNet || policy != corev1.DNSDefault && !pod.Spec.HostNetwork:
		if len(c.Servers) == 0 {
			r, fallback = c.host(), true
			break
		}
		r.Servers = slices.Clone(c.Servers)
		r.Searches = appendUnique([]string{pod.Namespace + ".svc." + domain, "svc." + domain, domain}, c.Host.Searches...)
		r.Options = []string{"ndots:5"}
	default:
		r = c.host()
	}
	if pc := pod.Spec.DNSConfig; pc != nil {
		r.Servers = appendUnique(r.Servers, pc.Nameservers...)
		r.Searches = appendUnique(r.Searches, pc.Searches...)
		for _, o := range pc.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			r.Options = append(r.Options, opt)
		}
	}
	r.Servers = r.Servers[:min(len(r.Servers), maxNameservers)]
	r.Searches = fitSearch(r.Searches)
	r.Options = mergeOptions(r.Options)
	return r, fallback
}

func (c ClusterDNS) host() Resolver {
	return Resolver{Servers: slices.Clone(c.Host.Servers), Searches: slices.Clone(c.Host.Searches), Options: slices.Clone(c.Host.Options)}
}

// appendUnique appends the names of add that s lacks (a trailing dot and a root "." entry dropped).
func appendUnique(s []string, add ...string) []string {
	for _, a := range add {
		if a = strings.TrimSuffix(a, "."); a != "" && !slices.Contains(s, a) {
			s = append(s, a)
		}
	}
	return s
}

func fitSearch(search []string) []string {
	search = search[:min(len(search), maxSearchDomains)]
	search = slices.DeleteFunc(search, func(s string) bool { return len(s) > maxDomainChars })
	for len(search) > 0 && len(strings.Join(search, " ")) > maxSearchLineChars {
		search = search[:len(search)-1]
	}
	return search
}

// mergeOptions keeps one option per name, in the order of their first appearance, with its last value.
func mergeOptions(opts []string) []string {
	var out []string
	at := map[string]int{}
	for _, o := range opts {
		name, _, _ := strings.Cut(o, ":")
		if i, ok := at[name]; ok {
			out[i] = o
			continue
		}
		at[name] = len(out)
		out = append(out, o)
	}
	return out
}
