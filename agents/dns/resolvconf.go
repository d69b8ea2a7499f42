package dns

import (
	"cmp"
	"slices"
	"strings"
)

// Limits of a pod's search list, the kubelet's (and the API's validation): glibc before 2.26 took 6
// domains and 256 characters; later ones take these.
const (
	maxSearchDomains   = 32
	maxSearchLineChars = 2048
	maxDomainChars     = 253 // a longer search domain makes some glibc versions abort
)

// ResolvConf returns the text of the /etc/resolv.conf of a pod of the namespace under dnsPolicy
// ClusterFirst, as the kubelet writes it:
//
//	nameserver <nameserver>
//	search <namespace>.svc.<domain> svc.<domain> <domain> <hostSearch...>
//	options ndots:5 <options...>
//
// domain is the cluster domain ("" for cluster.local); hostSearch is the host resolv.conf's search list
// (a root "." entry is dropped); options (name or name:value, as a pod's dnsConfig.options) are merged
// over ndots:5, a later value of a name replacing an earlier one. As the kubelet, the search list loses
// duplicates, then whatever is past 32 domains, domains over 253 characters, and trailing domains until
// the line fits 2048 characters.
func ResolvConf(domain, namespace, nameserver string, hostSearch []string, options ...string) string {
	domain = strings.TrimSuffix(cmp.Or(domain, DefaultDomain), ".")
	search := []string{namespace + ".svc." + domain, "svc." + domain, domain}
	for _, h := range hostSearch {
		if h = strings.TrimSuffix(h, "."); h != "" && !slices.Contains(search, h) {
			search = append(search, h)
		}
	}
	var b strings.Builder
	b.WriteString("nameserver " + nameserver + "\n")
	b.WriteString("search " + strings.Join(fitSearch(search), " ") + "\n")
	b.WriteString("options " + strings.Join(mergeOptions(append([]string{"ndots:5"}, options...)), " ") + "\n")
	return b.String()
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
