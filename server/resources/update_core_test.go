package resources

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// updateCase is an edit of a stored object and the errors ValidateUpdate must report for it.
type updateCase struct {
	name string
	edit func(obj runtime.Object)
	want []string
}

// runCoreUpdates defaults old, applies each edit to a copy, defaults it and checks ValidateUpdate.
func runCoreUpdates(t *testing.T, plural string, old runtime.Object, cases []updateCase) {
	t.Helper()
	r := coreResource(t, plural)
	if r.Default != nil {
		r.Default(old)
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			obj := old.DeepCopyObject()
			tt.edit(obj)
			if r.Default != nil {
				r.Default(obj)
			}
			if diff := cmp.Diff(tt.want, errorSummary(r.ValidateUpdate(obj, old))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidatePodUpdate(t *testing.T) {
	old := testPod(func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox:1"}}
		p.Spec.ActiveDeadlineSeconds = ptrTo(int64(600))
		p.Spec.Tolerations = []corev1.Toleration{{Key: "a", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute,
			TolerationSeconds: ptrTo(int64(300))}}
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}}
		p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debug", Image: "busybox"}}}
	})
	pod := func(f func(p *corev1.Pod)) func(runtime.Object) { return func(o runtime.Object) { f(o.(*corev1.Pod)) } }
	runCoreUpdates(t, "pods", old, []updateCase{
		{"no change", pod(func(*corev1.Pod) {}), []string{}},
		{"images", pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].Image = "nginx:1.28"
			p.Spec.InitContainers[0].Image = "busybox:2"
		}), []string{}},
		{"lower deadline, grace period, new toleration, gates removed, bound", pod(func(p *corev1.Pod) {
			p.Spec.ActiveDeadlineSeconds = ptrTo(int64(60))
			p.Spec.TerminationGracePeriodSeconds = ptrTo(int64(1))
			p.Spec.Tolerations[0].TolerationSeconds = ptrTo(int64(10))
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "b", Operator: corev1.TolerationOpExists})
			p.Spec.SchedulingGates = nil
			p.Spec.NodeName = "node-1"
		}), []string{}},
		{"raise deadline", pod(func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptrTo(int64(601)) }),
			[]string{invalid + "spec.activeDeadlineSeconds"}},
		{"unset deadline", pod(func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = nil }),
			[]string{invalid + "spec.activeDeadlineSeconds"}},
		{"toleration removed", pod(func(p *corev1.Pod) { p.Spec.Tolerations = nil }), []string{forbidden + "spec.tolerations"}},
		{"toleration changed", pod(func(p *corev1.Pod) { p.Spec.Tolerations[0].Key = "z" }), []string{forbidden + "spec.tolerations"}},
		// Ephemeral containers change through pods/ephemeralcontainers only, as upstream's (pods_ephemeral_test.go).
		{"ephemeral container added", pod(func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
				EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug2", Image: "busybox"}})
		}), []string{forbidden + "spec"}},
		{"ephemeral container changed", pod(func(p *corev1.Pod) { p.Spec.EphemeralContainers[0].Image = "alpine" }),
			[]string{forbidden + "spec"}},
		{"ephemeral container removed", pod(func(p *corev1.Pod) { p.Spec.EphemeralContainers = nil }),
			[]string{forbidden + "spec"}},
		{"restart policy", pod(func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }), []string{forbidden + "spec"}},
		{"container added", pod(func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "b", Image: "b"})
		}), []string{forbidden + "spec"}},
		{"gate added", pod(func(p *corev1.Pod) {
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: "x"})
		}), []string{forbidden + "spec"}},
	})

	bound := testPod(func(p *corev1.Pod) { p.Spec.NodeName = "node-1" })
	runCoreUpdates(t, "pods", bound, []updateCase{
		{"rebind", pod(func(p *corev1.Pod) { p.Spec.NodeName = "node-2" }), []string{forbidden + "spec"}},
	})
}

func TestPodUpdateMessage(t *testing.T) {
	old := testPod(nil)
	defaultPod(old)
	pod := old.DeepCopy()
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.Hostname = "h"
	errs := validatePodUpdate(pod, old)
	want := "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`," +
		"`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing " +
		"tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n" +
		"changed: spec.restartPolicy, spec.hostname"
	if len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("errors = %v, want one: %s", errs, want)
	}
}

func TestValidateServiceUpdate(t *testing.T) {
	old := testService(func(s *corev1.Service) {
		s.Spec.ClusterIP = "10.96.0.10"
		s.Spec.ClusterIPs = []string{"10.96.0.10"}
	})
	svc := func(f func(s *corev1.Service)) func(runtime.Object) {
		return func(o runtime.Object) { f(o.(*corev1.Service)) }
	}
	dual := corev1.IPFamilyPolicyPreferDualStack
	runCoreUpdates(t, "services", old, []updateCase{
		{"ports and selector", svc(func(s *corev1.Service) {
			s.Spec.Ports[0].Port = 8080
			s.Spec.Selector = map[string]string{"app": "api"}
		}), []string{}},
		{"add secondary family", svc(func(s *corev1.Service) {
			s.Spec.IPFamilyPolicy = &dual
			s.Spec.ClusterIPs = append(s.Spec.ClusterIPs, "fd00::10")
			s.Spec.IPFamilies = append(s.Spec.IPFamilies, corev1.IPv6Protocol)
		}), []string{}},
		{"to external name", svc(func(s *corev1.Service) {
			s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}
		}), []string{}},
		{"cluster IP changed", svc(func(s *corev1.Service) {
			s.Spec.ClusterIP = "10.96.0.11"
			s.Spec.ClusterIPs = []string{"10.96.0.11"}
		}), []string{invalid + "spec.clusterIP"}},
		{"family changed", svc(func(s *corev1.Service) { s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol} }),
			[]string{invalid + "spec.ipFamilies[0]"}},
	})
}

func TestValidateSecretUpdate(t *testing.T) {
	old := &corev1.Secret{Type: corev1.SecretTypeOpaque, Immutable: ptrTo(true), Data: map[string][]byte{"a": []byte("1")}}
	sec := func(f func(s *corev1.Secret)) func(runtime.Object) {
		return func(o runtime.Object) { f(o.(*corev1.Secret)) }
	}
	runCoreUpdates(t, "secrets", old, []updateCase{
		{"labels only", sec(func(s *corev1.Secret) { s.Labels = map[string]string{"a": "b"} }), []string{}},
		{"data", sec(func(s *corev1.Secret) { s.Data["a"] = []byte("2") }), []string{forbidden + "data"}},
		{"mutable again", sec(func(s *corev1.Secret) { s.Immutable = nil }), []string{forbidden + "immutable"}},
		{"type", sec(func(s *corev1.Secret) {
			s.Type = corev1.SecretTypeTLS
			s.Data["tls.crt"] = nil
			s.Data["tls.key"] = nil
		}),
			[]string{invalid + "type", forbidden + "data"}},
	})
	mutable := &corev1.Secret{Data: map[string][]byte{"a": []byte("1")}}
	runCoreUpdates(t, "secrets", mutable, []updateCase{
		{"data", sec(func(s *corev1.Secret) { s.Data["a"] = []byte("2") }), []string{}},
		{"made immutable", sec(func(s *corev1.Secret) { s.Immutable = ptrTo(true) }), []string{}},
	})
}

func TestValidateNodeUpdate(t *testing.T) {
	old := &corev1.Node{Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}, ProviderID: "kind://n1"}}
	node := func(f func(n *corev1.Node)) func(runtime.Object) {
		return func(o runtime.Object) { f(o.(*corev1.Node)) }
	}
	runCoreUpdates(t, "nodes", old, []updateCase{
		{"cordon", node(func(n *corev1.Node) { n.Spec.Unschedulable = true }), []string{}},
		{"pod CIDR", node(func(n *corev1.Node) { n.Spec.PodCIDR = "10.244.2.0/24"; n.Spec.PodCIDRs = []string{"10.244.2.0/24"} }),
			[]string{forbidden + "spec.podCIDRs"}},
		{"provider ID", node(func(n *corev1.Node) { n.Spec.ProviderID = "kind://n2" }), []string{forbidden + "spec.providerID"}},
	})
	runCoreUpdates(t, "nodes", &corev1.Node{}, []updateCase{
		{"first pod CIDR", node(func(n *corev1.Node) { n.Spec.PodCIDR = "10.244.2.0/24"; n.Spec.PodCIDRs = []string{"10.244.2.0/24"} }),
			[]string{}},
	})
}
