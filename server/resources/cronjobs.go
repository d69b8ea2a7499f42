package resources

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // timeZone validation must not depend on the host's zoneinfo

	batchv1 "k8s.io/api/batch/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxCronJobNameLength leaves room for the 11-character "-<timestamp>" suffix of the Jobs a CronJob creates
// within the 63 characters of a label value.
const maxCronJobNameLength = 52

func init() {
	register(&Resource{
		GVK:        batchv1.SchemeGroupVersion.WithKind("CronJob"),
		Plural:     "cronjobs",
		ShortNames: []string{"cj"},
		Categories: []string{"all"},
		Namespaced: true,
		New:        func() runtime.Object { return &batchv1.CronJob{} },
		NewList:    func() runtime.Object { return &batchv1.CronJobList{} },
		Status:     true,
		Generation: true,
		Default:    func(obj runtime.Object) { defaultCronJob(obj.(*batchv1.CronJob)) },
		Validate:   func(obj runtime.Object) field.ErrorList { return validateCronJob(obj.(*batchv1.CronJob)) },
		Table:      &Table{Columns: cronJobColumns, Cells: cronJobCells},
	})
}

// defaultCronJob applies batch/v1 defaults: concurrencyPolicy Allow, not suspended, 3 successful and 1 failed
// Jobs kept, and the job template's pod failure policy and pod template defaults.
func defaultCronJob(cj *batchv1.CronJob) {
	s := &cj.Spec
	if s.ConcurrencyPolicy == "" {
		s.ConcurrencyPolicy = batchv1.AllowConcurrent
	}
	if s.Suspend == nil {
		s.Suspend = new(false)
	}
	if s.SuccessfulJobsHistoryLimit == nil {
		s.SuccessfulJobsHistoryLimit = new(int32(3))
	}
	if s.FailedJobsHistoryLimit == nil {
		s.FailedJobsHistoryLimit = new(int32(1))
	}
	defaultPodFailurePolicy(&s.JobTemplate.Spec)
	defaultPodTemplateSpec(&s.JobTemplate.Spec.Template)
}

// validateCronJob checks a CronJob: name length, schedule, time zone, concurrency policy, history limits and
// the job template, whose selector the CronJob controller generates.
func validateCronJob(cj *batchv1.CronJob) field.ErrorList {
	var errs field.ErrorList
	if len(cj.Name) > maxCronJobNameLength {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), cj.Name,
			fmt.Sprintf("must be no more than %d characters", maxCronJobNameLength)))
	}
	s, p := &cj.Spec, field.NewPath("spec")
	if s.Schedule == "" {
		errs = append(errs, field.Required(p.Child("schedule"), ""))
	} else {
		errs = append(errs, validateCronSchedule(s.Schedule, p.Child("schedule"))...)
	}
	if s.StartingDeadlineSeconds != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(*s.StartingDeadlineSeconds,
			p.Child("startingDeadlineSeconds"))...)
	}
	errs = append(errs, validateTimeZone(s.TimeZone, p.Child("timeZone"))...)
	errs = append(errs, validateConcurrencyPolicy(s.ConcurrencyPolicy, p.Child("concurrencyPolicy"))...)
	errs = append(errs, validateJobTemplate(&s.JobTemplate, p.Child("jobTemplate"))...)
	errs = append(errs, validateOptionalNonnegative(s.SuccessfulJobsHistoryLimit, p.Child("successfulJobsHistoryLimit"))...)
	return append(errs, validateOptionalNonnegative(s.FailedJobsHistoryLimit, p.Child("failedJobsHistoryLimit"))...)
}

// validateCronSchedule checks a cron schedule. A TZ= or CRON_TZ= prefix is refused: the timeZone field says it.
func validateCronSchedule(schedule string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if err := parseCronSchedule(schedule); err != nil {
		errs = append(errs, field.Invalid(p, schedule, err.Error()))
	}
	if strings.Contains(schedule, "TZ") {
		errs = append(errs, field.Invalid(p, schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
	}
	return errs
}

// validTimeZoneComponent is one "/"-separated part of an IANA time zone name.
var validTimeZoneComponent = regexp.MustCompile(`^[A-Za-z\.\-_0-9+]{1,14}$`)

// validateTimeZone checks an optional IANA time zone name ("Europe/Paris"); "Local" is refused.
func validateTimeZone(tz *string, p *field.Path) field.ErrorList {
	if tz == nil {
		return nil
	}
	if *tz == "" {
		return field.ErrorList{field.Invalid(p, *tz, "timeZone must be nil or non-empty string")}
	}
	for _, part := range strings.Split(*tz, "/") {
		if part == "." || part == ".." || strings.HasPrefix(part, "-") || !validTimeZoneComponent.MatchString(part) {
			return field.ErrorList{field.Invalid(p, *tz, "unknown time zone "+*tz)}
		}
	}
	if strings.EqualFold(*tz, "Local") {
		return field.ErrorList{field.Invalid(p, *tz,
			"timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones")}
	}
	if _, err := time.LoadLocation(*tz); err != nil {
		return field.ErrorList{field.Invalid(p, *tz, err.Error())}
	}
	return nil
}

// validateConcurrencyPolicy requires Allow, Forbid or Replace.
func validateConcurrencyPolicy(v batchv1.ConcurrencyPolicy, p *field.Path) field.ErrorList {
	valid := []batchv1.ConcurrencyPolicy{batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent}
	switch {
	case v == "":
		return field.ErrorList{field.Required(p, "")}
	case !slices.Contains(valid, v):
		return field.ErrorList{field.NotSupported(p, v, valid)}
	}
	return nil
}

// validateJobTemplate checks a CronJob's jobTemplate at p: a Job spec without selector or manualSelector.
func validateJobTemplate(t *batchv1.JobTemplateSpec, p *field.Path) field.ErrorList {
	sp := p.Child("spec")
	errs := validateJobSpec(&t.Spec, sp)
	if t.Spec.Selector != nil {
		errs = append(errs, field.Invalid(sp.Child("selector"), t.Spec.Selector, "`selector` will be auto-generated"))
	}
	if t.Spec.ManualSelector != nil && *t.Spec.ManualSelector {
		errs = append(errs, field.NotSupported(sp.Child("manualSelector"), t.Spec.ManualSelector,
			[]string{"nil", "false"}))
	}
	return errs
}

var cronJobColumns = []metav1.TableColumnDefinition{
	nameColumn,
	textColumn("Schedule", batchv1.CronJobSpec{}.SwaggerDoc()["schedule"]),
	textColumn("Timezone", batchv1.CronJobSpec{}.SwaggerDoc()["timeZone"]),
	{Name: "Suspend", Type: "boolean", Description: batchv1.CronJobSpec{}.SwaggerDoc()["suspend"]},
	integerColumn("Active", batchv1.CronJobStatus{}.SwaggerDoc()["active"]),
	textColumn("Last Schedule", batchv1.CronJobStatus{}.SwaggerDoc()["lastScheduleTime"]),
	ageColumn,
	containersColumn,
	imagesColumn,
	wideSelectorColumn(batchv1.JobSpec{}.SwaggerDoc()["selector"]),
}

// cronJobCells: NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE, wide CONTAINERS IMAGES SELECTOR.
func cronJobCells(obj runtime.Object, now time.Time) []any {
	cj := obj.(*batchv1.CronJob)
	last := "<none>"
	if cj.Status.LastScheduleTime != nil {
		last = age(*cj.Status.LastScheduleTime, now)
	}
	tz := "<none>"
	if cj.Spec.TimeZone != nil {
		tz = *cj.Spec.TimeZone
	}
	t := cj.Spec.JobTemplate.Spec
	names, images := workloadContainerCells(t.Template.Spec.Containers)
	return []any{cj.Name, cj.Spec.Schedule, tz, boolPtrCell(cj.Spec.Suspend), int64(len(cj.Status.Active)), last,
		age(cj.CreationTimestamp, now), names, images, metav1.FormatLabelSelector(t.Selector)}
}

// cronField is the range and names of one field of a cron schedule.
type cronField struct {
	min, max int
	names    map[string]int
}

// cronFields are the five fields of a standard schedule: minute, hour, day of month, month, day of week.
var cronFields = [5]cronField{
	{min: 0, max: 59},
	{min: 0, max: 23},
	{min: 1, max: 31},
	{min: 1, max: 12, names: map[string]int{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7,
		"aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}},
	{min: 0, max: 6, names: map[string]int{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}},
}

// cronDescriptors are the @-shorthands a schedule may be.
var cronDescriptors = []string{"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}

// parseCronSchedule checks a schedule the way Kubernetes' cron library parses a standard spec: an optional
// TZ=<zone> or CRON_TZ=<zone> prefix, then a descriptor (@daily, @every 5m, ...) or five fields of
// comma-separated values, ranges ("1-5"), steps ("*/15", "10/5"), "*" and "?", with month and weekday names.
// Errors read like the library's ("expected exactly 5 fields, found 4: [* * * *]").
func parseCronSchedule(spec string) error {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return errors.New("empty spec string")
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		zone, rest, _ := strings.Cut(spec[strings.Index(spec, "=")+1:], " ")
		if _, err := time.LoadLocation(zone); err != nil {
			return fmt.Errorf("provided bad location %s: %v", zone, err)
		}
		spec = strings.TrimSpace(rest)
	}
	if strings.HasPrefix(spec, "@") {
		return parseCronDescriptor(spec)
	}
	fields := strings.Fields(spec)
	if len(fields) != len(cronFields) {
		return fmt.Errorf("expected exactly %d fields, found %d: %s", len(cronFields), len(fields), fields)
	}
	for i, f := range fields {
		for _, expr := range strings.FieldsFunc(f, func(r rune) bool { return r == ',' }) {
			if err := parseCronRange(expr, cronFields[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// parseCronDescriptor accepts the @-shorthands and "@every <duration>".
func parseCronDescriptor(spec string) error {
	for _, d := range cronDescriptors {
		if spec == d {
			return nil
		}
	}
	if every, ok := strings.CutPrefix(spec, "@every "); ok {
		if _, err := time.ParseDuration(every); err != nil {
			return fmt.Errorf("failed to parse duration %s: %s", spec, err)
		}
		return nil
	}
	return fmt.Errorf("unrecognized descriptor: %s", spec)
}

// parseCronRange checks one comma-separated element of a field: "*", "?", "N", "N-M", each optionally "/step".
func parseCronRange(expr string, f cronField) error {
	rangeAndStep := strings.Split(expr, "/")
	lowAndHigh := strings.Split(rangeAndStep[0], "-")
	start, end := f.min, f.max
	if lowAndHigh[0] != "*" && lowAndHigh[0] != "?" {
		var err error
		if start, err = parseCronValue(lowAndHigh[0], f.names); err != nil {
			return err
		}
		switch len(lowAndHigh) {
		case 1:
			end = start
		case 2:
			if end, err = parseCronValue(lowAndHigh[1], f.names); err != nil {
				return err
			}
		default:
			return fmt.Errorf("too many hyphens: %s", expr)
		}
	}
	step := 1
	switch len(rangeAndStep) {
	case 1:
	case 2:
		var err error
		if step, err = parseCronValue(rangeAndStep[1], nil); err != nil {
			return err
		}
		if len(lowAndHigh) == 1 {
			end = f.max // "N/step" means "N-max/step"
		}
	default:
		return fmt.Errorf("too many slashes: %s", expr)
	}
	return checkCronRange(expr, start, end, step, f)
}

// checkCronRange checks start-end/step lies within the field's bounds.
func checkCronRange(expr string, start, end, step int, f cronField) error {
	switch {
	case start < f.min:
		return fmt.Errorf("beginning of range (%d) below minimum (%d): %s", start, f.min, expr)
	case end > f.max:
		return fmt.Errorf("end of range (%d) above maximum (%d): %s", end, f.max, expr)
	case start > end:
		return fmt.Errorf("beginning of range (%d) beyond end of range (%d): %s", start, end, expr)
	case step == 0:
		return fmt.Errorf("step of range should be a positive number: %s", expr)
	}
	return nil
}

// parseCronValue reads a non-negative number or, when names is set, a month or weekday name.
func parseCronValue(s string, names map[string]int) (int, error) {
	if n, ok := names[strings.ToLower(s)]; ok {
		return n, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("failed to parse int from %s: %s", s, err)
	}
	if n < 0 {
		return 0, fmt.Errorf("negative number (%d) not allowed: %s", n, s)
	}
	return n, nil
}
