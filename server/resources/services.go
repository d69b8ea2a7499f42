package resources

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func init() {
	register(&Resource{
		GVK:            corev1.SchemeGroupVersion.WithKind("Service"),
		Plural:         "services",
		ShortNames:     []string{"svc"},
		Categories:     []string{"all"},
		Namespaced:     true,
		New:            func() runtime.Object { return &corev1.Service{} },
		NewList:        func() runtime.Object { return &corev1.ServiceList{} },
		Status:         true,
		NameValidation: apivalidation.NameIsDNS1035Label,
		Default:        func(obj runtime.Object) { defaultService(obj.(*corev1.Service)) },
		Validate:       func(obj runtime.Object) field.ErrorList { return validateService(obj.(*corev1.Service)) },
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return validateServiceUpdate(obj.(*corev1.Service), old.(*corev1.Service))
		},
		Table: &Table{Columns: serviceColumns, Cells: serviceCells},
		Fields: func(obj runtime.Object) fields.Set {
			svc := obj.(*corev1.Service)
			return fields.Set{"spec.clusterIP": svc.Spec.ClusterIP, "spec.type": string(svc.Spec.Type)}
		},
	})
}

// defaultService fills in type ClusterIP, sessionAffinity None (ClientIP gets a 3 hour timeout), port protocols
// TCP and target ports equal to ports, traffic policies Cluster where the type uses them, node ports allocation
// for load balancers, clusterIP and clusterIPs mirroring each other, and a single IPv4 family unless the cluster
// IPs say otherwise. Fields a type does not use and that this function owns (externalTrafficPolicy, the IP family
// fields of an ExternalName service) are cleared, so that changing the type keeps the service valid. Allocating
// cluster IPs and node ports is the server's job.
func defaultService(svc *corev1.Service) {
	s := &svc.Spec
	if s.Type == "" {
		s.Type = corev1.ServiceTypeClusterIP
	}
	defaultSessionAffinity(s)
	for i := range s.Ports {
		p := &s.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	external := s.Type == corev1.ServiceTypeNodePort || s.Type == corev1.ServiceTypeLoadBalancer
	if external && s.ExternalTrafficPolicy == "" {
		s.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	} else if !external {
		s.ExternalTrafficPolicy = ""
	}
	if s.Type == corev1.ServiceTypeLoadBalancer && s.AllocateLoadBalancerNodePorts == nil {
		s.AllocateLoadBalancerNodePorts = ptrTo(true)
	}
	if s.ClusterIP == "" && len(s.ClusterIPs) > 0 {
		s.ClusterIP = s.ClusterIPs[0]
	} else if s.ClusterIP != "" && len(s.ClusterIPs) == 0 {
		s.ClusterIPs = []string{s.ClusterIP}
	}
	defaultServiceIPFamilies(s)
}

func defaultSessionAffinity(s *corev1.ServiceSpec) {
	if s.SessionAffinity == "" {
		s.SessionAffinity = corev1.ServiceAffinityNone
	}
	if s.SessionAffinity == corev1.ServiceAffinityNone {
		s.SessionAffinityConfig = nil
		return
	}
	if s.SessionAffinity != corev1.ServiceAffinityClientIP {
		return
	}
	if s.SessionAffinityConfig == nil {
		s.SessionAffinityConfig = &corev1.SessionAffinityConfig{}
	}
	if s.SessionAffinityConfig.ClientIP == nil {
		s.SessionAffinityConfig.ClientIP = &corev1.ClientIPConfig{}
	}
	if s.SessionAffinityConfig.ClientIP.TimeoutSeconds == nil {
		s.SessionAffinityConfig.ClientIP.TimeoutSeconds = ptrTo(corev1.DefaultClientIPServiceAffinitySeconds)
	}
}

// defaultServiceIPFamilies sets internalTrafficPolicy Cluster, ipFamilyPolicy SingleStack (PreferDualStack with
// two families or cluster IPs) and ipFamilies from the cluster IPs, IPv4 without any. ExternalName services have
// none of these.
func defaultServiceIPFamilies(s *corev1.ServiceSpec) {
	if s.Type == corev1.ServiceTypeExternalName {
		s.InternalTrafficPolicy, s.IPFamilyPolicy, s.IPFamilies = nil, nil, nil
		return
	}
	if s.InternalTrafficPolicy == nil {
		s.InternalTrafficPolicy = ptrTo(corev1.ServiceInternalTrafficPolicyCluster)
	}
	if len(s.IPFamilies) == 0 {
		for _, ip := range s.ClusterIPs {
			if f, ok := ipFamilyOf(ip); ok {
				s.IPFamilies = append(s.IPFamilies, f)
			}
		}
	}
	if len(s.IPFamilies) == 0 {
		s.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	}
	if s.IPFamilyPolicy == nil {
		policy := corev1.IPFamilyPolicySingleStack
		if len(s.IPFamilies) > 1 || len(s.ClusterIPs) > 1 {
			policy = corev1.IPFamilyPolicyPreferDualStack
		}
		s.IPFamilyPolicy = &policy
	}
}

// ipFamilyOf reports the family of an IP address; false for "None" and invalid values.
func ipFamilyOf(s string) (corev1.IPFamily, bool) {
	ip, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return "", false
	case ip.Is4():
		return corev1.IPv4Protocol, true
	}
	return corev1.IPv6Protocol, true
}

// maxClientIPAffinitySeconds is the longest ClientIP session affinity: one day.
const maxClientIPAffinitySeconds = 86400

var serviceTypes = []corev1.ServiceType{corev1.ServiceTypeClusterIP, corev1.ServiceTypeExternalName,
	corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort}

// validateService checks the type, ports, cluster IPs, selector, session affinity, external name and the fields
// that only some types allow.
func validateService(svc *corev1.Service) field.ErrorList {
	s, sp := &svc.Spec, field.NewPath("spec")
	var errs field.ErrorList
	switch {
	case s.Type == "":
		errs = append(errs, field.Required(sp.Child("type"), ""))
	case !slices.Contains(serviceTypes, s.Type):
		errs = append(errs, field.NotSupported(sp.Child("type"), s.Type, serviceTypes))
	}
	errs = append(errs, validateServicePorts(s, sp.Child("ports"))...)
	errs = append(errs, validateClusterIPs(s, sp)...)
	errs = append(errs, metav1validation.ValidateLabels(s.Selector, sp.Child("selector"))...)
	errs = append(errs, validateSessionAffinity(s, sp)...)
	for i, ip := range s.ExternalIPs {
		errs = append(errs, validation.IsValidIP(sp.Child("externalIPs").Index(i), ip)...)
	}
	errs = append(errs, validateTrafficPolicies(s, sp)...)
	errs = append(errs, validateLoadBalancerFields(s, sp)...)
	return append(errs, validateIPFamilies(s, sp)...)
}

// validateServicePorts requires ports (except for headless and ExternalName services), names when there are
// several, and unique names, port/protocol and nodePort/protocol pairs.
func validateServicePorts(s *corev1.ServiceSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(s.Ports) == 0 && s.ClusterIP != corev1.ClusterIPNone && s.Type != corev1.ServiceTypeExternalName {
		errs = append(errs, field.Required(p, ""))
	}
	names, ports, nodePorts := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i, port := range s.Ports {
		ip := p.Index(i)
		errs = append(errs, validateServicePortName(port.Name, len(s.Ports) > 1, names, ip.Child("name"))...)
		errs = append(errs, invalidEach(ip.Child("port"), port.Port, validation.IsValidPortNum(int(port.Port)))...)
		errs = append(errs, validateProtocol(port.Protocol, ip.Child("protocol"))...)
		errs = append(errs, validatePortNumOrName(port.TargetPort, ip.Child("targetPort"))...)
		if ap := port.AppProtocol; ap != nil {
			errs = append(errs, invalidEach(ip.Child("appProtocol"), *ap, content.IsLabelKey(*ap))...)
		}
		if key := fmt.Sprintf("%d/%s", port.Port, port.Protocol); ports[key] {
			errs = append(errs, field.Duplicate(ip, key))
		} else {
			ports[key] = true
		}
		if port.NodePort == 0 {
			continue
		}
		errs = append(errs, validateNodePort(s.Type, port.NodePort, ip.Child("nodePort"))...)
		if key := fmt.Sprintf("%d/%s", port.NodePort, port.Protocol); nodePorts[key] {
			errs = append(errs, field.Duplicate(ip.Child("nodePort"), port.NodePort))
		} else {
			nodePorts[key] = true
		}
	}
	return errs
}

// validateServicePortName requires a unique DNS label, and a name at all when required.
func validateServicePortName(name string, required bool, seen map[string]bool, p *field.Path) field.ErrorList {
	switch {
	case name == "" && required:
		return field.ErrorList{field.Required(p, "")}
	case name == "":
		return nil
	case seen[name]:
		return field.ErrorList{field.Duplicate(p, name)}
	}
	seen[name] = true
	return invalidEach(p, name, validation.IsDNS1123Label(name))
}

// validateNodePort allows a node port, a valid port number, only on NodePort and LoadBalancer services.
func validateNodePort(t corev1.ServiceType, port int32, p *field.Path) field.ErrorList {
	if t != corev1.ServiceTypeNodePort && t != corev1.ServiceTypeLoadBalancer {
		return field.ErrorList{field.Forbidden(p, fmt.Sprintf("may not be used when `type` is '%s'", t))}
	}
	return invalidEach(p, port, validation.IsValidPortNum(int(port)))
}

// validateClusterIPs checks clusterIP and clusterIPs: at most two valid IPs, or "None" alone (headless, ClusterIP
// type only), clusterIPs[0] equal to clusterIP, none for ExternalName services, which need an externalName.
func validateClusterIPs(s *corev1.ServiceSpec, sp *field.Path) field.ErrorList {
	var errs field.ErrorList
	cp, csp := sp.Child("clusterIP"), sp.Child("clusterIPs")
	if s.Type == corev1.ServiceTypeExternalName {
		if s.ClusterIP != "" {
			errs = append(errs, field.Forbidden(cp, "may not be set for ExternalName services"))
		}
		if s.ExternalName == "" {
			return append(errs, field.Required(sp.Child("externalName"), ""))
		}
		return append(errs, invalidEach(sp.Child("externalName"), s.ExternalName,
			validation.IsDNS1123Subdomain(strings.TrimSuffix(s.ExternalName, ".")))...)
	}
	if s.ClusterIP != "" && (len(s.ClusterIPs) == 0 || s.ClusterIPs[0] != s.ClusterIP) {
		errs = append(errs, field.Invalid(csp, s.ClusterIPs, "first value must match `clusterIP`"))
	}
	if len(s.ClusterIPs) > 2 {
		errs = append(errs, field.Invalid(csp, s.ClusterIPs, "may only hold up to 2 values"))
	}
	for i, ip := range s.ClusterIPs {
		if ip == corev1.ClusterIPNone {
			if len(s.ClusterIPs) > 1 {
				errs = append(errs, field.Invalid(csp, s.ClusterIPs, "'None' must be the first and only value"))
			}
			continue
		}
		errs = append(errs, validation.IsValidIP(csp.Index(i), ip)...)
	}
	if s.ClusterIP == corev1.ClusterIPNone && s.Type != corev1.ServiceTypeClusterIP {
		errs = append(errs, field.Invalid(cp, s.ClusterIP, fmt.Sprintf("may not be set to 'None' for %s services", s.Type)))
	}
	return errs
}

// validateSessionAffinity accepts None and ClientIP; ClientIP needs a timeout of 1 to 86400 seconds.
func validateSessionAffinity(s *corev1.ServiceSpec, sp *field.Path) field.ErrorList {
	ap, cp := sp.Child("sessionAffinity"), sp.Child("sessionAffinityConfig")
	switch s.SessionAffinity {
	case "":
		return field.ErrorList{field.Required(ap, "")}
	case corev1.ServiceAffinityNone:
		if s.SessionAffinityConfig != nil {
			return field.ErrorList{field.Invalid(cp, s.SessionAffinityConfig,
				fmt.Sprintf("must not be set when session affinity is %s", corev1.ServiceAffinityNone))}
		}
		return nil
	case corev1.ServiceAffinityClientIP:
		tp := cp.Child("clientIP", "timeoutSeconds")
		c := s.SessionAffinityConfig
		if c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
			return field.ErrorList{field.Required(tp, "when session affinity type is ClientIP")}
		}
		if t := *c.ClientIP.TimeoutSeconds; t <= 0 || t > maxClientIPAffinitySeconds {
			return field.ErrorList{field.Invalid(tp, t, fmt.Sprintf("must be greater than 0 and less than %d",
				maxClientIPAffinitySeconds))}
		}
		return nil
	}
	return field.ErrorList{field.NotSupported(ap, s.SessionAffinity,
		[]corev1.ServiceAffinity{corev1.ServiceAffinityClientIP, corev1.ServiceAffinityNone})}
}

// validateTrafficPolicies checks externalTrafficPolicy (NodePort and LoadBalancer only) and
// internalTrafficPolicy (all but ExternalName), both Cluster or Local.
func validateTrafficPolicies(s *corev1.ServiceSpec, sp *field.Path) field.ErrorList {
	var errs field.ErrorList
	ep := sp.Child("externalTrafficPolicy")
	external := s.Type == corev1.ServiceTypeNodePort || s.Type == corev1.ServiceTypeLoadBalancer
	switch e := s.ExternalTrafficPolicy; {
	case !external && e != "":
		errs = append(errs, field.Invalid(ep, e, "may only be set when `type` is 'NodePort' or 'LoadBalancer'"))
	case external && e == "":
		errs = append(errs, field.Required(ep, ""))
	case external && e != corev1.ServiceExternalTrafficPolicyCluster && e != corev1.ServiceExternalTrafficPolicyLocal:
		errs = append(errs, field.NotSupported(ep, e, []corev1.ServiceExternalTrafficPolicy{
			corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal}))
	}
	ip := sp.Child("internalTrafficPolicy")
	switch i := s.InternalTrafficPolicy; {
	case s.Type == corev1.ServiceTypeExternalName:
	case i == nil:
		errs = append(errs, field.Required(ip, ""))
	case *i != corev1.ServiceInternalTrafficPolicyCluster && *i != corev1.ServiceInternalTrafficPolicyLocal:
		errs = append(errs, field.NotSupported(ip, *i, []corev1.ServiceInternalTrafficPolicy{
			corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal}))
	}
	return errs
}

// validateLoadBalancerFields allows loadBalancerSourceRanges (valid CIDRs), allocateLoadBalancerNodePorts,
// loadBalancerClass and healthCheckNodePort (with externalTrafficPolicy Local) only on LoadBalancer services.
func validateLoadBalancerFields(s *corev1.ServiceSpec, sp *field.Path) field.ErrorList {
	var errs field.ErrorList
	lb := s.Type == corev1.ServiceTypeLoadBalancer
	const onlyLB = "may only be used when `type` is 'LoadBalancer'"
	if len(s.LoadBalancerSourceRanges) > 0 && !lb {
		errs = append(errs, field.Forbidden(sp.Child("loadBalancerSourceRanges"), onlyLB))
	}
	for i, r := range s.LoadBalancerSourceRanges {
		errs = append(errs, validation.IsValidCIDR(sp.Child("loadBalancerSourceRanges").Index(i), strings.TrimSpace(r))...)
	}
	if s.AllocateLoadBalancerNodePorts != nil && !lb {
		errs = append(errs, field.Forbidden(sp.Child("allocateLoadBalancerNodePorts"), onlyLB))
	}
	if c := s.LoadBalancerClass; c != nil && !lb {
		errs = append(errs, field.Forbidden(sp.Child("loadBalancerClass"), onlyLB))
	} else if c != nil {
		errs = append(errs, invalidEach(sp.Child("loadBalancerClass"), *c, content.IsLabelKey(*c))...)
	}
	if hp := s.HealthCheckNodePort; hp != 0 {
		if !lb || s.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
			errs = append(errs, field.Invalid(sp.Child("healthCheckNodePort"), hp,
				"may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
		}
		errs = append(errs, invalidEach(sp.Child("healthCheckNodePort"), hp, validation.IsValidPortNum(int(hp)))...)
	}
	return errs
}

// validateIPFamilies checks ipFamilyPolicy and ipFamilies (IPv4 or IPv6, unique, two only with a dual-stack
// policy) and that each cluster IP belongs to the family at its index. ExternalName services have neither.
func validateIPFamilies(s *corev1.ServiceSpec, sp *field.Path) field.ErrorList {
	var errs field.ErrorList
	pp, fp := sp.Child("ipFamilyPolicy"), sp.Child("ipFamilies")
	if s.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	policies := []corev1.IPFamilyPolicy{corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack,
		corev1.IPFamilyPolicyRequireDualStack}
	if s.IPFamilyPolicy != nil && !slices.Contains(policies, *s.IPFamilyPolicy) {
		errs = append(errs, field.NotSupported(pp, *s.IPFamilyPolicy, policies))
	}
	if s.IPFamilyPolicy != nil && *s.IPFamilyPolicy == corev1.IPFamilyPolicySingleStack && len(s.IPFamilies) > 1 {
		errs = append(errs, field.Invalid(pp, *s.IPFamilyPolicy,
			"must be RequireDualStack or PreferDualStack when multiple 'ipFamilies' are specified"))
	}
	for i, f := range s.IPFamilies {
		switch {
		case f != corev1.IPv4Protocol && f != corev1.IPv6Protocol:
			errs = append(errs, field.NotSupported(fp.Index(i), f, []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}))
		case slices.Index(s.IPFamilies, f) < i:
			errs = append(errs, field.Duplicate(fp.Index(i), f))
		}
	}
	if len(s.IPFamilies) > 2 {
		errs = append(errs, field.Invalid(fp, s.IPFamilies, "may only hold up to 2 values"))
	}
	for i, ip := range s.ClusterIPs {
		if f, ok := ipFamilyOf(ip); ok && i < len(s.IPFamilies) && f != s.IPFamilies[i] {
			errs = append(errs, field.Invalid(sp.Child("clusterIPs").Index(i), ip,
				fmt.Sprintf("expected an %s value as indicated by `ipFamilies[%d]`", s.IPFamilies[i], i)))
		}
	}
	return errs
}

// validateServiceUpdate keeps assigned cluster IPs and IP families: the primary may not change and a secondary may
// be added or removed, never replaced. Services changing to or from ExternalName are exempt.
func validateServiceUpdate(svc, old *corev1.Service) field.ErrorList {
	if svc.Spec.Type == corev1.ServiceTypeExternalName || old.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	sp := field.NewPath("spec")
	var errs field.ErrorList
	if old.Spec.ClusterIP != "" && svc.Spec.ClusterIP != old.Spec.ClusterIP {
		errs = append(errs, field.Invalid(sp.Child("clusterIP"), svc.Spec.ClusterIP, "field is immutable"))
	}
	for i := 1; i < len(old.Spec.ClusterIPs) && i < len(svc.Spec.ClusterIPs); i++ {
		if svc.Spec.ClusterIPs[i] != old.Spec.ClusterIPs[i] {
			errs = append(errs, field.Invalid(sp.Child("clusterIPs").Index(i), svc.Spec.ClusterIPs[i], "may not change once set"))
		}
	}
	for i := 0; i < len(old.Spec.IPFamilies) && i < len(svc.Spec.IPFamilies); i++ {
		if svc.Spec.IPFamilies[i] != old.Spec.IPFamilies[i] {
			errs = append(errs, field.Invalid(sp.Child("ipFamilies").Index(i), svc.Spec.IPFamilies[i], "may not change once set"))
		}
	}
	return errs
}

// serviceColumns are kubectl's service columns; the selector shows with -o wide.
var serviceColumns = []metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Type", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["type"]},
	{Name: "Cluster-IP", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["clusterIP"]},
	{Name: "External-IP", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["externalIPs"]},
	{Name: "Port(s)", Type: "string", Description: corev1.ServiceSpec{}.SwaggerDoc()["ports"]},
	ageColumn,
	{Name: "Selector", Type: "string", Priority: 1, Description: corev1.ServiceSpec{}.SwaggerDoc()["selector"]},
}

func serviceCells(obj runtime.Object, now time.Time) []any {
	svc := obj.(*corev1.Service)
	clusterIP := "<none>"
	if len(svc.Spec.ClusterIPs) > 0 {
		clusterIP = svc.Spec.ClusterIPs[0]
	}
	return []any{svc.Name, string(svc.Spec.Type), clusterIP, serviceExternalIP(svc), orNone(servicePorts(svc.Spec.Ports)),
		age(svc.CreationTimestamp, now), labels.FormatLabels(svc.Spec.Selector)}
}

// serviceExternalIP is the EXTERNAL-IP cell: external IPs, load balancer ingress ("<pending>" until there is
// one) or the external name.
func serviceExternalIP(svc *corev1.Service) string {
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		return orNone(strings.Join(svc.Spec.ExternalIPs, ","))
	case corev1.ServiceTypeLoadBalancer:
		var ips []string
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				ips = append(ips, in.IP)
			} else if in.Hostname != "" {
				ips = append(ips, in.Hostname)
			}
		}
		slices.Sort(ips)
		ips = append(slices.Compact(ips), svc.Spec.ExternalIPs...)
		if len(ips) == 0 {
			return "<pending>"
		}
		return strings.Join(ips, ",")
	case corev1.ServiceTypeExternalName:
		return svc.Spec.ExternalName
	}
	return "<unknown>"
}

// servicePorts is "80/TCP,443:30443/TCP".
func servicePorts(ports []corev1.ServicePort) string {
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		if p.NodePort > 0 {
			out[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
		}
	}
	return strings.Join(out, ",")
}
