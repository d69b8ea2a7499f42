package framework

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// rl builds a resource list from name, quantity pairs ("cpu", "100m", "memory", "1Gi", ...).
func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// ctr is a container requesting reqs (nil: no requests at all).
func ctr(name string, reqs corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: reqs}}
}

// sidecar is a restartable init container requesting reqs.
func sidecar(name string, reqs corev1.ResourceList) corev1.Container {
	c := ctr(name, reqs)
	always := corev1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

func podSpec(spec corev1.PodSpec) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p"}, Spec: spec}
}

const mi = 1024 * 1024

// TestNewPodInfoRequests checks the requests a pod is filtered with (containers summed, init containers as a
// maximum with sidecars running alongside, overhead added) and the ones it is scored with (containers without
// a CPU or memory request counted at 100m / 200Mi, explicit zeros kept).
func TestNewPodInfoRequests(t *testing.T) {
	tests := []struct {
		name        string
		spec        corev1.PodSpec
		want        Resource
		wantNonZero Resource
	}{{
		name:        "no containers",
		spec:        corev1.PodSpec{},
		want:        Resource{AllowedPodNumber: 1},
		wantNonZero: Resource{},
	}, {
		name:        "a container without requests counts the scoring defaults only",
		spec:        corev1.PodSpec{Containers: []corev1.Container{ctr("c", nil)}},
		want:        Resource{AllowedPodNumber: 1},
		wantNonZero: Resource{MilliCPU: 100, Memory: 200 * mi},
	}, {
		name:        "explicit zero requests are not defaulted",
		spec:        corev1.PodSpec{Containers: []corev1.Container{ctr("c", rl("cpu", "0", "memory", "0"))}},
		want:        Resource{AllowedPodNumber: 1},
		wantNonZero: Resource{},
	}, {
		name: "containers are summed; a missing memory request is defaulted for scoring only",
		spec: corev1.PodSpec{Containers: []corev1.Container{
			ctr("a", rl("cpu", "100m", "memory", "1Gi")), ctr("b", rl("cpu", "200m"))}},
		want:        Resource{MilliCPU: 300, Memory: 1024 * mi, AllowedPodNumber: 1},
		wantNonZero: Resource{MilliCPU: 300, Memory: 1224 * mi},
	}, {
		name: "init containers count as their maximum, not their sum",
		spec: corev1.PodSpec{
			InitContainers: []corev1.Container{ctr("i1", rl("cpu", "500m")), ctr("i2", rl("cpu", "200m", "memory", "2Gi"))},
			Containers:     []corev1.Container{ctr("a", rl("cpu", "100m", "memory", "1Gi")), ctr("b", rl("cpu", "200m", "memory", "1Gi"))},
		},
		want:        Resource{MilliCPU: 500, Memory: 2048 * mi, AllowedPodNumber: 1},
		wantNonZero: Resource{MilliCPU: 500, Memory: 2048 * mi},
	}, {
		name: "init containers below the containers' sum change nothing",
		spec: corev1.PodSpec{
			InitContainers: []corev1.Container{ctr("i", rl("cpu", "1m", "memory", "1"))},
			Containers:     []corev1.Container{ctr("c", rl("cpu", "1m", "memory", "1"))},
		},
		want:        Resource{MilliCPU: 1, Memory: 1, AllowedPodNumber: 1},
		wantNonZero: Resource{MilliCPU: 1, Memory: 1},
	}, {
		name: "a sidecar runs alongside the containers and the later init containers",
		spec: corev1.PodSpec{
			InitContainers: []corev1.Container{sidecar("s", rl("cpu", "100m")), ctr("i", rl("cpu", "400m"))},
			Containers:     []corev1.Container{ctr("c", rl("cpu", "300m"))},
		},
		// containers + sidecar 400m; while i runs: 400m + the sidecar 100m = 500m. Memory defaults: c and s
		// 200Mi each, the same while i runs beside s.
		want:        Resource{MilliCPU: 500, AllowedPodNumber: 1},
		wantNonZero: Resource{MilliCPU: 500, Memory: 400 * mi},
	}, {
		name: "sidecar and containers above the init containers",
		spec: corev1.PodSpec{
			InitContainers: []corev1.Container{ctr("i", rl("cpu", "100m")), sidecar("s", rl("cpu", "200m"))},
			Containers:     []corev1.Container{ctr("c", rl("cpu", "300m"))},
		},
		want:        Resource{MilliCPU: 500, AllowedPodNumber: 1},
		wantNonZero: Resource{MilliCPU: 500, Memory: 400 * mi},
	}, {
		name: "an init container without requests is defaulted for scoring too",
		spec: corev1.PodSpec{
			InitContainers: []corev1.Container{ctr("i", nil)},
			Containers:     []corev1.Container{ctr("c", rl("cpu", "50m", "memory", "10Mi"))},
		},
		want:        Resource{MilliCPU: 50, Memory: 10 * mi, AllowedPodNumber: 1},
		wantNonZero: Resource{MilliCPU: 100, Memory: 200 * mi},
	}, {
		name: "overhead is added",
		spec: corev1.PodSpec{
			Containers: []corev1.Container{ctr("c", rl("cpu", "100m", "memory", "1Gi"))},
			Overhead:   rl("cpu", "50m", "memory", "100Mi"),
		},
		want:        Resource{MilliCPU: 150, Memory: 1124 * mi, AllowedPodNumber: 1},
		wantNonZero: Resource{MilliCPU: 150, Memory: 1124 * mi},
	}, {
		name: "ephemeral storage, extended resources and hugepages",
		spec: corev1.PodSpec{Containers: []corev1.Container{
			ctr("a", rl("cpu", "1", "ephemeral-storage", "1Gi", "example.com/gpu", "2")),
			ctr("b", rl("cpu", "1", "example.com/gpu", "1", "hugepages-2Mi", "4Mi"))}},
		want: Resource{MilliCPU: 2000, EphemeralStorage: 1024 * mi, AllowedPodNumber: 1,
			Scalar: map[corev1.ResourceName]int64{"example.com/gpu": 3, "hugepages-2Mi": 4 * mi}},
		wantNonZero: Resource{MilliCPU: 2000, Memory: 400 * mi},
	}, {
		name: "pod-level requests replace the containers' CPU and memory",
		spec: corev1.PodSpec{
			Resources:  &corev1.ResourceRequirements{Requests: rl("cpu", "2", "memory", "1Gi")},
			Containers: []corev1.Container{ctr("c", rl("cpu", "500m", "memory", "100Mi"))},
		},
		want:        Resource{MilliCPU: 2000, Memory: 1024 * mi, AllowedPodNumber: 1},
		wantNonZero: Resource{MilliCPU: 2000, Memory: 1024 * mi},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pi, err := NewPodInfo(podSpec(tc.spec))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, pi.Requests); diff != "" {
				t.Errorf("Requests (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantNonZero, pi.NonZero); diff != "" {
				t.Errorf("NonZero (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNewPodInfoDuringResize: a pod being resized counts the larger of its spec's requests and what its
// containers' status says the kubelet allocated and applied; an infeasible resize's spec does not count.
func TestNewPodInfoDuringResize(t *testing.T) {
	status := func(allocated, applied corev1.ResourceList) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: "c", AllocatedResources: allocated, Resources: &corev1.ResourceRequirements{Requests: applied}}
	}
	for _, tc := range []struct {
		name       string
		spec       corev1.ResourceList
		status     corev1.ContainerStatus
		infeasible bool
		want       Resource
	}{
		{name: "no resize", spec: rl("cpu", "500m", "memory", "1Gi"), status: status(rl("cpu", "500m", "memory", "1Gi"), rl("cpu", "500m", "memory", "1Gi")),
			want: Resource{MilliCPU: 500, Memory: 1024 * mi, AllowedPodNumber: 1}},
		{name: "growth pending", spec: rl("cpu", "2", "memory", "1Gi"), status: status(rl("cpu", "500m", "memory", "1Gi"), rl("cpu", "500m", "memory", "1Gi")),
			want: Resource{MilliCPU: 2000, Memory: 1024 * mi, AllowedPodNumber: 1}},
		{name: "shrink allocated, not applied yet", spec: rl("cpu", "100m", "memory", "256Mi"), status: status(rl("cpu", "100m", "memory", "256Mi"), rl("cpu", "500m", "memory", "1Gi")),
			want: Resource{MilliCPU: 500, Memory: 1024 * mi, AllowedPodNumber: 1}},
		{name: "infeasible growth", spec: rl("cpu", "64", "memory", "1Gi"), status: status(rl("cpu", "500m", "memory", "1Gi"), rl("cpu", "500m", "memory", "1Gi")),
			infeasible: true, want: Resource{MilliCPU: 500, Memory: 1024 * mi, AllowedPodNumber: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := podSpec(corev1.PodSpec{Containers: []corev1.Container{ctr("c", tc.spec)}})
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{tc.status}
			if tc.infeasible {
				pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible}}
			}
			pi, err := NewPodInfo(pod)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, pi.Requests); diff != "" {
				t.Errorf("Requests (-want +got):\n%s", diff)
			}
			if pi.NonZero.MilliCPU != tc.want.MilliCPU || pi.NonZero.Memory != tc.want.Memory {
				t.Errorf("NonZero %+v, want the requests' cpu and memory", pi.NonZero)
			}
		})
	}
}

func TestResource(t *testing.T) {
	r := NewResource(rl("cpu", "1500m", "memory", "1Ki", "ephemeral-storage", "2", "pods", "10", "example.com/gpu", "2"))
	got := map[corev1.ResourceName]int64{}
	for _, n := range []corev1.ResourceName{"cpu", "memory", "ephemeral-storage", "pods", "example.com/gpu", "example.com/none"} {
		got[n] = r.Get(n)
	}
	want := map[corev1.ResourceName]int64{"cpu": 1500, "memory": 1024, "ephemeral-storage": 2, "pods": 10, "example.com/gpu": 2, "example.com/none": 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}
	c := r.Clone()
	c.Scalar["example.com/gpu"] = 7
	c.Add(rl("cpu", "1"))
	if r.Scalar["example.com/gpu"] != 2 || r.MilliCPU != 1500 {
		t.Errorf("a clone's changes reached the original: %+v", r)
	}
}

func TestNewPodInfoAffinity(t *testing.T) {
	term := func(key, value string) corev1.PodAffinityTerm {
		return corev1.PodAffinityTerm{TopologyKey: "zone", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}}
	}
	pod := podSpec(corev1.PodSpec{Affinity: &corev1.Affinity{
		PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{func() corev1.PodAffinityTerm {
				t := term("app", "db")
				t.MatchLabelKeys = []string{"tenant"}
				return t
			}()},
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 5, PodAffinityTerm: func() corev1.PodAffinityTerm {
				t := term("app", "cache")
				t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
				return t
			}()}},
		},
		PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{func() corev1.PodAffinityTerm {
			t := term("app", "web")
			t.Namespaces = []string{"other"}
			return t
		}()}},
	}})
	pod.Labels = map[string]string{"tenant": "t1"}
	pi, err := NewPodInfo(pod)
	if err != nil {
		t.Fatal(err)
	}
	if !pi.HasAffinity() || len(pi.RequiredAffinityTerms) != 1 || len(pi.PreferredAffinityTerms) != 1 ||
		len(pi.RequiredAntiAffinityTerms) != 1 || len(pi.PreferredAntiAffinityTerms) != 0 {
		t.Fatalf("terms: %+v", pi)
	}
	other := func(ns string, kv ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Labels: map[string]string{}}}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
		return p
	}
	checks := []struct {
		name string
		term *AffinityTerm
		pod  *corev1.Pod
		ns   labels.Set
		want bool
	}{
		{"own namespace by default, matchLabelKeys joins the selector", &pi.RequiredAffinityTerms[0], other("default", "app", "db", "tenant", "t1"), nil, true},
		{"matchLabelKeys: another tenant", &pi.RequiredAffinityTerms[0], other("default", "app", "db", "tenant", "t2"), nil, false},
		{"own namespace only", &pi.RequiredAffinityTerms[0], other("x", "app", "db", "tenant", "t1"), nil, false},
		{"namespaceSelector", &pi.PreferredAffinityTerms[0].AffinityTerm, other("x", "app", "cache"), labels.Set{"team": "a"}, true},
		{"namespaceSelector not matching", &pi.PreferredAffinityTerms[0].AffinityTerm, other("default", "app", "cache"), labels.Set{"team": "b"}, false},
		{"listed namespaces replace the pod's own", &pi.RequiredAntiAffinityTerms[0], other("default", "app", "web"), nil, false},
		{"listed namespace", &pi.RequiredAntiAffinityTerms[0], other("other", "app", "web"), nil, true},
	}
	for _, c := range checks {
		if got := c.term.Matches(c.pod, c.ns); got != c.want {
			t.Errorf("%s: Matches = %v, want %v", c.name, got, c.want)
		}
	}
	if w := pi.PreferredAffinityTerms[0].Weight; w != 5 {
		t.Errorf("weight %d, want 5", w)
	}

	bad := podSpec(corev1.PodSpec{Affinity: &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "zone",
			LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}}},
	}}})
	if _, err := NewPodInfo(bad); err == nil {
		t.Error("an invalid selector operator was accepted")
	}
}
