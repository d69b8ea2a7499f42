package resources

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestAppsValidateUpdate(t *testing.T) {
	otherSelector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "tier": "front"}}
	suspended := func(j *batchv1.Job) { j.Spec.Suspend = new(true) }
	tests := []struct {
		name     string
		old, obj runtime.Object
		want     []string
	}{
		{"deployment replicas and template change",
			validDeployment(nil), validDeployment(func(d *appsv1.Deployment) {
				d.Spec.Replicas = new(int32(5))
				d.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
			}), nil},
		{"deployment selector",
			validDeployment(nil), validDeployment(func(d *appsv1.Deployment) { d.Spec.Selector = otherSelector }),
			[]string{"spec.selector: Invalid value"}},
		{"replicaset selector",
			&appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Selector: appsSelector}},
			&appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Selector: otherSelector}},
			[]string{"spec.selector: Invalid value"}},
		{"daemonset selector",
			&appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Selector: appsSelector}},
			&appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Selector: otherSelector}},
			[]string{"spec.selector: Invalid value"}},
		{"statefulset allowed fields",
			validStatefulSet(nil), validStatefulSet(func(s *appsv1.StatefulSet) {
				s.Spec.Replicas, s.Spec.MinReadySeconds = new(int32(3)), 10
				s.Spec.Template.Spec.Containers[0].Image = "postgres:17"
				s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 1}
				s.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
				s.Spec.RevisionHistoryLimit = new(int32(2))
			}), nil},
		{"statefulset service name",
			validStatefulSet(nil), validStatefulSet(func(s *appsv1.StatefulSet) { s.Spec.ServiceName = "other" }),
			[]string{"spec: Forbidden"}},
		{"controllerrevision data is compared as JSON",
			&appsv1.ControllerRevision{Data: runtime.RawExtension{Raw: []byte(`{"a":1,"b":[2]}`)}},
			&appsv1.ControllerRevision{Data: runtime.RawExtension{Raw: []byte(`{ "b": [2], "a": 1 }`)}}, nil},
		{"controllerrevision data",
			&appsv1.ControllerRevision{Data: runtime.RawExtension{Raw: []byte(`{"a":1}`)}},
			&appsv1.ControllerRevision{Data: runtime.RawExtension{Raw: []byte(`{"a":2}`)}},
			[]string{"data: Invalid value"}},
		{"job parallelism and suspend change",
			validJob(nil), validJob(func(j *batchv1.Job) {
				j.Spec.Completions, j.Spec.Parallelism, j.Spec.Suspend = new(int32(1)), new(int32(3)), new(true)
			}), nil},
		{"job immutable fields",
			validJob(nil), validJob(func(j *batchv1.Job) {
				j.Spec.Completions = new(int32(4))
				j.Spec.Template.Spec.Containers[0].Image = "perl:5"
				j.Spec.PodReplacementPolicy = new(batchv1.Failed)
			}), []string{"spec.completions: Invalid value", "spec.podReplacementPolicy: Invalid value",
				"spec.template: Invalid value"}},
		{"job indexed completions follow parallelism",
			validJob(func(j *batchv1.Job) { j.Spec.CompletionMode = new(batchv1.IndexedCompletion) }),
			validJob(func(j *batchv1.Job) {
				j.Spec.CompletionMode = new(batchv1.IndexedCompletion)
				j.Spec.Completions, j.Spec.Parallelism = new(int32(4)), new(int32(4))
			}), nil},
		{"job indexed completions alone",
			validJob(func(j *batchv1.Job) { j.Spec.CompletionMode = new(batchv1.IndexedCompletion) }),
			validJob(func(j *batchv1.Job) {
				j.Spec.CompletionMode = new(batchv1.IndexedCompletion)
				j.Spec.Completions = new(int32(4))
			}), []string{"spec.completions: Invalid value"}},
		{"suspended job scheduling directives",
			validJob(suspended), validJob(func(j *batchv1.Job) {
				suspended(j)
				j.Spec.Template.Spec.NodeSelector = map[string]string{"zone": "a"}
				j.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
				j.Spec.Template.Annotations = map[string]string{"note": "x"}
			}), nil},
		{"suspended job containers",
			validJob(suspended), validJob(func(j *batchv1.Job) {
				suspended(j)
				j.Spec.Template.Spec.Containers[0].Image = "perl:5"
			}), []string{"spec.template: Invalid value"}},
		{"endpointslice addressType",
			&discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4},
			&discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv6},
			[]string{"addressType: Invalid value"}},
		{"priorityclass value and policy",
			&schedulingv1.PriorityClass{Value: 10, PreemptionPolicy: new(corev1.PreemptLowerPriority)},
			&schedulingv1.PriorityClass{Value: 11, PreemptionPolicy: new(corev1.PreemptNever), Description: "d"},
			[]string{"value: Forbidden", "preemptionPolicy: Invalid value"}},
		{"rolebinding subjects change",
			&rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "a"}},
			&rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "a"},
				Subjects: []rbacv1.Subject{{Kind: "User", Name: "bob"}}}, nil},
		{"rolebinding roleRef",
			&rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "a"}},
			&rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "b"}},
			[]string{"roleRef: Invalid value"}},
		{"clusterrolebinding roleRef",
			&rbacv1.ClusterRoleBinding{RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "a"}},
			&rbacv1.ClusterRoleBinding{RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "a", APIGroup: "x"}},
			[]string{"roleRef: Invalid value"}},
		{"events.k8s.io series update",
			validEventV1(nil), validEventV1(func(e *eventsv1.Event) {
				e.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(appsNow)}
			}), nil},
		{"events.k8s.io note and bad series",
			validEventV1(nil), validEventV1(func(e *eventsv1.Event) {
				e.Note = "changed"
				e.Series = &eventsv1.EventSeries{Count: 1}
			}), []string{"series.count: Invalid value", "series.lastObservedTime: Required value",
				"message: Invalid value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := appsResource(t, tt.obj)
			if r.ValidateUpdate == nil {
				t.Fatalf("%s has no ValidateUpdate", r.Plural)
			}
			old, obj := appsDefaulted(t, tt.old), appsDefaulted(t, tt.obj)
			got := errorStrings(r.ValidateUpdate(obj, old))
			if diff := cmp.Diff(tt.want, got, cmpEmptyIsNil); diff != "" {
				t.Errorf("ValidateUpdate (-want +got):\n%s", diff)
			}
		})
	}
}
