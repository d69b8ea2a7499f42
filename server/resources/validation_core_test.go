package resources

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// errorSummary renders errors as "<type> <field>", the parts these tests pin down.
func errorSummary(errs field.ErrorList) []string {
	out := []string{}
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Field)
	}
	return out
}

// coreCase is an object and the errors validating it must produce.
type coreCase struct {
	name string
	obj  runtime.Object
	want []string
}

// runCoreValidation defaults each object with plural's Default, as the machinery does, then checks Validate.
func runCoreValidation(t *testing.T, plural string, cases []coreCase) {
	t.Helper()
	r := coreResource(t, plural)
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			if r.Default != nil {
				r.Default(tt.obj)
			}
			if diff := cmp.Diff(tt.want, errorSummary(r.Validate(tt.obj))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// testPod is a valid pod changed by edit.
func testPod(edit func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
	}
	if edit != nil {
		edit(p)
	}
	return p
}

const (
	required     = string(field.ErrorTypeRequired) + " "
	invalid      = string(field.ErrorTypeInvalid) + " "
	notSupported = string(field.ErrorTypeNotSupported) + " "
	duplicate    = string(field.ErrorTypeDuplicate) + " "
	forbidden    = string(field.ErrorTypeForbidden) + " "
	notFound     = string(field.ErrorTypeNotFound) + " "
)

func TestValidatePod(t *testing.T) {
	q := resource.MustParse
	runCoreValidation(t, "pods", []coreCase{
		{"minimal", testPod(nil), []string{}},
		{"full", testPod(func(p *corev1.Pod) {
			always := corev1.ContainerRestartPolicyAlways
			p.Spec.Volumes = []corev1.Volume{{Name: "data"}, {Name: "conf", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"},
					Items: []corev1.KeyToPath{{Key: "app.yaml", Path: "app.yaml"}}}}}}
			p.Spec.InitContainers = []corev1.Container{{Name: "migrate", Image: "migrate:1"},
				{Name: "proxy", Image: "envoy:1", RestartPolicy: &always,
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}}}
			c := &p.Spec.Containers[0]
			c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 80}, {Name: "metrics", ContainerPort: 9090, Protocol: "UDP"}}
			c.Env = []corev1.EnvVar{{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
				FieldPath: "metadata.labels['app']"}}}, {Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}}}
			c.EnvFrom = []corev1.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}}}}
			c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "conf", MountPath: "/etc/app", SubPath: "app"}}
			c.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("100m"), "example.com/gpu": q("1")},
				Limits: corev1.ResourceList{"cpu": q("1"), "memory": q("1Gi"), "example.com/gpu": q("1")}}
			c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}}
			c.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090}}}
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute,
					TolerationSeconds: ptrTo(int64(300))}}
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: "kubernetes.io/os", Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}}}}}}},
				PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
					Weight: 50, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}}}
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone",
				WhenUnsatisfiable: corev1.DoNotSchedule, MinDomains: ptrTo(int32(2))}}
			p.Spec.NodeSelector = map[string]string{"disktype": "ssd"}
			p.Spec.DNSPolicy = corev1.DNSNone
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"svc.cluster.local."}}
		}), []string{}},
		{"no containers", testPod(func(p *corev1.Pod) { p.Spec.Containers = nil }), []string{required + "spec.containers"}},
		{"container name and image", testPod(func(p *corev1.Pod) {
			p.Spec.Containers = []corev1.Container{{Name: "Web_1"}, {Name: "sidecar", Image: " busybox"}}
		}), []string{invalid + "spec.containers[0].name", required + "spec.containers[0].image", invalid + "spec.containers[1].image"}},
		{"duplicate container names", testPod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "web", Image: "busybox"}}
		}), []string{duplicate + "spec.containers[0].name"}},
		{"ports", testPod(func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 70000},
				{Name: "http", ContainerPort: 81, Protocol: "ICMP"}, {ContainerPort: 82, HostPort: 8080}, {ContainerPort: 83, HostPort: 8080}}
		}), []string{invalid + "spec.containers[0].ports[0].containerPort", duplicate + "spec.containers[0].ports[1].name",
			notSupported + "spec.containers[0].ports[1].protocol", duplicate + "spec.containers[0].ports[3].hostPort"}},
		{"resources", testPod(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"cpu": q("2"), "memory": q("-1"), "example.com/gpu": q("1")},
				Limits:   corev1.ResourceList{"cpu": q("1"), "pods": q("1")}}
		}), []string{invalid + "spec.containers[0].resources.requests[memory]", invalid + "spec.containers[0].resources.limits[pods]",
			invalid + "spec.containers[0].resources.requests[pods]", invalid + "spec.containers[0].resources.requests[cpu]",
			forbidden + "spec.containers[0].resources.limits"}},
		{"restart policy", testPod(func(p *corev1.Pod) { p.Spec.RestartPolicy = "Sometimes" }),
			[]string{notSupported + "spec.restartPolicy"}},
		{"probes", testPod(func(p *corev1.Pod) {
			c := &p.Spec.Containers[0]
			c.LivenessProbe = &corev1.Probe{SuccessThreshold: 2}
			c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}},
				TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(0)}}, PeriodSeconds: -1}
		}), []string{required + "spec.containers[0].livenessProbe", invalid + "spec.containers[0].livenessProbe.successThreshold",
			forbidden + "spec.containers[0].readinessProbe.tcpSocket", invalid + "spec.containers[0].readinessProbe.tcpSocket.port",
			invalid + "spec.containers[0].readinessProbe.periodSeconds"}},
		{"volumes", testPod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{
				{Name: "a", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}, Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
				{Name: "a"}, {VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{}}},
				{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{DefaultMode: ptrTo(int32(01000)),
					Items: []corev1.KeyToPath{{Key: "k", Path: "../etc/passwd"}}}}},
			}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "missing", MountPath: "/m"}, {Name: "a", MountPath: "/m"}}
		}), []string{forbidden + "spec.volumes[0].secret", duplicate + "spec.volumes[1].name", required + "spec.volumes[2].name",
			required + "spec.volumes[2].hostPath.path", required + "spec.volumes[3].configMap.name",
			invalid + "spec.volumes[3].configMap.defaultMode", invalid + "spec.volumes[3].configMap.items[0].path",
			notFound + "spec.containers[0].volumeMounts[0].name", invalid + "spec.containers[0].volumeMounts[1].mountPath"}},
		{"env", testPod(func(p *corev1.Pod) {
			c := &p.Spec.Containers[0]
			c.Env = []corev1.EnvVar{{Name: "A=B"}, {Name: "X", Value: "1", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.hostname"}}}, {}}
			c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{}, SecretRef: &corev1.SecretEnvSource{}}}
		}), []string{invalid + "spec.containers[0].env[0].name", invalid + "spec.containers[0].env[1].valueFrom",
			notSupported + "spec.containers[0].env[1].valueFrom.fieldRef.fieldPath", required + "spec.containers[0].env[2].name",
			invalid + "spec.containers[0].envFrom[0]", required + "spec.containers[0].envFrom[0].configMapRef.name",
			required + "spec.containers[0].envFrom[0].secretRef.name"}},
		{"tolerations", testPod(func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "a", Operator: corev1.TolerationOpExists, Value: "v"},
				{Key: "b", Value: "v", Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: ptrTo(int64(1))},
				{Value: "v"}, {Key: "c", Effect: "Sometimes"}}
		}), []string{invalid + "spec.tolerations[0].operator", invalid + "spec.tolerations[1].effect",
			invalid + "spec.tolerations[2].operator", notSupported + "spec.tolerations[3].effect"}},
		{"init container probes", testPod(func(p *corev1.Pod) {
			never := corev1.ContainerRestartPolicyNever
			p.Spec.InitContainers = []corev1.Container{
				{Name: "init", Image: "busybox", LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}},
				{Name: "init2", Image: "busybox", RestartPolicy: &never}}
		}), []string{forbidden + "spec.initContainers[0].livenessProbe", notSupported + "spec.initContainers[1].restartPolicy"}},
		{"dns none without nameservers", testPod(func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSNone }),
			[]string{required + "spec.dnsConfig.nameservers"}},
		{"host network ports", testPod(func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
		}), []string{invalid + "spec.containers[0].ports[0].containerPort"}},
		{"scheduling fields", testPod(func(p *corev1.Pod) {
			p.Spec.ActiveDeadlineSeconds = ptrTo(int64(0))
			p.Spec.NodeSelector = map[string]string{"bad key!": "x"}
			p.Spec.NodeName = "Node_1"
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{}}}
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{WhenUnsatisfiable: corev1.ScheduleAnyway, MaxSkew: 1}}
		}), []string{invalid + "spec.nodeSelector", invalid + "spec.nodeName", invalid + "spec.activeDeadlineSeconds",
			required + "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
			required + "spec.topologySpreadConstraints[0].topologyKey"}},
		{"ephemeral container", testPod(func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{TargetContainerName: "nope", EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "debug", Image: "busybox", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}
		}), []string{forbidden + "spec.ephemeralContainers[0].ports", notFound + "spec.ephemeralContainers[0].targetContainerName"}},
	})
}

func TestValidatePodTemplateSpec(t *testing.T) {
	tests := []struct {
		name string
		tmpl corev1.PodTemplateSpec
		want []string
	}{
		{"valid", corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}, []string{}},
		{"invalid", corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "-web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web"}},
				EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "d", Image: "b"}}}}},
			[]string{invalid + "spec.template.metadata.labels", required + "spec.template.spec.containers[0].image",
				forbidden + "spec.template.spec.ephemeralContainers"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defaultPodTemplateSpec(&tt.tmpl)
			got := errorSummary(validatePodTemplateSpec(&tt.tmpl, field.NewPath("spec", "template")))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func testService(edit func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	if edit != nil {
		edit(s)
	}
	return s
}

func TestValidateService(t *testing.T) {
	runCoreValidation(t, "services", []coreCase{
		{"minimal", testService(nil), []string{}},
		{"headless without ports", testService(func(s *corev1.Service) { s.Spec.ClusterIP = "None"; s.Spec.Ports = nil }), []string{}},
		{"external name", testService(func(s *corev1.Service) {
			s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com."}
		}), []string{}},
		{"load balancer", testService(func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080}, {Name: "dns", Port: 53, Protocol: "UDP"}}
			s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"}
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = 30999
		}), []string{}},
		{"no ports", testService(func(s *corev1.Service) { s.Spec.Ports = nil }), []string{required + "spec.ports"}},
		{"port names and numbers", testService(func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 0}, {Port: 81}, {Name: "http", Port: 82, Protocol: "ICMP"},
				{Name: "Bad_Name", Port: 83, TargetPort: intstr.FromString("no_way")}}
		}), []string{invalid + "spec.ports[0].port", invalid + "spec.ports[0].targetPort", required + "spec.ports[1].name",
			duplicate + "spec.ports[2].name", notSupported + "spec.ports[2].protocol", invalid + "spec.ports[3].name",
			invalid + "spec.ports[3].targetPort"}},
		{"duplicate port", testService(func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Name: "a", Port: 80}, {Name: "b", Port: 80}}
		}), []string{duplicate + "spec.ports[1]"}},
		{"type", testService(func(s *corev1.Service) { s.Spec.Type = "Magic" }), []string{notSupported + "spec.type"}},
		{"headless node port", testService(func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.ClusterIP = "None"
		}), []string{invalid + "spec.clusterIP"}},
		{"node port on cluster IP", testService(func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30080 }),
			[]string{forbidden + "spec.ports[0].nodePort"}},
		{"selector and cluster IP", testService(func(s *corev1.Service) {
			s.Spec.Selector = map[string]string{"app": "-web"}
			s.Spec.ClusterIP = "10.0.0.300"
		}), []string{invalid + "spec.clusterIPs[0]", invalid + "spec.selector"}},
		{"external name missing", testService(func(s *corev1.Service) {
			s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ClusterIP: "10.0.0.1"}
		}), []string{forbidden + "spec.clusterIP", required + "spec.externalName"}},
		{"load balancer fields on cluster IP", testService(func(s *corev1.Service) {
			s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"}
			s.Spec.HealthCheckNodePort = 30000
		}), []string{forbidden + "spec.loadBalancerSourceRanges", invalid + "spec.healthCheckNodePort"}},
		{"ip families", testService(func(s *corev1.Service) {
			s.Spec.IPFamilies = []corev1.IPFamily{"IPv5"}
			s.Spec.ClusterIP = "10.0.0.1"
		}), []string{notSupported + "spec.ipFamilies[0]", invalid + "spec.clusterIPs[0]"}},
		{"session affinity timeout", testService(func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptrTo(int32(90000))}}
		}), []string{invalid + "spec.sessionAffinityConfig.clientIP.timeoutSeconds"}},
	})
}

func TestValidateSecret(t *testing.T) {
	secret := func(typ corev1.SecretType, data map[string]string) *corev1.Secret {
		s := &corev1.Secret{Type: typ, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	runCoreValidation(t, "secrets", []coreCase{
		{"opaque", secret("", map[string]string{"a.key": "x"}), []string{}},
		{"custom type", secret("example.com/thing", nil), []string{}},
		{"bad key", secret("", map[string]string{"a b": "x"}), []string{invalid + "data[a b]"}},
		{"service account token", secret(corev1.SecretTypeServiceAccountToken, nil),
			[]string{required + "metadata.annotations[kubernetes.io/service-account.name]"}},
		{"dockerconfigjson missing", secret(corev1.SecretTypeDockerConfigJson, nil), []string{required + "data[.dockerconfigjson]"}},
		{"dockerconfigjson not JSON", secret(corev1.SecretTypeDockerConfigJson, map[string]string{".dockerconfigjson": "{"}),
			[]string{invalid + "data[.dockerconfigjson]"}},
		{"dockerconfigjson", secret(corev1.SecretTypeDockerConfigJson, map[string]string{".dockerconfigjson": `{"auths":{}}`}), []string{}},
		{"dockercfg missing", secret(corev1.SecretTypeDockercfg, nil), []string{required + "data[.dockercfg]"}},
		{"basic auth", secret(corev1.SecretTypeBasicAuth, nil), []string{required + "data[username]", required + "data[password]"}},
		{"basic auth password only", secret(corev1.SecretTypeBasicAuth, map[string]string{"password": ""}), []string{}},
		{"ssh", secret(corev1.SecretTypeSSHAuth, nil), []string{required + "data[ssh-privatekey]"}},
		{"tls", secret(corev1.SecretTypeTLS, map[string]string{"tls.crt": "c"}), []string{required + "data[tls.key]"}},
	})
}

func TestValidateOtherCoreKinds(t *testing.T) {
	q := resource.MustParse
	tests := []struct {
		plural string
		cases  []coreCase
	}{
		{"namespaces", []coreCase{
			{"valid", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, []string{}},
			{"finalizer", &corev1.Namespace{Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"foo", "example.com/x"}}},
				[]string{invalid + "spec.finalizers[0]"}},
		}},
		{"nodes", []coreCase{
			{"valid", &corev1.Node{Spec: corev1.NodeSpec{PodCIDR: "10.244.0.0/24", PodCIDRs: []string{"10.244.0.0/24"},
				Taints: []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}},
				Status: corev1.NodeStatus{Capacity: corev1.ResourceList{"cpu": q("4"), "pods": q("110")}}}, []string{}},
			{"taints", &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{
				{Key: "a", Effect: "Sometimes"}, {Key: "b", Effect: corev1.TaintEffectNoExecute},
				{Key: "b", Effect: corev1.TaintEffectNoExecute}, {Key: "c"}}}},
				[]string{notSupported + "spec.taints[0].effect", duplicate + "spec.taints[2]", required + "spec.taints[3].effect"}},
			{"pod CIDR", &corev1.Node{Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/33", PodCIDRs: []string{"10.0.0.0/33"}}},
				[]string{invalid + "spec.podCIDRs[0]"}},
		}},
		{"resourcequotas", []coreCase{
			{"valid", &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"pods": q("10"),
				"requests.cpu": q("2"), "count/deployments.apps": q("5"), "requests.example.com/gpu": q("2")}}}, []string{}},
			{"invalid", &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{
				Hard:   corev1.ResourceList{"cpu": q("-1"), "pods": q("1.5"), "foo": q("1")},
				Scopes: []corev1.ResourceQuotaScope{"Terminating", "NotTerminating", "Sometimes"}}},
				[]string{invalid + "spec.hard[cpu]", invalid + "spec.hard[foo]", invalid + "spec.hard[pods]",
					notSupported + "spec.scopes[2]", invalid + "spec.scopes"}},
		}},
		{"limitranges", []coreCase{
			{"valid", &corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: "Container",
				Min: corev1.ResourceList{"cpu": q("100m")}, Max: corev1.ResourceList{"cpu": q("2")},
				MaxLimitRequestRatio: corev1.ResourceList{"cpu": q("4")}}}}}, []string{}},
			{"invalid", &corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
				{Type: "Container", Min: corev1.ResourceList{"cpu": q("2")}, Max: corev1.ResourceList{"cpu": q("1")}},
				{Type: "Pod", Default: corev1.ResourceList{"cpu": q("1")}},
				{Type: "Container"}, {}}}},
				[]string{invalid + "spec.limits[0].min[cpu]", invalid + "spec.limits[0].defaultRequest[cpu]",
					invalid + "spec.limits[0].default[cpu]", forbidden + "spec.limits[1].default", duplicate + "spec.limits[2].type", required + "spec.limits[3].type"}},
		}},
		{"events", []coreCase{
			{"valid", &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default"},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"}}, []string{}},
			{"node event in default", &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default"},
				InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "n1"}}, []string{}},
			{"namespace mismatch", &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "a"},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "b", Name: "web"}},
				[]string{invalid + "involvedObject.namespace"}},
			{"new style without reporter", &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default"},
				EventTime: metav1.NowMicro(), InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default"}},
				[]string{required + "reportingComponent", invalid + "reportingComponent", invalid + "reportingComponent",
					required + "reportingInstance"}},
		}},
		{"serviceaccounts", []coreCase{
			{"valid", &corev1.ServiceAccount{Secrets: []corev1.ObjectReference{{Name: "token"}}}, []string{}},
			{"bad secret name", &corev1.ServiceAccount{ImagePullSecrets: []corev1.LocalObjectReference{{Name: "Bad_Name"}}},
				[]string{invalid + "imagePullSecrets[0].name"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.plural, func(t *testing.T) { runCoreValidation(t, tt.plural, tt.cases) })
	}
}

func TestValidateNamespaceStatus(t *testing.T) {
	deleted := metav1.Now()
	tests := []struct {
		name string
		ns   *corev1.Namespace
		want []string
	}{
		{"active", &corev1.Namespace{Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}, []string{}},
		{"terminating too early", &corev1.Namespace{Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
			[]string{invalid + "status.phase"}},
		{"active while deleted", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &deleted},
			Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}, []string{invalid + "status.phase"}},
	}
	r := coreResource(t, "namespaces")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, errorSummary(r.ValidateStatus(tt.ns, tt.ns))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// TestValidatePodSysctls: sysctl names are checked as Kubernetes checks them — required, the name pattern (with
// dots or slashes), unique — and a network or IPC sysctl is refused in a pod using the node's namespace; the
// conformance suite's invalid names ("foo-", "bar..") fail with upstream's message while "safe-and-unsafe" and
// "kernel.shmmax" pass.
func TestValidatePodSysctls(t *testing.T) {
	const pattern = `must have at most 253 characters and match regex ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`
	withSysctls := func(host func(*corev1.PodSpec), names ...string) *corev1.Pod {
		return testPod(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{}
			for _, n := range names {
				p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: n, Value: "1"})
			}
			if host != nil {
				host(&p.Spec)
			}
		})
	}
	hostNetwork := func(s *corev1.PodSpec) { s.HostNetwork = true }
	hostIPC := func(s *corev1.PodSpec) { s.HostIPC = true }
	long := strings.Repeat("a", 250) + ".bcd"
	cases := []struct {
		name string
		pod  *corev1.Pod
		want []string
	}{
		{"valid", withSysctls(nil, "kernel.shm_rmid_forced", "net/ipv4/ip_local_port_range", "net.ipv4.conf.eno2/100.rp_filter",
			"safe-and-unsafe", "kernel.shmmax"), nil},
		{"conformance's invalid names", withSysctls(nil, "foo-", "kernel.shmmax", "safe-and-unsafe", "bar.."), []string{
			`spec.securityContext.sysctls[0].name: Invalid value: "foo-": ` + pattern,
			`spec.securityContext.sysctls[3].name: Invalid value: "bar..": ` + pattern}},
		{"other invalid names", withSysctls(nil, "", "Kernel.Foo", "a b", ".kernel", long), []string{
			`spec.securityContext.sysctls[0].name: Required value`,
			`spec.securityContext.sysctls[1].name: Invalid value: "Kernel.Foo": ` + pattern,
			`spec.securityContext.sysctls[2].name: Invalid value: "a b": ` + pattern,
			`spec.securityContext.sysctls[3].name: Invalid value: ".kernel": ` + pattern,
			`spec.securityContext.sysctls[4].name: Invalid value: "` + long + `": ` + pattern}},
		{"duplicate", withSysctls(nil, "kernel.shm_rmid_forced", "kernel.shm_rmid_forced"), []string{
			`spec.securityContext.sysctls[1].name: Duplicate value: "kernel.shm_rmid_forced"`}},
		{"host network", withSysctls(hostNetwork, "net.ipv4.tcp_syncookies", "net/ipv4/ping_group_range", "kernel.shm_rmid_forced"), []string{
			`spec.securityContext.sysctls[0].name: Invalid value: "net.ipv4.tcp_syncookies": may not be specified when 'hostNetwork' is true`,
			`spec.securityContext.sysctls[1].name: Invalid value: "net/ipv4/ping_group_range": may not be specified when 'hostNetwork' is true`}},
		{"host IPC", withSysctls(hostIPC, "kernel.shm_rmid_forced", "kernel/msgmax", "fs.mqueue.msg_max", "net.ipv4.tcp_syncookies"), []string{
			`spec.securityContext.sysctls[0].name: Invalid value: "kernel.shm_rmid_forced": may not be specified when 'hostIPC' is true`,
			`spec.securityContext.sysctls[1].name: Invalid value: "kernel/msgmax": may not be specified when 'hostIPC' is true`,
			`spec.securityContext.sysctls[2].name: Invalid value: "fs.mqueue.msg_max": may not be specified when 'hostIPC' is true`}},
	}
	r := coreResource(t, "pods")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r.Default(tc.pod)
			var got []string
			for _, e := range r.Validate(tc.pod) {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
