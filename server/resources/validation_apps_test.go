package resources

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// appsDefaulted returns obj after its resource's defaulting, as the machinery validates it.
func appsDefaulted[T runtime.Object](t *testing.T, obj T) T {
	t.Helper()
	if r := appsResource(t, obj); r.Default != nil {
		r.Default(obj)
	}
	return obj
}

func validDeployment(mutate func(*appsv1.Deployment)) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: appsMeta("web"),
		Spec: appsv1.DeploymentSpec{Selector: appsSelector.DeepCopy(), Template: appsTemplate("")}}
	if mutate != nil {
		mutate(d)
	}
	return d
}

func validStatefulSet(mutate func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{ObjectMeta: appsMeta("db"),
		Spec: appsv1.StatefulSetSpec{Selector: appsSelector.DeepCopy(), Template: appsTemplate(""), ServiceName: "db"}}
	if mutate != nil {
		mutate(s)
	}
	return s
}

// validJob is a Job as the machinery validates it on create: uid assigned, selector generated.
func validJob(mutate func(*batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: appsMeta("pi"), Spec: batchv1.JobSpec{Template: appsTemplate(corev1.RestartPolicyNever)}}
	if mutate != nil {
		mutate(j)
	}
	return j
}

func validCronJob(mutate func(*batchv1.CronJob)) *batchv1.CronJob {
	cj := &batchv1.CronJob{ObjectMeta: appsMeta("nightly"), Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *",
		JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: appsTemplate(corev1.RestartPolicyOnFailure)}}}}
	if mutate != nil {
		mutate(cj)
	}
	return cj
}

func validEventV1(mutate func(*eventsv1.Event)) *eventsv1.Event {
	e := &eventsv1.Event{ObjectMeta: appsMeta("web.1"), EventTime: metav1.NewMicroTime(appsNow),
		ReportingController: "wheelhouse.dev/scheduler", ReportingInstance: "node-1", Action: "Binding",
		Reason: "Scheduled", Type: corev1.EventTypeNormal, Note: "assigned",
		Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"}}
	if mutate != nil {
		mutate(e)
	}
	return e
}

func TestAppsValidate(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { return new(intstr.FromString(s)) }
	num := func(i int32) *intstr.IntOrString { return new(intstr.FromInt32(i)) }
	tests := []struct {
		name string
		obj  runtime.Object
		want []string
	}{
		{"deployment ok", validDeployment(nil), nil},
		{"deployment without selector", validDeployment(func(d *appsv1.Deployment) { d.Spec.Selector = nil }),
			[]string{"spec.selector: Required value"}},
		{"deployment empty selector", validDeployment(func(d *appsv1.Deployment) { d.Spec.Selector = &metav1.LabelSelector{} }),
			[]string{"spec.selector: Invalid value"}},
		{"deployment selector not matching", validDeployment(func(d *appsv1.Deployment) { d.Spec.Template.Labels = map[string]string{"app": "db"} }),
			[]string{"spec.template.metadata.labels: Invalid value"}},
		{"deployment negative replicas", validDeployment(func(d *appsv1.Deployment) { d.Spec.Replicas = new(int32(-1)) }),
			[]string{"spec.replicas: Invalid value"}},
		{"deployment restartPolicy", validDeployment(func(d *appsv1.Deployment) { d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever }),
			[]string{"spec.template.spec.restartPolicy: Unsupported value"}},
		{"deployment surge and unavailable 0", validDeployment(func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: num(0), MaxUnavailable: pct("0%")}
		}), []string{"spec.strategy.rollingUpdate.maxUnavailable: Invalid value"}},
		{"deployment bad percentages", validDeployment(func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: pct("x%"), MaxUnavailable: pct("150%")}
		}), []string{"spec.strategy.rollingUpdate.maxUnavailable: Invalid value",
			"spec.strategy.rollingUpdate.maxSurge: Invalid value"}},
		{"deployment recreate with rollingUpdate", validDeployment(func(d *appsv1.Deployment) {
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{}}
		}), []string{"spec.strategy.rollingUpdate: Forbidden"}},
		{"deployment history and deadline", validDeployment(func(d *appsv1.Deployment) {
			d.Spec.RevisionHistoryLimit, d.Spec.MinReadySeconds, d.Spec.ProgressDeadlineSeconds = new(int32(-1)), 30, new(int32(30))
		}), []string{"spec.revisionHistoryLimit: Invalid value", "spec.progressDeadlineSeconds: Invalid value"}},

		{"replicaset ok", &appsv1.ReplicaSet{ObjectMeta: appsMeta("web-1"),
			Spec: appsv1.ReplicaSetSpec{Selector: appsSelector.DeepCopy(), Template: appsTemplate("")}}, nil},
		{"replicaset activeDeadlineSeconds", &appsv1.ReplicaSet{ObjectMeta: appsMeta("web-1"),
			Spec: appsv1.ReplicaSetSpec{Selector: appsSelector.DeepCopy(), Template: func() corev1.PodTemplateSpec {
				t := appsTemplate("")
				t.Spec.ActiveDeadlineSeconds = new(int64(5))
				return t
			}()}}, []string{"spec.template.spec.activeDeadlineSeconds: Forbidden"}},

		{"daemonset ok", &appsv1.DaemonSet{ObjectMeta: appsMeta("agent"),
			Spec: appsv1.DaemonSetSpec{Selector: appsSelector.DeepCopy(), Template: appsTemplate("")}}, nil},
		{"daemonset surge and unavailable", &appsv1.DaemonSet{ObjectMeta: appsMeta("agent"),
			Spec: appsv1.DaemonSetSpec{Selector: appsSelector.DeepCopy(), Template: appsTemplate(""),
				UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
					RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxSurge: num(1), MaxUnavailable: num(1)}}}},
			[]string{"spec.updateStrategy.rollingUpdate.maxSurge: Invalid value"}},
		{"daemonset both zero", &appsv1.DaemonSet{ObjectMeta: appsMeta("agent"),
			Spec: appsv1.DaemonSetSpec{Selector: appsSelector.DeepCopy(), Template: appsTemplate(""),
				UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
					RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxSurge: num(0), MaxUnavailable: pct("0%")}}}},
			[]string{"spec.updateStrategy.rollingUpdate.maxUnavailable: Required value"}},
		{"daemonset unknown strategy", &appsv1.DaemonSet{ObjectMeta: appsMeta("agent"),
			Spec: appsv1.DaemonSetSpec{Selector: appsSelector.DeepCopy(), Template: appsTemplate(""),
				UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: "Sometimes"}}},
			[]string{"spec.updateStrategy.type: Unsupported value"}},

		{"statefulset ok", validStatefulSet(nil), nil},
		{"statefulset bad fields", validStatefulSet(func(s *appsv1.StatefulSet) {
			s.Spec.PodManagementPolicy = "Random"
			s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: new(int32(-1)), MaxUnavailable: num(0)}}
			s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: "Keep", WhenScaled: appsv1.DeletePersistentVolumeClaimRetentionPolicyType}
			s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: -2}
			s.Spec.ServiceName = "DB"
			s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{}}
		}), []string{"spec.podManagementPolicy: Invalid value",
			"spec.updateStrategy.rollingUpdate.partition: Invalid value",
			"spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value",
			"spec.persistentVolumeClaimRetentionPolicy.whenDeleted: Unsupported value",
			"spec.ordinals.start: Invalid value", "spec.serviceName: Invalid value",
			"spec.volumeClaimTemplates[0].metadata.name: Required value"}},

		{"controllerrevision ok", &appsv1.ControllerRevision{ObjectMeta: appsMeta("web-1"), Revision: 1,
			Data: runtime.RawExtension{Raw: []byte(`{"spec":{}}`)}}, nil},
		{"controllerrevision without data", &appsv1.ControllerRevision{ObjectMeta: appsMeta("web-1"), Revision: -1},
			[]string{"data: Required value", "revision: Invalid value"}},

		{"job ok", validJob(nil), nil},
		{"job restartPolicy Always", validJob(func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = "" }),
			[]string{"spec.template.spec.restartPolicy: Unsupported value"}},
		{"job manual selector not matching", validJob(func(j *batchv1.Job) {
			j.Spec.ManualSelector = new(true)
			j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
		}), []string{"spec.template.metadata.labels: Invalid value"}},
		{"job manual selector missing", validJob(func(j *batchv1.Job) { j.Spec.ManualSelector = new(true) }),
			[]string{"spec.selector: Required value", "spec.template.metadata.labels: Invalid value"}},
		{"job indexed", validJob(func(j *batchv1.Job) {
			j.Name = strings.Repeat("a", 62)
			j.Spec.CompletionMode = new(batchv1.IndexedCompletion)
			j.Spec.Completions, j.Spec.Parallelism = new(int32(12)), new(int32(2))
			j.Spec.BackoffLimitPerIndex, j.Spec.MaxFailedIndexes = new(int32(1)), new(int32(13))
		}), []string{"spec.maxFailedIndexes: Invalid value", "metadata.name: Invalid value"}},
		{"job per-index limit needs Indexed", validJob(func(j *batchv1.Job) { j.Spec.BackoffLimitPerIndex = new(int32(1)) }),
			[]string{"spec.backoffLimitPerIndex: Forbidden"}},
		{"job pod failure policy", validJob(func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
					ContainerName: new("nope"), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{0, 3, 2, 2}}},
				{Action: "Explode"},
			}}
		}), []string{"spec.podFailurePolicy.rules[0].onExitCodes.containerName: Invalid value",
			"spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value",
			"spec.podFailurePolicy.rules[0].onExitCodes.values[3]: Duplicate value",
			"spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value",
			"spec.podFailurePolicy.rules[1].action: Unsupported value",
			"spec.podFailurePolicy.rules[1]: Invalid value"}},
		{"job success policy", validJob(func(j *batchv1.Job) {
			j.Spec.CompletionMode = new(batchv1.IndexedCompletion)
			j.Spec.Completions = new(int32(5))
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{
				{SucceededIndexes: new("0,2-3"), SucceededCount: new(int32(3))},
				{SucceededIndexes: new("0,2-3"), SucceededCount: new(int32(4))},
				{SucceededIndexes: new("3,1")}, {}, {SucceededCount: new(int32(6))}}}
		}), []string{"spec.successPolicy.rules[1].succeededCount: Invalid value",
			"spec.successPolicy.rules[2].succeededIndexes: Invalid value",
			"spec.successPolicy.rules[3]: Required value",
			"spec.successPolicy.rules[4].succeededCount: Invalid value"}},

		{"cronjob ok", validCronJob(nil), nil},
		{"cronjob ok with zone and descriptor", validCronJob(func(cj *batchv1.CronJob) {
			cj.Spec.Schedule, cj.Spec.TimeZone = "@hourly", new("Europe/Paris")
		}), nil},
		{"cronjob bad", validCronJob(func(cj *batchv1.CronJob) {
			cj.Name = strings.Repeat("c", 53)
			cj.Spec.Schedule = "61 * * * *"
			cj.Spec.TimeZone = new("Mars/Olympus")
			cj.Spec.ConcurrencyPolicy = "Sometimes"
			cj.Spec.JobTemplate.Spec.Selector = appsSelector.DeepCopy()
			cj.Spec.SuccessfulJobsHistoryLimit = new(int32(-1))
		}), []string{"metadata.name: Invalid value", "spec.schedule: Invalid value", "spec.timeZone: Invalid value",
			"spec.concurrencyPolicy: Unsupported value", "spec.jobTemplate.spec.selector: Invalid value",
			"spec.successfulJobsHistoryLimit: Invalid value"}},
		{"cronjob TZ in schedule", validCronJob(func(cj *batchv1.CronJob) { cj.Spec.Schedule = "TZ=UTC 0 * * * *" }),
			[]string{"spec.schedule: Invalid value"}},
		{"cronjob local zone", validCronJob(func(cj *batchv1.CronJob) { cj.Spec.TimeZone = new("Local") }),
			[]string{"spec.timeZone: Invalid value"}},

		{"lease ok", &coordinationv1.Lease{ObjectMeta: appsMeta("node-1"), Spec: coordinationv1.LeaseSpec{
			HolderIdentity: new("node-1"), LeaseDurationSeconds: new(int32(40))}}, nil},
		{"lease bad", &coordinationv1.Lease{ObjectMeta: appsMeta("node-1"), Spec: coordinationv1.LeaseSpec{
			LeaseDurationSeconds: new(int32(0)), LeaseTransitions: new(int32(-1)), PreferredHolder: new("b"),
			Strategy: new(coordinationv1.CoordinatedLeaseStrategy(""))}},
			[]string{"spec.leaseDurationSeconds: Invalid value", "spec.leaseTransitions: Invalid value",
				"spec.strategy: Unsupported value", "spec.preferredHolder: Forbidden"}},

		{"endpointslice ok", &discoveryv1.EndpointSlice{ObjectMeta: appsMeta("web-abc"),
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.4"}, NodeName: new("node-1")}},
			Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: new(int32(80))}}}, nil},
		{"endpointslice bad", &discoveryv1.EndpointSlice{ObjectMeta: appsMeta("web-abc"), AddressType: "IPv5"}, []string{"addressType: Unsupported value"}},
		{"endpointslice addresses", &discoveryv1.EndpointSlice{ObjectMeta: appsMeta("web-abc"),
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{}, {Addresses: []string{"fd00::1", "127.0.0.1", "nope"},
				Hostname: new("Web")}},
			Ports: []discoveryv1.EndpointPort{{Name: new("http"), Protocol: new(corev1.Protocol("ICMP"))},
				{Name: new("http")}}},
			[]string{"endpoints[0].addresses: Required value", "endpoints[1].addresses[0]: Invalid value",
				"endpoints[1].addresses[1]: Invalid value", "endpoints[1].addresses[2]: Invalid value",
				"endpoints[1].hostname: Invalid value", "ports[0].protocol: Unsupported value",
				"ports[1].name: Duplicate value"}},
		{"endpointslice fqdn", &discoveryv1.EndpointSlice{ObjectMeta: appsMeta("web-abc"),
			AddressType: discoveryv1.AddressTypeFQDN,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"db.example.com", "db"}}}},
			[]string{"endpoints[0].addresses[1]: Invalid value"}},

		{"events.k8s.io ok", validEventV1(nil), nil},
		{"events.k8s.io missing fields", &eventsv1.Event{ObjectMeta: appsMeta("web.2"),
			DeprecatedCount: 3, DeprecatedSource: corev1.EventSource{Component: "kubelet"},
			Series: &eventsv1.EventSeries{Count: 1}},
			[]string{"series.count: Invalid value", "series.lastObservedTime: Required value",
				"eventTime: Required value", "type: Invalid value", "count: Invalid value", "source: Invalid value"}},
		{"events.k8s.io reporter", validEventV1(func(e *eventsv1.Event) {
			e.ReportingController, e.ReportingInstance, e.Action, e.Reason = "", "", strings.Repeat("a", 129), ""
			e.Regarding.Namespace = "other"
		}), []string{"reportingController: Required value", "reportingInstance: Required value",
			"action: Invalid value", "reason: Required value"}},

		{"priorityclass ok", &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1e9}, nil},
		{"priorityclass system ok", SystemPriorityClasses()[0], nil},
		{"priorityclass too high", &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1e9 + 1},
			[]string{"value: Forbidden"}},
		{"priorityclass reserved name", &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-mine"}},
			[]string{"metadata.name: Forbidden"}},
		{"priorityclass system value", &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-node-critical"},
			Value: 5, PreemptionPolicy: new(corev1.PreemptionPolicy("Sometimes"))},
			[]string{"metadata.name: Forbidden", "preemptionPolicy: Unsupported value"}},

		{"pdb ok", &policyv1.PodDisruptionBudget{ObjectMeta: appsMeta("web"), Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: pct("50%"), Selector: appsSelector.DeepCopy()}}, nil},
		{"pdb both", &policyv1.PodDisruptionBudget{ObjectMeta: appsMeta("web"), Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: num(-1), MaxUnavailable: pct("101%"),
			UnhealthyPodEvictionPolicy: new(policyv1.UnhealthyPodEvictionPolicyType("Never"))}},
			[]string{"spec: Invalid value", "spec.minAvailable: Invalid value", "spec.maxUnavailable: Invalid value",
				"spec.unhealthyPodEvictionPolicy: Unsupported value"}},

		{"role ok", &rbacv1.Role{ObjectMeta: appsMeta("reader"), Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}, nil},
		{"role bad rules", &rbacv1.Role{ObjectMeta: appsMeta("reader"), Rules: []rbacv1.PolicyRule{
			{}, {Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}, Resources: []string{"pods"}}}},
			[]string{"rules[0].verbs: Required value", "rules[0].apiGroups: Required value",
				"rules[0].resources: Required value", "rules[1].nonResourceURLs: Invalid value",
				"rules[1].nonResourceURLs: Invalid value"}},
		{"clusterrole non-resource ok", &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "health"},
			Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}}}, nil},
		{"clusterrole empty aggregation", &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "agg"},
			AggregationRule: &rbacv1.AggregationRule{}},
			[]string{"aggregationRule.clusterRoleSelectors: Required value"}},
		{"rolebinding ok", &rbacv1.RoleBinding{ObjectMeta: appsMeta("read"),
			RoleRef:  rbacv1.RoleRef{Kind: "Role", Name: "reader"},
			Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice"}, {Kind: "ServiceAccount", Name: "ci"}}}, nil},
		{"rolebinding bad subjects", &rbacv1.RoleBinding{ObjectMeta: appsMeta("read"),
			RoleRef:  rbacv1.RoleRef{APIGroup: "example.com", Kind: "Policy"},
			Subjects: []rbacv1.Subject{{Kind: "Robot", Name: "r2"}, {Kind: "ServiceAccount", APIGroup: "x"}}},
			[]string{"roleRef.apiGroup: Unsupported value", "roleRef.kind: Unsupported value", "roleRef.name: Required value",
				"subjects[0].kind: Unsupported value", "subjects[1].name: Required value",
				"subjects[1].apiGroup: Unsupported value"}},
		{"clusterrolebinding binds cluster roles only", &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"},
			RoleRef:  rbacv1.RoleRef{Kind: "Role", Name: "reader"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "ci"}}},
			[]string{"roleRef.kind: Unsupported value", "subjects[0].namespace: Required value"}},

		{"hpa ok", &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: appsMeta("web"),
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 4,
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", Name: "web", APIVersion: "apps/v1"}}}, nil},
		{"hpa bad", &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: appsMeta("web"),
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: new(int32(3)), MaxReplicas: 2,
				Metrics: []autoscalingv2.MetricSpec{
					{Type: autoscalingv2.PodsMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{}},
					{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
						Name: corev1.ResourceMemory, Target: autoscalingv2.MetricTarget{
							Type: autoscalingv2.AverageValueMetricType, AverageValue: new(resource.MustParse("-1"))}}},
				},
				Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{
					Policies: []autoscalingv2.HPAScalingPolicy{{Type: "Nodes", PeriodSeconds: 1801}}}}}},
			[]string{"spec.maxReplicas: Invalid value", "spec.scaleTargetRef.kind: Required value",
				"spec.scaleTargetRef.name: Required value", "spec.metrics[0].pods: Required value",
				"spec.metrics[0].resource: Forbidden", "spec.metrics[1].resource.target.averageValue: Invalid value",
				"spec.behavior.scaleUp.policies[0].type: Unsupported value",
				"spec.behavior.scaleUp.policies[0].value: Invalid value",
				"spec.behavior.scaleUp.policies[0].periodSeconds: Invalid value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := appsResource(t, tt.obj)
			obj := appsDefaulted(t, tt.obj)
			if job, ok := obj.(*batchv1.Job); ok {
				jobSelectorFor(job)
			}
			got := errorStrings(r.Validate(obj))
			if diff := cmp.Diff(tt.want, got, cmpEmptyIsNil); diff != "" {
				t.Errorf("Validate (-want +got):\n%s\nerrors: %v", diff, r.Validate(obj))
			}
		})
	}
}

// cmpEmptyIsNil lets an expected nil list match an empty one.
var cmpEmptyIsNil = cmp.FilterValues(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 },
	cmp.Comparer(func(a, b []string) bool { return true }))
