package resources

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits of an EndpointSlice.
const (
	maxSliceEndpoints  = 1000
	maxSlicePorts      = 20000
	maxSliceAddresses  = 100
	maxSliceTopology   = 16
	maxSliceZoneHints  = 8
	maxSliceNodeHints  = 8
	sliceListCellItems = 3
)

func init() {
	register(&Resource{
		GVK:        discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"),
		Plural:     "endpointslices",
		Namespaced: true,
		New:        func() runtime.Object { return &discoveryv1.EndpointSlice{} },
		NewList:    func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
		Default:    func(obj runtime.Object) { defaultEndpointSlice(obj.(*discoveryv1.EndpointSlice)) },
		Validate: func(obj runtime.Object) field.ErrorList {
			return validateEndpointSlice(obj.(*discoveryv1.EndpointSlice))
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return apivalidation.ValidateImmutableField(obj.(*discoveryv1.EndpointSlice).AddressType,
				old.(*discoveryv1.EndpointSlice).AddressType, field.NewPath("addressType"))
		},
		Table: &Table{Columns: endpointSliceColumns, Cells: endpointSliceCells},
	})
}

// defaultEndpointSlice gives every port a name ("") and a protocol (TCP).
func defaultEndpointSlice(es *discoveryv1.EndpointSlice) {
	for i := range es.Ports {
		if es.Ports[i].Name == nil {
			es.Ports[i].Name = new("")
		}
		if es.Ports[i].Protocol == nil {
			es.Ports[i].Protocol = new(corev1.ProtocolTCP)
		}
	}
}

// validateEndpointSlice checks addressType (IPv4, IPv6 or FQDN), the endpoints' addresses in that type and
// their other fields, and the ports.
func validateEndpointSlice(es *discoveryv1.EndpointSlice) field.ErrorList {
	var errs field.ErrorList
	types := []discoveryv1.AddressType{discoveryv1.AddressTypeFQDN, discoveryv1.AddressTypeIPv4,
		discoveryv1.AddressTypeIPv6}
	switch ap := field.NewPath("addressType"); {
	case es.AddressType == "":
		errs = append(errs, field.Required(ap, ""))
	case es.AddressType != types[0] && es.AddressType != types[1] && es.AddressType != types[2]:
		errs = append(errs, field.NotSupported(ap, es.AddressType, types))
	}
	errs = append(errs, validateSliceEndpoints(es.Endpoints, es.AddressType, field.NewPath("endpoints"))...)
	return append(errs, validateSlicePorts(es.Ports, field.NewPath("ports"))...)
}

// validateSliceEndpoints checks at most 1000 endpoints, each with validateSliceEndpoint.
func validateSliceEndpoints(eps []discoveryv1.Endpoint, t discoveryv1.AddressType, p *field.Path) field.ErrorList {
	if len(eps) > maxSliceEndpoints {
		return field.ErrorList{field.TooMany(p, len(eps), maxSliceEndpoints)}
	}
	var errs field.ErrorList
	for i := range eps {
		errs = append(errs, validateSliceEndpoint(&eps[i], t, p.Index(i))...)
	}
	return errs
}

// validateSliceEndpoint checks an endpoint at p: 1..100 addresses of type t, node name, topology, host name
// and hints.
func validateSliceEndpoint(ep *discoveryv1.Endpoint, t discoveryv1.AddressType, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	ap := p.Child("addresses")
	switch {
	case len(ep.Addresses) == 0:
		errs = append(errs, field.Required(ap, "must contain at least 1 address"))
	case len(ep.Addresses) > maxSliceAddresses:
		errs = append(errs, field.TooMany(ap, len(ep.Addresses), maxSliceAddresses))
	}
	for i, a := range ep.Addresses {
		errs = append(errs, validateSliceAddress(a, t, ap.Index(i))...)
	}
	if ep.NodeName != nil {
		for _, msg := range validation.IsDNS1123Subdomain(*ep.NodeName) {
			errs = append(errs, field.Invalid(p.Child("nodeName"), *ep.NodeName, msg))
		}
	}
	tp := p.Child("deprecatedTopology")
	if len(ep.DeprecatedTopology) > maxSliceTopology {
		errs = append(errs, field.TooMany(tp, len(ep.DeprecatedTopology), maxSliceTopology))
	}
	errs = append(errs, metav1validation.ValidateLabels(ep.DeprecatedTopology, tp)...)
	if _, found := ep.DeprecatedTopology[corev1.LabelTopologyZone]; found {
		errs = append(errs, field.InternalError(tp.Key(corev1.LabelTopologyZone),
			fmt.Errorf("reserved key, use zone instead")))
	}
	if ep.Hostname != nil {
		for _, msg := range validation.IsDNS1123Label(*ep.Hostname) {
			errs = append(errs, field.Invalid(p.Child("hostname"), *ep.Hostname, msg))
		}
	}
	if ep.Hints != nil {
		errs = append(errs, validateSliceHints(ep.Hints, p.Child("hints"))...)
	}
	return errs
}

// validateSliceAddress checks an address of the slice's type: an IP of that family that is not unspecified,
// loopback or link-local, or a fully qualified domain name. Unknown types are not checked.
func validateSliceAddress(a string, t discoveryv1.AddressType, p *field.Path) field.ErrorList {
	switch t {
	case discoveryv1.AddressTypeFQDN:
		return validation.IsFullyQualifiedDomainName(p, a)
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
		if errs := validation.IsValidIPForLegacyField(p, a, true, nil); len(errs) > 0 {
			return errs
		}
	default:
		return nil
	}
	ip := netip.MustParseAddr(a)
	var errs field.ErrorList
	if t == discoveryv1.AddressTypeIPv4 && !ip.Is4() {
		errs = append(errs, field.Invalid(p, a, "must be an IPv4 address"))
	}
	if t == discoveryv1.AddressTypeIPv6 && !ip.Is6() {
		errs = append(errs, field.Invalid(p, a, "must be an IPv6 address"))
	}
	switch {
	case ip.IsUnspecified():
		errs = append(errs, field.Invalid(p, a, fmt.Sprintf("may not be unspecified (%v)", a)))
	case ip.IsLoopback():
		errs = append(errs, field.Invalid(p, a, "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
	case ip.IsLinkLocalUnicast():
		errs = append(errs, field.Invalid(p, a, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
	case ip.IsLinkLocalMulticast():
		errs = append(errs, field.Invalid(p, a,
			"may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"))
	}
	return errs
}

// validateSliceHints checks up to 8 zone hints (label values) and 8 node hints (node names), each unique.
func validateSliceHints(h *discoveryv1.EndpointHints, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	zp, np := p.Child("forZones"), p.Child("forNodes")
	if len(h.ForZones) > maxSliceZoneHints {
		return field.ErrorList{field.TooMany(zp, len(h.ForZones), maxSliceZoneHints)}
	}
	if len(h.ForNodes) > maxSliceNodeHints {
		return field.ErrorList{field.TooMany(np, len(h.ForNodes), maxSliceNodeHints)}
	}
	zones := make([]string, len(h.ForZones))
	for i, z := range h.ForZones {
		zones[i] = z.Name
	}
	errs = append(errs, validateHintNames(zones, zp, validation.IsValidLabelValue)...)
	nodes := make([]string, len(h.ForNodes))
	for i, n := range h.ForNodes {
		nodes[i] = n.Name
	}
	return append(errs, validateHintNames(nodes, np, validation.IsDNS1123Subdomain)...)
}

// validateHintNames checks a hint list's names, at p[i].name, are valid and unique.
func validateHintNames(names []string, p *field.Path, valid func(string) []string) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, n := range names {
		np := p.Index(i).Child("name")
		if seen[n] {
			errs = append(errs, field.Duplicate(np, n))
		}
		seen[n] = true
		for _, msg := range valid(n) {
			errs = append(errs, field.Invalid(np, n, msg))
		}
	}
	return errs
}

// validateSlicePorts checks up to 20000 ports with unique DNS-label names, TCP, UDP or SCTP, a valid number and
// a qualified appProtocol.
func validateSlicePorts(ports []discoveryv1.EndpointPort, p *field.Path) field.ErrorList {
	if len(ports) > maxSlicePorts {
		return field.ErrorList{field.TooMany(p, len(ports), maxSlicePorts)}
	}
	protocols := []corev1.Protocol{corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP}
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, port := range ports {
		ip := p.Index(i)
		var name string
		if port.Name != nil {
			name = *port.Name
		}
		if name != "" {
			for _, msg := range validation.IsDNS1123Label(name) {
				errs = append(errs, field.Invalid(ip.Child("name"), name, msg))
			}
		}
		if seen[name] {
			errs = append(errs, field.Duplicate(ip.Child("name"), name))
		}
		seen[name] = true
		switch {
		case port.Protocol == nil:
			errs = append(errs, field.Required(ip.Child("protocol"), ""))
		case *port.Protocol != protocols[0] && *port.Protocol != protocols[1] && *port.Protocol != protocols[2]:
			errs = append(errs, field.NotSupported(ip.Child("protocol"), *port.Protocol, protocols))
		}
		if port.Port != nil {
			for _, msg := range validation.IsValidPortNum(int(*port.Port)) {
				errs = append(errs, field.Invalid(ip.Child("port"), *port.Port, msg))
			}
		}
		if port.AppProtocol != nil {
			for _, msg := range validation.IsQualifiedName(*port.AppProtocol) {
				errs = append(errs, field.Invalid(ip.Child("appProtocol"), *port.AppProtocol, msg))
			}
		}
	}
	return errs
}

var endpointSliceColumns = []metav1.TableColumnDefinition{
	nameColumn,
	textColumn("AddressType", discoveryv1.EndpointSlice{}.SwaggerDoc()["addressType"]),
	textColumn("Ports", discoveryv1.EndpointSlice{}.SwaggerDoc()["ports"]),
	textColumn("Endpoints", discoveryv1.EndpointSlice{}.SwaggerDoc()["endpoints"]),
	ageColumn,
}

// endpointSliceCells: NAME ADDRESSTYPE PORTS ("80,443", "*") ENDPOINTS ("10.0.0.1,10.0.0.2 + 3 more...") AGE.
func endpointSliceCells(obj runtime.Object, now time.Time) []any {
	es := obj.(*discoveryv1.EndpointSlice)
	ports := make([]string, 0, len(es.Ports))
	for _, port := range es.Ports {
		switch {
		case port.Port != nil:
			ports = append(ports, strconv.Itoa(int(*port.Port)))
		case port.Name != nil:
			ports = append(ports, *port.Name)
		default:
			ports = append(ports, "*")
		}
	}
	var addresses []string
	for _, ep := range es.Endpoints {
		addresses = append(addresses, ep.Addresses...)
	}
	return []any{es.Name, string(es.AddressType), sliceListCell(ports), sliceListCell(addresses), age(es.CreationTimestamp, now)}
}

// sliceListCell joins the first three items of list with commas and counts the rest ("a,b,c + 2 more..."); an
// empty list is "<unset>".
func sliceListCell(list []string) string {
	if len(list) == 0 {
		return "<unset>"
	}
	if len(list) <= sliceListCellItems {
		return strings.Join(list, ",")
	}
	return fmt.Sprintf("%s + %d more...", strings.Join(list[:sliceListCellItems], ","), len(list)-sliceListCellItems)
}
