package resources

import (
	"fmt"
	"maps"
	"math"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The pre-1.27 labels the server still puts on a Job's pod template beside batchv1.ControllerUidLabel and
// batchv1.JobNameLabel.
const (
	legacyJobControllerUIDLabel = "controller-uid"
	legacyJobNameLabel          = "job-name"
)

// maxIndexedJobParallelism bounds the parallelism of an Indexed Job.
const maxIndexedJobParallelism = 100000

func init() {
	register(&Resource{
		GVK:        batchv1.SchemeGroupVersion.WithKind("Job"),
		Plural:     "jobs",
		Categories: []string{"all"},
		Namespaced: true,
		New:        func() runtime.Object { return &batchv1.Job{} },
		NewList:    func() runtime.Object { return &batchv1.JobList{} },
		Status:     true,
		Generation: true,
		Default:    func(obj runtime.Object) { defaultJob(obj.(*batchv1.Job)) },
		Validate:   func(obj runtime.Object) field.ErrorList { return validateJob(obj.(*batchv1.Job)) },
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return validateJobUpdate(obj.(*batchv1.Job), old.(*batchv1.Job))
		},
		Table: &Table{Columns: jobColumns, Cells: jobCells},
		Fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"status.successful": strconv.Itoa(int(obj.(*batchv1.Job).Status.Succeeded))}
		},
	})
}

// defaultJob applies batch/v1 defaults: parallelism and completions 1 when both are unset, backoffLimit 6
// (unlimited with backoffLimitPerIndex), NonIndexed completion, not suspended, pod replacement once pods are
// TerminatingOrFailed (Failed with a podFailurePolicy) and the pod template's defaults. Once the Job has a uid it
// also gets its generated selector and labels (see jobSelectorFor). A Job without labels then takes a copy of its
// template's, generated ones included, as Kubernetes shows them.
func defaultJob(job *batchv1.Job) {
	s := &job.Spec
	if s.Completions == nil && s.Parallelism == nil {
		s.Completions = new(int32(1))
	}
	if s.Parallelism == nil {
		s.Parallelism = new(int32(1))
	}
	if s.BackoffLimit == nil {
		s.BackoffLimit = new(int32(6))
		if s.BackoffLimitPerIndex != nil {
			s.BackoffLimit = new(int32(math.MaxInt32))
		}
	}
	if s.CompletionMode == nil {
		s.CompletionMode = new(batchv1.NonIndexedCompletion)
	}
	if s.Suspend == nil {
		s.Suspend = new(false)
	}
	if s.PodReplacementPolicy == nil {
		s.PodReplacementPolicy = new(batchv1.TerminatingOrFailed)
		if s.PodFailurePolicy != nil {
			s.PodReplacementPolicy = new(batchv1.Failed)
		}
	}
	defaultPodFailurePolicy(s)
	defaultPodTemplateSpec(&s.Template)
	if job.UID != "" {
		jobSelectorFor(job)
	}
	if len(job.Labels) == 0 && s.Template.Labels != nil {
		job.Labels = maps.Clone(s.Template.Labels)
	}
}

// defaultPodFailurePolicy defaults the status of each onPodConditions pattern to True. Jobs and CronJob job
// templates alike get it.
func defaultPodFailurePolicy(s *batchv1.JobSpec) {
	if s.PodFailurePolicy == nil {
		return
	}
	for i := range s.PodFailurePolicy.Rules {
		for j := range s.PodFailurePolicy.Rules[i].OnPodConditions {
			if c := &s.PodFailurePolicy.Rules[i].OnPodConditions[j]; c.Status == "" {
				c.Status = corev1.ConditionTrue
			}
		}
	}
}

// jobSelectorFor gives a Job whose selector is generated (spec.manualSelector unset or false) the labels and
// selector Kubernetes generates from its uid: the pod template gets batch.kubernetes.io/controller-uid,
// batch.kubernetes.io/job-name and their legacy forms controller-uid and job-name (labels already there are kept,
// and validation then rejects a mismatch), and spec.selector gets matchLabels
// batch.kubernetes.io/controller-uid=<uid>. It is a no-op for a manual selector.
//
// The API machinery calls it on create, after assigning metadata.uid and before Validate; defaultJob calls it too
// whenever the Job already has a uid. It is idempotent.
func jobSelectorFor(job *batchv1.Job) {
	if job.Spec.ManualSelector != nil && *job.Spec.ManualSelector {
		return
	}
	t := &job.Spec.Template
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	for k, v := range map[string]string{
		legacyJobNameLabel: job.Name, batchv1.JobNameLabel: job.Name,
		legacyJobControllerUIDLabel: string(job.UID), batchv1.ControllerUidLabel: string(job.UID),
	} {
		if _, found := t.Labels[k]; !found {
			t.Labels[k] = v
		}
	}
	if job.Spec.Selector == nil {
		job.Spec.Selector = &metav1.LabelSelector{}
	}
	if job.Spec.Selector.MatchLabels == nil {
		job.Spec.Selector.MatchLabels = map[string]string{}
	}
	if _, found := job.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel]; !found {
		job.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel] = string(job.UID)
	}
}

// validateJob checks a Job: its generated selector and labels (unless manualSelector), its spec, and that an
// Indexed Job's name leaves room for the pods' "-<index>" host names.
func validateJob(job *batchv1.Job) field.ErrorList {
	var errs field.ErrorList
	if job.Spec.ManualSelector == nil || !*job.Spec.ManualSelector {
		errs = append(errs, validateGeneratedJobSelector(job)...)
	}
	errs = append(errs, validateJobSpecWithSelector(&job.Spec, field.NewPath("spec"))...)
	s := job.Spec
	if s.CompletionMode != nil && *s.CompletionMode == batchv1.IndexedCompletion && s.Completions != nil &&
		*s.Completions > 0 {
		host := fmt.Sprintf("%s-%d", job.Name, *s.Completions-1)
		if len(validation.IsDNS1123Label(host)) > 0 {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), job.Name,
				"will not able to create pod with invalid DNS label: "+host))
		}
	}
	return errs
}

// validateGeneratedJobSelector checks what jobSelectorFor put in place: a uid, the four labels with the Job's
// uid and name, and a selector that selects them.
func validateGeneratedJobSelector(job *batchv1.Job) field.ErrorList {
	var errs field.ErrorList
	if job.UID == "" {
		errs = append(errs, field.Required(field.NewPath("metadata", "uid"), ""))
	}
	mp := field.NewPath("spec", "template", "metadata")
	expected := map[string]string{
		batchv1.ControllerUidLabel: string(job.UID), batchv1.JobNameLabel: job.Name,
		legacyJobControllerUIDLabel: string(job.UID), legacyJobNameLabel: job.Name,
	}
	for _, k := range []string{legacyJobControllerUIDLabel, legacyJobNameLabel, batchv1.ControllerUidLabel,
		batchv1.JobNameLabel} {
		errs = append(errs, validateHasLabel(job.Spec.Template.Labels, mp, k, expected[k])...)
	}
	if s, err := metav1.LabelSelectorAsSelector(job.Spec.Selector); err == nil && !s.Matches(labels.Set(expected)) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "selector"), job.Spec.Selector,
			"`selector` not auto-generated"))
	}
	return errs
}

// validateHasLabel requires labels[key] == value, reporting at p ("spec.template.metadata").
func validateHasLabel(l map[string]string, p *field.Path, key, value string) field.ErrorList {
	actual, found := l[key]
	if !found {
		return field.ErrorList{field.Required(p.Child("labels").Key(key), value)}
	}
	if actual != value {
		return field.ErrorList{field.Invalid(p.Child("labels").Key(key), l, "must be '"+value+"'")}
	}
	return nil
}

// validateJobSpecWithSelector checks a Job's spec at p, including its required selector and that it selects
// the template's labels.
func validateJobSpecWithSelector(s *batchv1.JobSpec, p *field.Path) field.ErrorList {
	errs := validateJobSpec(s, p)
	if s.Selector == nil {
		errs = append(errs, field.Required(p.Child("selector"), ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.Selector,
			metav1validation.LabelSelectorValidationOptions{}, p.Child("selector"))...)
	}
	if sel, err := metav1.LabelSelectorAsSelector(s.Selector); err == nil && !sel.Matches(labels.Set(s.Template.Labels)) {
		errs = append(errs, field.Invalid(p.Child("template", "metadata", "labels"), s.Template.Labels,
			"`selector` does not match template `labels`"))
	}
	return errs
}

// validateJobSpec checks the parts of a Job spec shared with a CronJob's jobTemplate (everything but the
// selector) at p.
func validateJobSpec(s *batchv1.JobSpec, p *field.Path) field.ErrorList {
	errs := validateOptionalNonnegative(s.Parallelism, p.Child("parallelism"))
	errs = append(errs, validateOptionalNonnegative(s.Completions, p.Child("completions"))...)
	if s.ActiveDeadlineSeconds != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(*s.ActiveDeadlineSeconds,
			p.Child("activeDeadlineSeconds"))...)
	}
	errs = append(errs, validateOptionalNonnegative(s.BackoffLimit, p.Child("backoffLimit"))...)
	errs = append(errs, validateOptionalNonnegative(s.TTLSecondsAfterFinished, p.Child("ttlSecondsAfterFinished"))...)
	errs = append(errs, validateJobIndexing(s, p)...)
	if s.PodFailurePolicy != nil {
		errs = append(errs, validatePodFailurePolicy(s, p.Child("podFailurePolicy"))...)
	}
	if s.SuccessPolicy != nil {
		errs = append(errs, validateSuccessPolicy(s, p.Child("successPolicy"))...)
	}
	errs = append(errs, validatePodReplacementPolicy(s, p.Child("podReplacementPolicy"))...)
	errs = append(errs, validatePodTemplateSpec(&s.Template, p.Child("template"))...)
	return append(errs, validateJobRestartPolicy(s, p.Child("template", "spec", "restartPolicy"))...)
}

// validateJobIndexing checks completionMode and the per-index fields that need Indexed completion.
func validateJobIndexing(s *batchv1.JobSpec, p *field.Path) field.ErrorList {
	indexed := s.CompletionMode != nil && *s.CompletionMode == batchv1.IndexedCompletion
	var errs field.ErrorList
	if s.CompletionMode != nil && !indexed && *s.CompletionMode != batchv1.NonIndexedCompletion {
		errs = append(errs, field.NotSupported(p.Child("completionMode"), *s.CompletionMode,
			[]batchv1.CompletionMode{batchv1.NonIndexedCompletion, batchv1.IndexedCompletion}))
	}
	if indexed && s.Completions == nil {
		errs = append(errs, field.Required(p.Child("completions"), "when completion mode is Indexed"))
	}
	if indexed && s.Parallelism != nil && *s.Parallelism > maxIndexedJobParallelism {
		errs = append(errs, field.Invalid(p.Child("parallelism"), *s.Parallelism,
			fmt.Sprintf("must be less than or equal to %d when completion mode is Indexed", maxIndexedJobParallelism)))
	}
	if s.BackoffLimitPerIndex != nil {
		errs = append(errs, validateOptionalNonnegative(s.BackoffLimitPerIndex, p.Child("backoffLimitPerIndex"))...)
		if !indexed {
			errs = append(errs, field.Forbidden(p.Child("backoffLimitPerIndex"), "requires indexed completion mode"))
		}
	}
	if m := s.MaxFailedIndexes; m != nil {
		errs = append(errs, validateOptionalNonnegative(m, p.Child("maxFailedIndexes"))...)
		if s.BackoffLimitPerIndex == nil {
			errs = append(errs, field.Required(p.Child("backoffLimitPerIndex"), "when maxFailedIndexes is specified"))
		}
		if s.Completions != nil && *m > *s.Completions {
			errs = append(errs, field.Invalid(p.Child("maxFailedIndexes"), *m,
				"must be less than or equal to completions"))
		}
	}
	return errs
}

// validatePodReplacementPolicy allows TerminatingOrFailed or Failed, only Failed with a podFailurePolicy.
func validatePodReplacementPolicy(s *batchv1.JobSpec, p *field.Path) field.ErrorList {
	if s.PodReplacementPolicy == nil {
		return nil
	}
	switch v := *s.PodReplacementPolicy; {
	case s.PodFailurePolicy != nil && v != batchv1.Failed:
		return field.ErrorList{field.NotSupported(p, v, []batchv1.PodReplacementPolicy{batchv1.Failed})}
	case v != batchv1.TerminatingOrFailed && v != batchv1.Failed:
		return field.ErrorList{field.NotSupported(p, v,
			[]batchv1.PodReplacementPolicy{batchv1.TerminatingOrFailed, batchv1.Failed})}
	}
	return nil
}

// validateJobRestartPolicy requires a template restart policy of OnFailure or Never (Never with a
// podFailurePolicy).
func validateJobRestartPolicy(s *batchv1.JobSpec, p *field.Path) field.ErrorList {
	rp := s.Template.Spec.RestartPolicy
	switch {
	case rp != corev1.RestartPolicyOnFailure && rp != corev1.RestartPolicyNever:
		return field.ErrorList{field.NotSupported(p, rp,
			[]corev1.RestartPolicy{corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever})}
	case s.PodFailurePolicy != nil && rp != corev1.RestartPolicyNever:
		return field.ErrorList{field.Invalid(p, rp, `only "Never" is supported when podFailurePolicy is specified`)}
	}
	return nil
}

// validateJobUpdate enforces the immutable parts of a Job spec. The pod template is immutable except, while the
// Job is suspended and has never started, its scheduling directives, labels and annotations. completions may
// change only for an Indexed Job and only in step with parallelism.
func validateJobUpdate(job, old *batchv1.Job) field.ErrorList {
	s, o, p := job.Spec, old.Spec, field.NewPath("spec")
	errs := validateJobCompletionsUpdate(s, o, p.Child("completions"))
	for _, f := range []struct {
		name     string
		new, old any
	}{
		{"selector", s.Selector, o.Selector},
		{"completionMode", s.CompletionMode, o.CompletionMode},
		{"podFailurePolicy", s.PodFailurePolicy, o.PodFailurePolicy},
		{"backoffLimitPerIndex", s.BackoffLimitPerIndex, o.BackoffLimitPerIndex},
		{"managedBy", s.ManagedBy, o.ManagedBy},
		{"successPolicy", s.SuccessPolicy, o.SuccessPolicy},
		{"podReplacementPolicy", s.PodReplacementPolicy, o.PodReplacementPolicy},
	} {
		errs = append(errs, apivalidation.ValidateImmutableField(f.new, f.old, p.Child(f.name))...)
	}
	oldTemplate := &o.Template
	if o.Suspend != nil && *o.Suspend && old.Status.StartTime == nil {
		oldTemplate = withMutableSchedulingDirectives(&o.Template, &s.Template)
	}
	return append(errs, apivalidation.ValidateImmutableField(&s.Template, oldTemplate, p.Child("template"))...)
}

// withMutableSchedulingDirectives returns a copy of old carrying t's labels, annotations, node selector,
// tolerations, node affinity and scheduling gates: the fields a suspended Job's template may change.
func withMutableSchedulingDirectives(old, t *corev1.PodTemplateSpec) *corev1.PodTemplateSpec {
	c := old.DeepCopy()
	c.Labels, c.Annotations = t.Labels, t.Annotations
	c.Spec.NodeSelector, c.Spec.Tolerations, c.Spec.SchedulingGates =
		t.Spec.NodeSelector, t.Spec.Tolerations, t.Spec.SchedulingGates
	var nodeAffinity *corev1.NodeAffinity
	if t.Spec.Affinity != nil {
		nodeAffinity = t.Spec.Affinity.NodeAffinity
	}
	switch {
	case c.Spec.Affinity != nil:
		c.Spec.Affinity.NodeAffinity = nodeAffinity
	case nodeAffinity != nil:
		c.Spec.Affinity = &corev1.Affinity{NodeAffinity: nodeAffinity}
	}
	if t.Spec.Affinity == nil && c.Spec.Affinity != nil && *c.Spec.Affinity == (corev1.Affinity{}) {
		c.Spec.Affinity = nil
	}
	return c
}

// validateJobCompletionsUpdate keeps completions, except an Indexed Job may set it equal to its new parallelism.
func validateJobCompletionsUpdate(s, o batchv1.JobSpec, p *field.Path) field.ErrorList {
	indexed := s.CompletionMode != nil && *s.CompletionMode == batchv1.IndexedCompletion
	if !indexed {
		return apivalidation.ValidateImmutableField(s.Completions, o.Completions, p)
	}
	if apiequality.Semantic.DeepEqual(s.Completions, o.Completions) || s.Completions == nil {
		return nil
	}
	if s.Parallelism == nil || *s.Completions != *s.Parallelism {
		return field.ErrorList{field.Invalid(p, s.Completions, "can only be modified in tandem with spec.parallelism")}
	}
	return nil
}

var jobColumns = []metav1.TableColumnDefinition{
	nameColumn,
	textColumn("Status", "Status of the job."),
	textColumn("Completions", batchv1.JobStatus{}.SwaggerDoc()["succeeded"]),
	textColumn("Duration", "Time required to complete the job."),
	ageColumn,
	containersColumn,
	imagesColumn,
	wideSelectorColumn(batchv1.JobSpec{}.SwaggerDoc()["selector"]),
}

// jobCells: NAME STATUS COMPLETIONS ("1/3", "0/1 of 4") DURATION AGE, wide CONTAINERS IMAGES SELECTOR.
func jobCells(obj runtime.Object, now time.Time) []any {
	job := obj.(*batchv1.Job)
	names, images := workloadContainerCells(job.Spec.Template.Spec.Containers)
	return []any{job.Name, jobStatusCell(job), jobCompletionsCell(job), jobDurationCell(job, now),
		age(job.CreationTimestamp, now), names, images, metav1.FormatLabelSelector(job.Spec.Selector)}
}

// jobCompletionsCell is "succeeded/completions", or "succeeded/1 of parallelism" for a work queue Job.
func jobCompletionsCell(job *batchv1.Job) string {
	if job.Spec.Completions != nil {
		return fmt.Sprintf("%d/%d", job.Status.Succeeded, *job.Spec.Completions)
	}
	if job.Spec.Parallelism != nil && *job.Spec.Parallelism > 1 {
		return fmt.Sprintf("%d/1 of %d", job.Status.Succeeded, *job.Spec.Parallelism)
	}
	return fmt.Sprintf("%d/1", job.Status.Succeeded)
}

// jobDurationCell is the time from start to completion (or to now), empty before the Job starts.
func jobDurationCell(job *batchv1.Job, now time.Time) string {
	switch st := job.Status; {
	case st.StartTime == nil:
		return ""
	case st.CompletionTime == nil:
		return duration.HumanDuration(now.Sub(st.StartTime.Time))
	default:
		return duration.HumanDuration(st.CompletionTime.Sub(st.StartTime.Time))
	}
}

// jobStatusCell is kubectl's STATUS: the first of Complete, Failed, Terminating, Suspended, FailureTarget,
// SuccessCriteriaMet that applies, else Running.
func jobStatusCell(job *batchv1.Job) string {
	has := func(t batchv1.JobConditionType) bool {
		for _, c := range job.Status.Conditions {
			if c.Type == t && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	}
	switch {
	case has(batchv1.JobComplete):
		return "Complete"
	case has(batchv1.JobFailed):
		return "Failed"
	case job.DeletionTimestamp != nil:
		return "Terminating"
	case has(batchv1.JobSuspended):
		return "Suspended"
	case has(batchv1.JobFailureTarget):
		return "FailureTarget"
	case has(batchv1.JobSuccessCriteriaMet):
		return "SuccessCriteriaMet"
	}
	return "Running"
}
