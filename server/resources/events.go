package resources

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func init() {
	register(&Resource{
		GVK:        corev1.SchemeGroupVersion.WithKind("Event"),
		Plural:     "events",
		ShortNames: []string{"ev"},
		Namespaced: true,
		Storage:    "events",
		New:        func() runtime.Object { return &corev1.Event{} },
		NewList:    func() runtime.Object { return &corev1.EventList{} },
		Validate:   func(obj runtime.Object) field.ErrorList { return validateEvent(obj.(*corev1.Event)) },
		Table:      &Table{Columns: eventColumns, Cells: eventCells},
		Fields:     eventFields,
	})
}

// reportingInstanceMaxLength is the longest reportingInstance Kubernetes accepts.
const reportingInstanceMaxLength = 128

// validateEvent applies Kubernetes' validation of core/v1 events. Old-style events (no eventTime) must name the
// involved object's namespace as their own (or, for cluster-scoped objects, live in "default"); new-style events
// need a reporting controller and instance.
func validateEvent(ev *corev1.Event) field.ErrorList {
	np := field.NewPath("involvedObject", "namespace")
	mismatch := field.Invalid(np, ev.InvolvedObject.Namespace, "does not match event.namespace")
	if ev.EventTime.IsZero() {
		switch obj := ev.InvolvedObject.Namespace; {
		case obj == "" && ev.Namespace != "" && ev.Namespace != metav1.NamespaceDefault:
			return field.ErrorList{mismatch}
		case obj != "" && ev.Namespace != obj:
			return field.ErrorList{mismatch}
		}
		return nil
	}
	var errs field.ErrorList
	if ev.InvolvedObject.Namespace == "" && ev.Namespace != metav1.NamespaceDefault && ev.Namespace != metav1.NamespaceSystem {
		errs = append(errs, mismatch)
	}
	cp := field.NewPath("reportingComponent")
	if ev.ReportingController == "" {
		errs = append(errs, field.Required(cp, ""))
	}
	errs = append(errs, invalidEach(cp, ev.ReportingController, content.IsLabelKey(ev.ReportingController))...)
	ip := field.NewPath("reportingInstance")
	if ev.ReportingInstance == "" {
		errs = append(errs, field.Required(ip, ""))
	}
	if len(ev.ReportingInstance) > reportingInstanceMaxLength {
		errs = append(errs, field.Invalid(ip, "", fmt.Sprintf("can have at most %v characters", reportingInstanceMaxLength)))
	}
	return errs
}

// eventColumns are kubectl's event columns: LAST SEEN TYPE REASON OBJECT MESSAGE, and with -o wide SUBOBJECT,
// SOURCE, FIRST SEEN, COUNT and NAME.
var eventColumns = []metav1.TableColumnDefinition{
	{Name: "Last Seen", Type: "string", Description: corev1.Event{}.SwaggerDoc()["lastTimestamp"]},
	{Name: "Type", Type: "string", Description: corev1.Event{}.SwaggerDoc()["type"]},
	{Name: "Reason", Type: "string", Description: corev1.Event{}.SwaggerDoc()["reason"]},
	{Name: "Object", Type: "string", Description: corev1.Event{}.SwaggerDoc()["involvedObject"]},
	{Name: "Subobject", Type: "string", Priority: 1, Description: corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]},
	{Name: "Source", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["source"]},
	{Name: "Message", Type: "string", Description: corev1.Event{}.SwaggerDoc()["message"]},
	{Name: "First Seen", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["firstTimestamp"]},
	{Name: "Count", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["count"]},
	{Name: "Name", Type: "string", Priority: 1, Format: "name", Description: nameColumn.Description},
}

// eventCells renders an event as kubectl does: times fall back from lastTimestamp to firstTimestamp to eventTime
// (a series' last observation wins), count is at least 1, the object is "kind/name" in lower case.
func eventCells(obj runtime.Object, now time.Time) []any {
	ev := obj.(*corev1.Event)
	first := age(ev.FirstTimestamp, now)
	if ev.FirstTimestamp.IsZero() {
		first = age(metav1.Time{Time: ev.EventTime.Time}, now)
	}
	last := age(ev.LastTimestamp, now)
	if ev.LastTimestamp.IsZero() {
		last = first
	}
	count := ev.Count
	if ev.Series != nil {
		last = age(metav1.Time{Time: ev.Series.LastObservedTime.Time}, now)
		count = ev.Series.Count
	} else if count == 0 {
		count = 1
	}
	object := strings.ToLower(ev.InvolvedObject.Kind)
	if ev.InvolvedObject.Name != "" {
		object += "/" + ev.InvolvedObject.Name
	}
	return []any{last, ev.Type, ev.Reason, object, ev.InvolvedObject.FieldPath, eventSource(ev),
		strings.TrimSpace(ev.Message), first, int64(count), ev.Name}
}

// eventSource is "component, host", each falling back to the reporting controller and instance.
func eventSource(ev *corev1.Event) string {
	component, host := ev.Source.Component, ev.Source.Host
	if component == "" {
		component = ev.ReportingController
	}
	if host == "" {
		host = ev.ReportingInstance
	}
	if host == "" {
		return component
	}
	return component + ", " + host
}

// eventFields are the event field selectors Kubernetes supports; source falls back to the reporting controller.
func eventFields(obj runtime.Object) fields.Set {
	ev := obj.(*corev1.Event)
	source := ev.Source.Component
	if source == "" {
		source = ev.ReportingController
	}
	o := ev.InvolvedObject
	return fields.Set{
		"involvedObject.kind":            o.Kind,
		"involvedObject.namespace":       o.Namespace,
		"involvedObject.name":            o.Name,
		"involvedObject.uid":             string(o.UID),
		"involvedObject.apiVersion":      o.APIVersion,
		"involvedObject.resourceVersion": o.ResourceVersion,
		"involvedObject.fieldPath":       o.FieldPath,
		"reason":                         ev.Reason,
		"reportingComponent":             ev.ReportingController,
		"source":                         source,
		"type":                           ev.Type,
	}
}
