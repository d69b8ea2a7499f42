package kubelet

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// apiServiceName is the Service of the Kubernetes API in the default namespace, whose variables
// (KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT, ...) every container gets.
const apiServiceName = "kubernetes"

// serviceEnv is the service links of pod's containers, as kubelet makes them: for default/kubernetes always, and
// unless the pod turns enableServiceLinks off, for every Service of the pod's namespace that has a cluster IP
// (one of the pod's namespace named kubernetes wins over default/kubernetes):
//
//	<NAME>_SERVICE_HOST=<cluster IP>   <NAME>_SERVICE_PORT=<first port>   <NAME>_SERVICE_PORT_<PORT NAME>=<port>
//	<NAME>_PORT=tcp://<ip>:<first port>   <NAME>_PORT_<port>_<PROTO>=tcp://<ip>:<port>, and its _PROTO, _PORT, _ADDR
//
// with NAME the Service's name upper-cased, "-" made "_" (Docker's link variables). nil services: none.
func serviceEnv(services corelisters.ServiceLister, pod *corev1.Pod) (map[string]string, error) {
	if services == nil {
		return nil, nil
	}
	chosen := map[string]*corev1.Service{}
	if api, err := services.Services(metav1.NamespaceDefault).Get(apiServiceName); err == nil && hasClusterIP(api) {
		chosen[apiServiceName] = api
	}
	if pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks {
		own, err := services.Services(pod.Namespace).List(labels.Everything())
		if err != nil {
			return nil, fmt.Errorf("services of namespace %s: %w", pod.Namespace, err)
		}
		for _, svc := range own {
			if hasClusterIP(svc) {
				chosen[svc.Name] = svc
			}
		}
	}
	out := make(map[string]string, 8*len(chosen))
	for _, svc := range chosen {
		addServiceVars(out, svc)
	}
	return out, nil
}

// hasClusterIP: headless and ExternalName Services (and ones not given an address yet) have no variables.
func hasClusterIP(svc *corev1.Service) bool {
	return svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone && len(svc.Spec.Ports) > 0
}

func addServiceVars(out map[string]string, svc *corev1.Service) {
	prefix := envName(svc.Name)
	ip := svc.Spec.ClusterIP
	out[prefix+"_SERVICE_HOST"] = ip
	out[prefix+"_SERVICE_PORT"] = strconv.Itoa(int(svc.Spec.Ports[0].Port))
	for i, p := range svc.Spec.Ports {
		if p.Name != "" {
			out[prefix+"_SERVICE_PORT_"+envName(p.Name)] = strconv.Itoa(int(p.Port))
		}
		proto := strings.ToLower(string(p.Protocol))
		if proto == "" {
			proto = "tcp"
		}
		url := proto + "://" + net.JoinHostPort(ip, strconv.Itoa(int(p.Port)))
		if i == 0 {
			out[prefix+"_PORT"] = url
		}
		pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, p.Port, strings.ToUpper(proto))
		out[pp] = url
		out[pp+"_PROTO"] = proto
		out[pp+"_PORT"] = strconv.Itoa(int(p.Port))
		out[pp+"_ADDR"] = ip
	}
}

// envName is a Service or port name as a variable name: upper case, "-" as "_".
func envName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }
