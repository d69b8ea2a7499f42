package resources

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// appsResource returns the registered resource of obj's kind in the default registry.
func appsResource(t *testing.T, obj runtime.Object) *Resource {
	t.Helper()
	gvks, _, err := Scheme.ObjectKinds(obj)
	if err != nil {
		t.Fatalf("ObjectKinds(%T): %v", obj, err)
	}
	for _, r := range Default().All() {
		if slices.Contains(gvks, r.GVK) {
			return r
		}
	}
	t.Fatalf("no resource registered for %v", gvks)
	return nil
}

// errorStrings renders errors as "path: type" for exact comparison.
func errorStrings(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Type.String())
	}
	return out
}

// appsTemplate is a minimal valid pod template labelled app=web.
func appsTemplate(restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{RestartPolicy: restart,
			Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
	}
}

// defaultedTemplate is t after the pod template defaults every workload applies.
func defaultedTemplate(t corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	defaultPodTemplateSpec(&t)
	return t
}

// appsNow is the tests' fixed clock.
var appsNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

var appsSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}

func appsMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "default", UID: "8f1c6e4e-uid"}
}

func TestAppsDefaults(t *testing.T) {
	pct25, one, zero := intstr.FromString("25%"), intstr.FromInt32(1), intstr.FromInt32(0)
	tests := []struct {
		name      string
		obj, want runtime.Object
	}{
		{"deployment",
			&appsv1.Deployment{ObjectMeta: appsMeta("web"), Spec: appsv1.DeploymentSpec{Selector: appsSelector,
				Template: appsTemplate("")}},
			&appsv1.Deployment{ObjectMeta: appsMeta("web"), Spec: appsv1.DeploymentSpec{
				Replicas: new(int32(1)), Selector: appsSelector, Template: defaultedTemplate(appsTemplate("")),
				Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
					RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &pct25, MaxSurge: &pct25}},
				RevisionHistoryLimit: new(int32(10)), ProgressDeadlineSeconds: new(int32(600))}}},
		{"deployment recreate keeps no rolling update",
			&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: new(int32(3)),
				Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}}},
			&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: new(int32(3)),
				Strategy:             appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
				RevisionHistoryLimit: new(int32(10)), ProgressDeadlineSeconds: new(int32(600)),
				Template: defaultedTemplate(corev1.PodTemplateSpec{})}}},
		{"replicaset",
			&appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Template: appsTemplate("")}},
			&appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: new(int32(1)),
				Template: defaultedTemplate(appsTemplate(""))}}},
		{"daemonset",
			&appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: appsTemplate("")}},
			&appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: defaultedTemplate(appsTemplate("")),
				UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
					RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &one, MaxSurge: &zero}},
				RevisionHistoryLimit: new(int32(10))}}},
		{"statefulset",
			&appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Template: appsTemplate("")}},
			&appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: new(int32(1)),
				Template:            defaultedTemplate(appsTemplate("")),
				PodManagementPolicy: appsv1.OrderedReadyPodManagement,
				UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
					RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: new(int32(0))}},
				RevisionHistoryLimit: new(int32(10)),
				PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
					WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
					WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType}}}},
		{"job before uid",
			&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "pi"},
				Spec: batchv1.JobSpec{Template: appsTemplate(corev1.RestartPolicyNever)}},
			&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "pi", Labels: map[string]string{"app": "web"}},
				Spec: batchv1.JobSpec{Parallelism: new(int32(1)), Completions: new(int32(1)),
					BackoffLimit: new(int32(6)), CompletionMode: new(batchv1.NonIndexedCompletion),
					Suspend: new(false), PodReplacementPolicy: new(batchv1.TerminatingOrFailed),
					Template: defaultedTemplate(appsTemplate(corev1.RestartPolicyNever))}}},
		{"job with uid gets its generated selector",
			&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "pi", UID: "u-1"},
				Spec: batchv1.JobSpec{Template: appsTemplate(corev1.RestartPolicyNever)}},
			&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "pi", UID: "u-1", Labels: generatedJobLabels},
				Spec: batchv1.JobSpec{Parallelism: new(int32(1)), Completions: new(int32(1)),
					BackoffLimit: new(int32(6)), CompletionMode: new(batchv1.NonIndexedCompletion),
					Suspend: new(false), PodReplacementPolicy: new(batchv1.TerminatingOrFailed),
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{
						"batch.kubernetes.io/controller-uid": "u-1"}},
					Template: func() corev1.PodTemplateSpec {
						t := defaultedTemplate(appsTemplate(corev1.RestartPolicyNever))
						t.Labels = generatedJobLabels
						return t
					}()}}},
		{"job with parallelism and backoffLimitPerIndex",
			&batchv1.Job{Spec: batchv1.JobSpec{Parallelism: new(int32(4)), BackoffLimitPerIndex: new(int32(1)),
				PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
					Action:          batchv1.PodFailurePolicyActionIgnore,
					OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget}}}}}}},
			&batchv1.Job{Spec: batchv1.JobSpec{Parallelism: new(int32(4)), BackoffLimitPerIndex: new(int32(1)),
				BackoffLimit: new(int32(2147483647)), CompletionMode: new(batchv1.NonIndexedCompletion),
				Suspend: new(false), PodReplacementPolicy: new(batchv1.Failed),
				PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
					Action: batchv1.PodFailurePolicyActionIgnore,
					OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{
						Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}}}},
				Template: defaultedTemplate(corev1.PodTemplateSpec{})}}},
		{"cronjob",
			&batchv1.CronJob{Spec: batchv1.CronJobSpec{Schedule: "*/5 * * * *",
				JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: appsTemplate(corev1.RestartPolicyOnFailure)}}}},
			&batchv1.CronJob{Spec: batchv1.CronJobSpec{Schedule: "*/5 * * * *",
				ConcurrencyPolicy: batchv1.AllowConcurrent, Suspend: new(false),
				SuccessfulJobsHistoryLimit: new(int32(3)), FailedJobsHistoryLimit: new(int32(1)),
				JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
					Template: defaultedTemplate(appsTemplate(corev1.RestartPolicyOnFailure))}}}}},
		{"endpointslice ports",
			&discoveryv1.EndpointSlice{Ports: []discoveryv1.EndpointPort{{Port: new(int32(80))}}},
			&discoveryv1.EndpointSlice{Ports: []discoveryv1.EndpointPort{{Port: new(int32(80)), Name: new(""),
				Protocol: new(corev1.ProtocolTCP)}}}},
		{"priorityclass",
			&schedulingv1.PriorityClass{Value: 1000},
			&schedulingv1.PriorityClass{Value: 1000, PreemptionPolicy: new(corev1.PreemptLowerPriority)}},
		{"rolebinding",
			&rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "r"},
				Subjects: []rbacv1.Subject{{Kind: "User", Name: "u"}, {Kind: "ServiceAccount", Name: "sa"}}},
			&rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "r"},
				Subjects: []rbacv1.Subject{{Kind: "User", Name: "u", APIGroup: rbacv1.GroupName},
					{Kind: "ServiceAccount", Name: "sa"}}}},
		{"hpa",
			&autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 5}},
			&autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				MaxReplicas: 5, MinReplicas: new(int32(1)),
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType,
					Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
						Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType,
							AverageUtilization: new(int32(80))}}}}}}},
		{"hpa behavior keeps what is set",
			&autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				MinReplicas: new(int32(2)), MaxReplicas: 5,
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType}},
				Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
					ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: new(int32(60))}}}},
			&autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				MinReplicas: new(int32(2)), MaxReplicas: 5,
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType}},
				Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
					ScaleUp: defaultHPAScaleUp(),
					ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: new(int32(60)),
						SelectPolicy: new(autoscalingv2.MaxChangePolicySelect),
						Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy,
							Value: 100, PeriodSeconds: 15}}}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			appsResource(t, tt.obj).Default(tt.obj)
			if diff := cmp.Diff(tt.want, tt.obj); diff != "" {
				t.Errorf("Default (-want +got):\n%s", diff)
			}
		})
	}
}

// generatedJobLabels are the labels of the pods of Job "pi" with uid "u-1" whose template has app=web.
var generatedJobLabels = map[string]string{"app": "web", "job-name": "pi", "batch.kubernetes.io/job-name": "pi",
	"controller-uid": "u-1", "batch.kubernetes.io/controller-uid": "u-1"}

func TestJobSelectorFor(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "pi", UID: "u-1"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{
			Labels: map[string]string{"app": "pi", "job-name": "mine"}}}}}
	jobSelectorFor(job)
	jobSelectorFor(job) // idempotent
	wantLabels := map[string]string{"app": "pi", "job-name": "mine", "batch.kubernetes.io/job-name": "pi",
		"controller-uid": "u-1", "batch.kubernetes.io/controller-uid": "u-1"}
	if diff := cmp.Diff(wantLabels, job.Spec.Template.Labels); diff != "" {
		t.Errorf("template labels (-want +got):\n%s", diff)
	}
	wantSel := &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": "u-1"}}
	if diff := cmp.Diff(wantSel, job.Spec.Selector); diff != "" {
		t.Errorf("selector (-want +got):\n%s", diff)
	}
	// The user's conflicting job-name label is kept for validation to reject.
	errs := errorStrings(validateGeneratedJobSelector(job))
	if diff := cmp.Diff([]string{"spec.template.metadata.labels[job-name]: Invalid value"}, errs); diff != "" {
		t.Errorf("validateGeneratedJobSelector (-want +got):\n%s", diff)
	}

	// The Job's labels copy the template's: labelling the Job later leaves its pods' labels alone.
	copied := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "pi", UID: "u-1"},
		Spec: batchv1.JobSpec{Template: appsTemplate(corev1.RestartPolicyNever)}}
	defaultJob(copied)
	copied.Labels["extra"] = "x"
	if _, shared := copied.Spec.Template.Labels["extra"]; shared {
		t.Errorf("Job labels share the template's map")
	}

	manual := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{UID: "u-2"}, Spec: batchv1.JobSpec{ManualSelector: new(true)}}
	jobSelectorFor(manual)
	if manual.Spec.Selector != nil || manual.Spec.Template.Labels != nil {
		t.Errorf("manual selector job changed: %+v", manual.Spec)
	}
}
