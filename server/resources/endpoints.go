package resources

//lint:file-ignore SA1019 core/v1 Endpoints is deprecated but still served.

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func init() {
	register(&Resource{
		GVK:        corev1.SchemeGroupVersion.WithKind("Endpoints"),
		Plural:     "endpoints",
		Singular:   "endpoints",
		ShortNames: []string{"ep"},
		Namespaced: true,
		New:        func() runtime.Object { return &corev1.Endpoints{} },
		NewList:    func() runtime.Object { return &corev1.EndpointsList{} },
		Default:    func(obj runtime.Object) { defaultEndpoints(obj.(*corev1.Endpoints)) },
		Validate:   func(obj runtime.Object) field.ErrorList { return validateEndpoints(obj.(*corev1.Endpoints)) },
		Table: &Table{
			Columns: []metav1.TableColumnDefinition{nameColumn,
				{Name: "Endpoints", Type: "string", Description: corev1.Endpoints{}.SwaggerDoc()["subsets"]}, ageColumn},
			Cells: func(obj runtime.Object, now time.Time) []any {
				ep := obj.(*corev1.Endpoints)
				return []any{ep.Name, formatEndpoints(ep), age(ep.CreationTimestamp, now)}
			},
		},
	})
}

// defaultEndpoints sets each port's protocol to TCP when unset.
func defaultEndpoints(ep *corev1.Endpoints) {
	for i := range ep.Subsets {
		for j := range ep.Subsets[i].Ports {
			if ep.Subsets[i].Ports[j].Protocol == "" {
				ep.Subsets[i].Ports[j].Protocol = corev1.ProtocolTCP
			}
		}
	}
}

// validateEndpoints checks each subset: at least one address, valid addresses and ports (named when there are
// several).
func validateEndpoints(ep *corev1.Endpoints) field.ErrorList {
	var errs field.ErrorList
	for i, ss := range ep.Subsets {
		ip := field.NewPath("subsets").Index(i)
		if len(ss.Addresses) == 0 && len(ss.NotReadyAddresses) == 0 {
			errs = append(errs, field.Required(ip, "must specify `addresses` or `notReadyAddresses`"))
		}
		for j := range ss.Addresses {
			errs = append(errs, validateEndpointAddress(&ss.Addresses[j], ip.Child("addresses").Index(j))...)
		}
		for j := range ss.NotReadyAddresses {
			errs = append(errs, validateEndpointAddress(&ss.NotReadyAddresses[j], ip.Child("notReadyAddresses").Index(j))...)
		}
		for j, port := range ss.Ports {
			errs = append(errs, validateEndpointPort(port, len(ss.Ports) > 1, ip.Child("ports").Index(j))...)
		}
	}
	return errs
}

// validateEndpointAddress requires a valid, routable IP and checks the optional hostname and node name.
func validateEndpointAddress(a *corev1.EndpointAddress, p *field.Path) field.ErrorList {
	errs := validation.IsValidIP(p.Child("ip"), a.IP)
	if len(errs) == 0 {
		errs = append(errs, validateNonSpecialIP(a.IP, p.Child("ip"))...)
	}
	if a.Hostname != "" {
		errs = append(errs, invalidEach(p.Child("hostname"), a.Hostname, validation.IsDNS1123Label(a.Hostname))...)
	}
	if a.NodeName != nil && *a.NodeName != "" {
		errs = append(errs, invalidEach(p.Child("nodeName"), *a.NodeName, validation.IsDNS1123Subdomain(*a.NodeName))...)
	}
	return errs
}

// validateNonSpecialIP refuses unspecified, loopback, link-local and link-local multicast addresses.
func validateNonSpecialIP(s string, p *field.Path) field.ErrorList {
	ip, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return nil
	case ip.IsUnspecified():
		return field.ErrorList{field.Invalid(p, s, fmt.Sprintf("may not be unspecified (%v)", s))}
	case ip.IsLoopback():
		return field.ErrorList{field.Invalid(p, s, "may not be in the loopback range (127.0.0.0/8, ::1/128)")}
	case ip.IsLinkLocalUnicast():
		return field.ErrorList{field.Invalid(p, s, "may not be in the link-local range (169.254.0.0/16, fe80::/10)")}
	case ip.IsLinkLocalMulticast():
		return field.ErrorList{field.Invalid(p, s, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)")}
	}
	return nil
}

// validateEndpointPort checks a port's name (required when named is true), number and protocol.
func validateEndpointPort(port corev1.EndpointPort, named bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if port.Name == "" && named {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else if port.Name != "" {
		errs = append(errs, invalidEach(p.Child("name"), port.Name, validation.IsDNS1123Label(port.Name))...)
	}
	errs = append(errs, invalidEach(p.Child("port"), port.Port, validation.IsValidPortNum(int(port.Port)))...)
	return append(errs, validateProtocol(port.Protocol, p.Child("protocol"))...)
}

// formatEndpoints lists up to three "ip:port" endpoints (bare IPs for port-less subsets), then "+ N more...";
// "<none>" without subsets.
func formatEndpoints(ep *corev1.Endpoints) string {
	if len(ep.Subsets) == 0 {
		return "<none>"
	}
	const max = 3
	var list []string
	count := 0
	add := func(s string) {
		if count++; len(list) < max {
			list = append(list, s)
		}
	}
	for _, ss := range ep.Subsets {
		for _, a := range ss.Addresses {
			if len(ss.Ports) == 0 {
				add(a.IP)
			}
		}
		for _, port := range ss.Ports {
			for _, a := range ss.Addresses {
				add(net.JoinHostPort(a.IP, strconv.Itoa(int(port.Port))))
			}
		}
	}
	s := strings.Join(list, ",")
	if count > max {
		s = fmt.Sprintf("%s + %d more...", s, count-max)
	}
	return s
}
