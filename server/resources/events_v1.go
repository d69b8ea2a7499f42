package resources

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Length limits of the strictly validated events.k8s.io/v1 fields.
const (
	eventReportingInstanceMaxLength = 128
	eventActionMaxLength            = 128
	eventReasonMaxLength            = 128
	eventNoteMaxLength              = 1024
)

func init() {
	register(&Resource{
		GVK:        eventsv1.SchemeGroupVersion.WithKind("Event"),
		Plural:     "events",
		ShortNames: []string{"ev"},
		Namespaced: true,
		Storage:    "events",
		Convert:    &Conversion{ToStorage: eventsV1ToStorage, FromStorage: eventsV1FromStorage},
		New:        func() runtime.Object { return &eventsv1.Event{} },
		NewList:    func() runtime.Object { return &eventsv1.EventList{} },
		Validate: func(obj runtime.Object) field.ErrorList {
			return validateEventsV1(eventV1ToCore(obj.(*eventsv1.Event)))
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return validateEventsV1Update(eventV1ToCore(obj.(*eventsv1.Event)), eventV1ToCore(old.(*eventsv1.Event)))
		},
		Table:  &Table{Columns: eventColumns, Cells: eventsV1Cells},
		Fields: eventsV1Fields,
	})
}

// eventsV1ToStorage converts an events.k8s.io/v1 Event to the core/v1 Event it is stored as.
func eventsV1ToStorage(obj runtime.Object) (runtime.Object, error) {
	e, ok := obj.(*eventsv1.Event)
	if !ok {
		return nil, fmt.Errorf("resources: events.k8s.io/v1 events: want *v1.Event, got %T", obj)
	}
	return eventV1ToCore(e), nil
}

// eventsV1FromStorage converts a stored core/v1 Event to its events.k8s.io/v1 form.
func eventsV1FromStorage(obj runtime.Object) (runtime.Object, error) {
	e, ok := obj.(*corev1.Event)
	if !ok {
		return nil, fmt.Errorf("resources: events.k8s.io/v1 events: want a stored *v1.Event, got %T", obj)
	}
	return eventCoreToV1(e), nil
}

// eventV1ToCore maps an events.k8s.io/v1 Event onto core/v1 the way Kubernetes converts them: regarding is
// involvedObject, note is message, reportingController is reportingComponent, deprecatedSource,
// deprecatedFirstTimestamp, deprecatedLastTimestamp and deprecatedCount are source, firstTimestamp, lastTimestamp
// and count; the rest keeps its name. The result shares nothing with e.
func eventV1ToCore(e *eventsv1.Event) *corev1.Event {
	e = e.DeepCopy()
	c := &corev1.Event{
		TypeMeta:            metav1.TypeMeta{APIVersion: corev1.SchemeGroupVersion.String(), Kind: "Event"},
		ObjectMeta:          e.ObjectMeta,
		InvolvedObject:      e.Regarding,
		Reason:              e.Reason,
		Message:             e.Note,
		Source:              e.DeprecatedSource,
		FirstTimestamp:      e.DeprecatedFirstTimestamp,
		LastTimestamp:       e.DeprecatedLastTimestamp,
		Count:               e.DeprecatedCount,
		Type:                e.Type,
		EventTime:           e.EventTime,
		Action:              e.Action,
		Related:             e.Related,
		ReportingController: e.ReportingController,
		ReportingInstance:   e.ReportingInstance,
	}
	if e.Series != nil {
		c.Series = &corev1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
	}
	return c
}

// eventCoreToV1 is the inverse of eventV1ToCore.
func eventCoreToV1(c *corev1.Event) *eventsv1.Event {
	c = c.DeepCopy()
	e := &eventsv1.Event{
		TypeMeta:                 metav1.TypeMeta{APIVersion: eventsv1.SchemeGroupVersion.String(), Kind: "Event"},
		ObjectMeta:               c.ObjectMeta,
		EventTime:                c.EventTime,
		ReportingController:      c.ReportingController,
		ReportingInstance:        c.ReportingInstance,
		Action:                   c.Action,
		Reason:                   c.Reason,
		Regarding:                c.InvolvedObject,
		Related:                  c.Related,
		Note:                     c.Message,
		Type:                     c.Type,
		DeprecatedSource:         c.Source,
		DeprecatedFirstTimestamp: c.FirstTimestamp,
		DeprecatedLastTimestamp:  c.LastTimestamp,
		DeprecatedCount:          c.Count,
	}
	if c.Series != nil {
		e.Series = &eventsv1.EventSeries{Count: c.Series.Count, LastObservedTime: c.Series.LastObservedTime}
	}
	return e
}

// validateEventsV1 is Kubernetes' strict validation of events created through events.k8s.io/v1, run on the
// core form and so reporting core field names (message, involvedObject, ...), as Kubernetes does.
func validateEventsV1(e *corev1.Event) field.ErrorList {
	errs := validateEventsV1Common(e)
	errs = append(errs, validateEventsV1Series(e)...)
	if e.EventTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
	}
	if e.Type != corev1.EventTypeNormal && e.Type != corev1.EventTypeWarning {
		errs = append(errs, field.Invalid(field.NewPath("type"), "", "has invalid value: "+e.Type))
	}
	for _, unset := range []struct {
		name string
		set  bool
	}{
		{"firstTimestamp", !e.FirstTimestamp.IsZero()},
		{"lastTimestamp", !e.LastTimestamp.IsZero()},
		{"count", e.Count != 0},
		{"source", e.Source.Component != "" || e.Source.Host != ""},
	} {
		if unset.set {
			errs = append(errs, field.Invalid(field.NewPath(unset.name), "", "needs to be unset"))
		}
	}
	return errs
}

// validateEventsV1Common is the validation every event passes whatever its API: the namespaces of the event and
// its object agree, and an event with an eventTime has a reporter, an action and a reason within their limits.
func validateEventsV1Common(e *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	nsPath := field.NewPath("involvedObject", "namespace")
	objNS := e.InvolvedObject.Namespace
	switch {
	case e.EventTime.IsZero() && objNS == "" && e.Namespace != metav1.NamespaceNone &&
		e.Namespace != metav1.NamespaceDefault,
		e.EventTime.IsZero() && objNS != "" && e.Namespace != objNS,
		!e.EventTime.IsZero() && objNS == "" && e.Namespace != metav1.NamespaceDefault &&
			e.Namespace != metav1.NamespaceSystem:
		errs = append(errs, field.Invalid(nsPath, objNS, "does not match event.namespace"))
	}
	if e.EventTime.IsZero() {
		return errs
	}
	if e.ReportingController == "" {
		errs = append(errs, field.Required(field.NewPath("reportingController"), ""))
	} else {
		for _, msg := range validation.IsQualifiedName(e.ReportingController) {
			errs = append(errs, field.Invalid(field.NewPath("reportingController"), e.ReportingController, msg))
		}
	}
	errs = append(errs, validateEventsV1String(e.ReportingInstance, "reportingInstance", eventReportingInstanceMaxLength, true)...)
	errs = append(errs, validateEventsV1String(e.Action, "action", eventActionMaxLength, true)...)
	errs = append(errs, validateEventsV1String(e.Reason, "reason", eventReasonMaxLength, true)...)
	return append(errs, validateEventsV1String(e.Message, "message", eventNoteMaxLength, false)...)
}

// validateEventsV1String checks an event field is set (when required) and at most max characters.
func validateEventsV1String(v, name string, max int, required bool) field.ErrorList {
	var errs field.ErrorList
	if required && v == "" {
		errs = append(errs, field.Required(field.NewPath(name), ""))
	}
	if len(v) > max {
		errs = append(errs, field.Invalid(field.NewPath(name), "", fmt.Sprintf("can have at most %v characters", max)))
	}
	return errs
}

// validateEventsV1Series requires a series, when present, to count at least 2 and have a lastObservedTime.
func validateEventsV1Series(e *corev1.Event) field.ErrorList {
	if e.Series == nil {
		return nil
	}
	var errs field.ErrorList
	if e.Series.Count < 2 {
		errs = append(errs, field.Invalid(field.NewPath("series", "count"), "", "should be at least 2"))
	}
	if e.Series.LastObservedTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("series", "lastObservedTime"), ""))
	}
	return errs
}

// validateEventsV1Update allows an events.k8s.io/v1 update to change only the series (and metadata).
func validateEventsV1Update(e, old *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	if !apiequality.Semantic.DeepEqual(e.Series, old.Series) {
		errs = append(errs, validateEventsV1Series(e)...)
	}
	for _, f := range []struct {
		name     string
		new, old any
	}{
		{"involvedObject", e.InvolvedObject, old.InvolvedObject},
		{"reason", e.Reason, old.Reason},
		{"message", e.Message, old.Message},
		{"source", e.Source, old.Source},
		{"firstTimestamp", e.FirstTimestamp, old.FirstTimestamp},
		{"lastTimestamp", e.LastTimestamp, old.LastTimestamp},
		{"count", e.Count, old.Count},
		{"type", e.Type, old.Type},
		{"eventTime", e.EventTime, old.EventTime},
		{"action", e.Action, old.Action},
		{"related", e.Related, old.Related},
		{"reportingController", e.ReportingController, old.ReportingController},
		{"reportingInstance", e.ReportingInstance, old.ReportingInstance},
	} {
		errs = append(errs, apivalidation.ValidateImmutableField(f.new, f.old, field.NewPath(f.name))...)
	}
	return errs
}

// eventsV1Cells prints an event as kubectl prints a core event, from its core form.
func eventsV1Cells(obj runtime.Object, now time.Time) []any {
	return eventCells(eventV1ToCore(obj.(*eventsv1.Event)), now)
}

// eventsV1Fields returns the field-selector attributes of an event, served or stored form: Kubernetes' core
// names (involvedObject.*, reportingComponent, source, reason, type) and their events.k8s.io/v1 spellings
// (regarding.*, reportingController).
func eventsV1Fields(obj runtime.Object) fields.Set {
	e, ok := obj.(*corev1.Event)
	if !ok {
		e = eventV1ToCore(obj.(*eventsv1.Event))
	}
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	set := fields.Set{"reason": e.Reason, "reportingComponent": e.ReportingController,
		"reportingController": e.ReportingController, "source": source, "type": e.Type}
	o := e.InvolvedObject
	for k, v := range map[string]string{"kind": o.Kind, "namespace": o.Namespace, "name": o.Name, "uid": string(o.UID),
		"apiVersion": o.APIVersion, "resourceVersion": o.ResourceVersion, "fieldPath": o.FieldPath} {
		set["involvedObject."+k], set["regarding."+k] = v, v
	}
	return set
}
