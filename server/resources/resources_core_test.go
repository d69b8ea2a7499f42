package resources

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// coreResource looks a core/v1 resource up in the default registry.
func coreResource(t *testing.T, plural string) *Resource {
	t.Helper()
	r, ok := Default().Lookup(schema.GroupVersionResource{Version: "v1", Resource: plural})
	if !ok {
		t.Fatalf("core/v1 %s not registered", plural)
	}
	return r
}

func TestCoreRegistration(t *testing.T) {
	tests := []struct {
		plural     string
		kind       string
		short      []string
		categories []string
		namespaced bool
		status     bool
		generation bool
		storage    string
	}{
		{"namespaces", "Namespace", []string{"ns"}, nil, false, true, false, "namespaces"},
		{"pods", "Pod", []string{"po"}, []string{"all"}, true, true, true, "pods"},
		{"services", "Service", []string{"svc"}, []string{"all"}, true, true, false, "services"},
		{"endpoints", "Endpoints", []string{"ep"}, nil, true, false, false, "endpoints"},
		{"secrets", "Secret", nil, nil, true, false, false, "secrets"},
		{"serviceaccounts", "ServiceAccount", []string{"sa"}, nil, true, false, false, "serviceaccounts"},
		{"events", "Event", []string{"ev"}, nil, true, false, false, "events"},
		{"nodes", "Node", []string{"no"}, nil, false, true, false, "nodes"},
		{"resourcequotas", "ResourceQuota", []string{"quota"}, nil, true, true, false, "resourcequotas"},
		{"limitranges", "LimitRange", []string{"limits"}, nil, true, false, false, "limitranges"},
	}
	for _, tt := range tests {
		t.Run(tt.plural, func(t *testing.T) {
			r := coreResource(t, tt.plural)
			got := []any{r.GVK.Kind, r.ShortNames, r.Categories, r.Namespaced, r.Status, r.Generation, r.Storage}
			want := []any{tt.kind, tt.short, tt.categories, tt.namespaced, tt.status, tt.generation, tt.storage}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("registration (-want +got):\n%s", diff)
			}
			if r.New() == nil || r.NewList() == nil {
				t.Errorf("New/NewList do not return objects")
			}
			if r.Table == nil || len(r.Table.Columns) == 0 {
				t.Fatalf("no table")
			}
			if first := r.Table.Columns[0]; tt.plural != "events" && first.Format != "name" {
				t.Errorf("first column %+v, want the name column", first)
			}
		})
	}
}

func TestCoreNameValidation(t *testing.T) {
	tests := []struct {
		plural, name string
		valid        bool
	}{
		{"namespaces", "kube-system", true},
		{"namespaces", "a.b", false},
		{"services", "web", true},
		{"services", "1web", false},
		{"services", "a.b", false},
		{"pods", "web.v1", true},
	}
	for _, tt := range tests {
		t.Run(tt.plural+"/"+tt.name, func(t *testing.T) {
			r := coreResource(t, tt.plural)
			validate := r.NameValidation
			if validate == nil {
				validate = ValidateDNSSubdomainName
			}
			if got := len(validate(tt.name, false)) == 0; got != tt.valid {
				t.Errorf("valid = %v, want %v", got, tt.valid)
			}
		})
	}
}

// defaulted runs the registered Default of plural on obj and returns it.
func defaulted[T runtime.Object](t *testing.T, plural string, obj T) T {
	t.Helper()
	coreResource(t, plural).Default(obj)
	return obj
}

func TestDefaultPod(t *testing.T) {
	limits := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	tests := []struct {
		name string
		in   *corev1.Pod
		want *corev1.Pod
	}{
		{
			name: "minimal",
			in:   &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}},
			want: &corev1.Pod{
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "web", Image: "nginx", ImagePullPolicy: corev1.PullAlways,
						TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile}},
					RestartPolicy:                 corev1.RestartPolicyAlways,
					TerminationGracePeriodSeconds: ptrTo(int64(30)),
					DNSPolicy:                     corev1.DNSClusterFirst,
					ServiceAccountName:            "default",
					DeprecatedServiceAccount:      "default",
					SecurityContext:               &corev1.PodSecurityContext{},
					SchedulerName:                 "default-scheduler",
					EnableServiceLinks:            ptrTo(true),
				},
				Status: corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort},
			},
		},
		{
			name: "full",
			in: &corev1.Pod{Spec: corev1.PodSpec{
				ServiceAccountName: "builder",
				HostNetwork:        true,
				Containers: []corev1.Container{{
					Name: "web", Image: "registry.local:5000/web:1.2",
					Ports:     []corev1.ContainerPort{{ContainerPort: 8080}},
					Env:       []corev1.EnvVar{{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
					Resources: corev1.ResourceRequirements{Limits: limits},
					LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
						HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(8080)}}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
						TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}, PeriodSeconds: 5},
				}},
				Volumes: []corev1.Volume{
					{Name: "scratch"},
					{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}}}},
					{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
				},
			}},
			want: &corev1.Pod{
				Spec: corev1.PodSpec{
					HostNetwork: true,
					Containers: []corev1.Container{{
						Name: "web", Image: "registry.local:5000/web:1.2", ImagePullPolicy: corev1.PullIfNotPresent,
						TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
						Ports: []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080, Protocol: corev1.ProtocolTCP}},
						Env: []corev1.EnvVar{{Name: "NODE", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}}},
						Resources: corev1.ResourceRequirements{Limits: limits, Requests: limits},
						LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
							HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080), Scheme: corev1.URISchemeHTTP}},
							TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
							TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
							TimeoutSeconds: 1, PeriodSeconds: 5, SuccessThreshold: 1, FailureThreshold: 3},
					}},
					Volumes: []corev1.Volume{
						{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}, DefaultMode: ptrTo(int32(0644))}}},
						{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
							SecretName: "creds", DefaultMode: ptrTo(int32(0644))}}},
					},
					RestartPolicy:                 corev1.RestartPolicyAlways,
					TerminationGracePeriodSeconds: ptrTo(int64(30)),
					DNSPolicy:                     corev1.DNSClusterFirst,
					ServiceAccountName:            "builder",
					DeprecatedServiceAccount:      "builder",
					SecurityContext:               &corev1.PodSecurityContext{},
					SchedulerName:                 "default-scheduler",
					EnableServiceLinks:            ptrTo(true),
				},
				Status: corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSGuaranteed},
			},
		},
		{
			name: "status kept",
			in: &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox@sha256:abc"}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBurstable}},
			want: &corev1.Pod{
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "c", Image: "busybox@sha256:abc", ImagePullPolicy: corev1.PullIfNotPresent,
						TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile}},
					RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: ptrTo(int64(30)),
					DNSPolicy: corev1.DNSClusterFirst, ServiceAccountName: "default", DeprecatedServiceAccount: "default",
					SecurityContext: &corev1.PodSecurityContext{}, SchedulerName: "default-scheduler", EnableServiceLinks: ptrTo(true),
				},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBurstable},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, defaulted(t, "pods", tt.in)); diff != "" {
				t.Errorf("defaulted pod (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultPullPolicy(t *testing.T) {
	tests := map[string]corev1.PullPolicy{
		"nginx": corev1.PullAlways, "nginx:latest": corev1.PullAlways, "nginx:1.27": corev1.PullIfNotPresent,
		"localhost:5000/nginx": corev1.PullAlways, "localhost:5000/nginx:v1": corev1.PullIfNotPresent,
		"nginx@sha256:0123": corev1.PullIfNotPresent, "": corev1.PullIfNotPresent,
	}
	for image, want := range tests {
		t.Run(image, func(t *testing.T) {
			if got := defaultPullPolicy(image); got != want {
				t.Errorf("defaultPullPolicy(%q) = %s, want %s", image, got, want)
			}
		})
	}
}

func TestPodQOSClass(t *testing.T) {
	rl := func(cpu, mem string) corev1.ResourceList {
		l := corev1.ResourceList{}
		if cpu != "" {
			l[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[corev1.ResourceMemory] = resource.MustParse(mem)
		}
		return l
	}
	tests := []struct {
		name       string
		containers []corev1.ResourceRequirements
		want       corev1.PodQOSClass
	}{
		{"nothing", []corev1.ResourceRequirements{{}}, corev1.PodQOSBestEffort},
		{"equal", []corev1.ResourceRequirements{{Requests: rl("1", "1Gi"), Limits: rl("1000m", "1Gi")}}, corev1.PodQOSGuaranteed},
		{"requests only", []corev1.ResourceRequirements{{Requests: rl("1", "")}}, corev1.PodQOSBurstable},
		{"cpu limit only", []corev1.ResourceRequirements{{Requests: rl("1", ""), Limits: rl("1", "")}}, corev1.PodQOSBurstable},
		{"one of two", []corev1.ResourceRequirements{{Requests: rl("1", "1Gi"), Limits: rl("1", "1Gi")}, {}}, corev1.PodQOSBurstable},
		{"lower request", []corev1.ResourceRequirements{{Requests: rl("1", "1Gi"), Limits: rl("2", "1Gi")}}, corev1.PodQOSBurstable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var spec corev1.PodSpec
			for _, r := range tt.containers {
				spec.Containers = append(spec.Containers, corev1.Container{Resources: r})
			}
			if got := podQOSClass(&spec); got != tt.want {
				t.Errorf("podQOSClass = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestDefaultPodTemplateSpec(t *testing.T) {
	tmpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	defaultPodTemplateSpec(tmpl)
	c := tmpl.Spec.Containers[0]
	got := []any{tmpl.Spec.RestartPolicy, tmpl.Spec.DNSPolicy, tmpl.Spec.SchedulerName, c.ImagePullPolicy,
		tmpl.Spec.ServiceAccountName, tmpl.Spec.EnableServiceLinks == nil, c.Resources.Requests == nil}
	want := []any{corev1.RestartPolicyAlways, corev1.DNSClusterFirst, "default-scheduler", corev1.PullIfNotPresent, "", true, true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("template defaults (-want +got):\n%s", diff)
	}
}

func TestDefaultService(t *testing.T) {
	ipv4, single, cluster := []corev1.IPFamily{corev1.IPv4Protocol}, ptrTo(corev1.IPFamilyPolicySingleStack),
		ptrTo(corev1.ServiceInternalTrafficPolicyCluster)
	tests := []struct {
		name string
		in   corev1.ServiceSpec
		want corev1.ServiceSpec
	}{
		{
			name: "minimal",
			in:   corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}},
			want: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
				Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80)}},
				Type:  corev1.ServiceTypeClusterIP, SessionAffinity: corev1.ServiceAffinityNone,
				IPFamilies: ipv4, IPFamilyPolicy: single, InternalTrafficPolicy: cluster},
		},
		{
			name: "load balancer with named target and client IP affinity",
			in: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, SessionAffinity: corev1.ServiceAffinityClientIP,
				ClusterIP: "fd00::10", Ports: []corev1.ServicePort{{Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("https")}}},
			want: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, SessionAffinity: corev1.ServiceAffinityClientIP,
				SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptrTo(int32(10800))}},
				ClusterIP:             "fd00::10", ClusterIPs: []string{"fd00::10"},
				Ports:                 []corev1.ServicePort{{Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("https")}},
				ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster, AllocateLoadBalancerNodePorts: ptrTo(true),
				IPFamilies: []corev1.IPFamily{corev1.IPv6Protocol}, IPFamilyPolicy: single, InternalTrafficPolicy: cluster},
		},
		{
			name: "external name",
			in:   corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com", ExternalTrafficPolicy: "Local"},
			want: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.com",
				SessionAffinity: corev1.ServiceAffinityNone},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := defaulted(t, "services", &corev1.Service{Spec: tt.in})
			if diff := cmp.Diff(tt.want, got.Spec); diff != "" {
				t.Errorf("defaulted service spec (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultNamespace(t *testing.T) {
	deleted := metav1.Now()
	tests := []struct {
		name string
		in   *corev1.Namespace
		want *corev1.Namespace
	}{
		{
			name: "new",
			in:   &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"tier": "prod"}}},
			want: &corev1.Namespace{
				ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"tier": "prod", "kubernetes.io/metadata.name": "team-a"}},
				Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}},
				Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
			},
		},
		{
			name: "terminating without finalizers",
			in: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "old", DeletionTimestamp: &deleted},
				Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
			want: &corev1.Namespace{
				ObjectMeta: metav1.ObjectMeta{Name: "old", DeletionTimestamp: &deleted, Labels: map[string]string{"kubernetes.io/metadata.name": "old"}},
				Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, defaulted(t, "namespaces", tt.in)); diff != "" {
				t.Errorf("defaulted namespace (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultSecret(t *testing.T) {
	tests := []struct {
		name string
		in   *corev1.Secret
		want *corev1.Secret
	}{
		{"empty", &corev1.Secret{}, &corev1.Secret{Type: corev1.SecretTypeOpaque}},
		{
			name: "stringData merged",
			in: &corev1.Secret{Type: corev1.SecretTypeBasicAuth, Data: map[string][]byte{"username": []byte("old"), "x": []byte("1")},
				StringData: map[string]string{"username": "admin", "password": "s3cret"}},
			want: &corev1.Secret{Type: corev1.SecretTypeBasicAuth,
				Data: map[string][]byte{"username": []byte("admin"), "password": []byte("s3cret"), "x": []byte("1")}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, defaulted(t, "secrets", tt.in)); diff != "" {
				t.Errorf("defaulted secret (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultLimitRange(t *testing.T) {
	q := resource.MustParse
	in := &corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{"cpu": q("2")}, Min: corev1.ResourceList{"memory": q("64Mi")}},
		{Type: corev1.LimitTypePod, Max: corev1.ResourceList{"cpu": q("4")}},
	}}}
	want := &corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{"cpu": q("2")}, Min: corev1.ResourceList{"memory": q("64Mi")},
			Default: corev1.ResourceList{"cpu": q("2")}, DefaultRequest: corev1.ResourceList{"cpu": q("2"), "memory": q("64Mi")}},
		{Type: corev1.LimitTypePod, Max: corev1.ResourceList{"cpu": q("4")}},
	}}}
	if diff := cmp.Diff(want, defaulted(t, "limitranges", in)); diff != "" {
		t.Errorf("defaulted limit range (-want +got):\n%s", diff)
	}
}

func TestCoreFields(t *testing.T) {
	tests := []struct {
		plural string
		obj    runtime.Object
		want   fields.Set
	}{
		{"pods", &corev1.Pod{
			Spec: corev1.PodSpec{NodeName: "n1", RestartPolicy: "Always", SchedulerName: "default-scheduler",
				ServiceAccountName: "default", HostNetwork: true},
			Status: corev1.PodStatus{Phase: "Running", PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}},
				NominatedNodeName: "n2"},
		}, fields.Set{"spec.nodeName": "n1", "spec.restartPolicy": "Always", "spec.schedulerName": "default-scheduler",
			"spec.serviceAccountName": "default", "spec.hostNetwork": "true", "status.phase": "Running",
			"status.podIP": "10.0.0.1", "status.nominatedNodeName": "n2"}},
		{"events", &corev1.Event{
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web", UID: "u1",
				APIVersion: "v1", ResourceVersion: "7", FieldPath: "spec.containers{web}"},
			Reason: "Pulled", Type: "Normal", ReportingController: "kubelet",
		}, fields.Set{"involvedObject.kind": "Pod", "involvedObject.namespace": "default", "involvedObject.name": "web",
			"involvedObject.uid": "u1", "involvedObject.apiVersion": "v1", "involvedObject.resourceVersion": "7",
			"involvedObject.fieldPath": "spec.containers{web}", "reason": "Pulled", "reportingComponent": "kubelet",
			"source": "kubelet", "type": "Normal"}},
		{"secrets", &corev1.Secret{Type: corev1.SecretTypeTLS}, fields.Set{"type": "kubernetes.io/tls"}},
		{"namespaces", &corev1.Namespace{Status: corev1.NamespaceStatus{Phase: "Active"}}, fields.Set{"status.phase": "Active"}},
		{"nodes", &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}}, fields.Set{"spec.unschedulable": "true"}},
		{"services", &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.1", Type: "ClusterIP"}},
			fields.Set{"spec.clusterIP": "10.96.0.1", "spec.type": "ClusterIP"}},
	}
	for _, tt := range tests {
		t.Run(tt.plural, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, coreResource(t, tt.plural).Fields(tt.obj)); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
		})
	}
}
