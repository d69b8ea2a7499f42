package resources

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"pgregory.net/rapid"
)

var (
	rapidWord = rapid.StringMatching(`[a-z0-9.-]{0,12}`)
	// rapidSeconds are whole seconds, the precision of metav1.Time; MicroTimes add microseconds.
	rapidSeconds = rapid.Int64Range(0, 4e9)
)

func rapidTime(t *rapid.T, label string) metav1.Time {
	if rapid.Bool().Draw(t, label+"Zero") {
		return metav1.Time{}
	}
	return metav1.NewTime(time.Unix(rapidSeconds.Draw(t, label), 0).UTC())
}

func rapidMicroTime(t *rapid.T, label string) metav1.MicroTime {
	if rapid.Bool().Draw(t, label+"Zero") {
		return metav1.MicroTime{}
	}
	return metav1.NewMicroTime(time.Unix(rapidSeconds.Draw(t, label), rapid.Int64Range(0, 999999).Draw(t, label+"us")*1000).UTC())
}

func rapidObjectRef(t *rapid.T, label string) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: rapidWord.Draw(t, label+"Kind"), Namespace: rapidWord.Draw(t, label+"NS"),
		Name: rapidWord.Draw(t, label+"Name"), UID: types.UID(rapidWord.Draw(t, label+"UID")),
		APIVersion: rapidWord.Draw(t, label+"APIVersion"), ResourceVersion: rapidWord.Draw(t, label+"RV"),
		FieldPath: rapidWord.Draw(t, label+"FieldPath")}
}

// rapidEventV1 draws an events.k8s.io/v1 Event with any subset of its fields set.
func rapidEventV1(t *rapid.T) *eventsv1.Event {
	e := &eventsv1.Event{
		TypeMeta: metav1.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"},
		ObjectMeta: metav1.ObjectMeta{Name: rapidWord.Draw(t, "name"), Namespace: rapidWord.Draw(t, "namespace"),
			Labels: rapid.MapOf(rapidWord, rapidWord).Draw(t, "labels")},
		EventTime: rapidMicroTime(t, "eventTime"), ReportingController: rapidWord.Draw(t, "controller"),
		ReportingInstance: rapidWord.Draw(t, "instance"), Action: rapidWord.Draw(t, "action"),
		Reason: rapidWord.Draw(t, "reason"), Regarding: rapidObjectRef(t, "regarding"),
		Note: rapid.String().Draw(t, "note"), Type: rapidWord.Draw(t, "type"),
		DeprecatedSource: corev1.EventSource{Component: rapidWord.Draw(t, "component"),
			Host: rapidWord.Draw(t, "host")},
		DeprecatedFirstTimestamp: rapidTime(t, "first"), DeprecatedLastTimestamp: rapidTime(t, "last"),
		DeprecatedCount: rapid.Int32().Draw(t, "count"),
	}
	if rapid.Bool().Draw(t, "hasSeries") {
		e.Series = &eventsv1.EventSeries{Count: rapid.Int32().Draw(t, "seriesCount"),
			LastObservedTime: rapidMicroTime(t, "observed")}
	}
	if rapid.Bool().Draw(t, "hasRelated") {
		e.Related = new(rapidObjectRef(t, "related"))
	}
	return e
}

// TestEventsV1RoundTrip: every events.k8s.io/v1 Event survives storage as a core/v1 Event unchanged.
func TestEventsV1RoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := rapidEventV1(t)
		orig := e.DeepCopy()
		stored, err := eventsV1ToStorage(e)
		if err != nil {
			t.Fatalf("ToStorage: %v", err)
		}
		back, err := eventsV1FromStorage(stored)
		if err != nil {
			t.Fatalf("FromStorage: %v", err)
		}
		if diff := cmp.Diff(orig, back); diff != "" {
			t.Fatalf("FromStorage(ToStorage(e)) (-e +got):\n%s", diff)
		}
		if diff := cmp.Diff(orig, e); diff != "" {
			t.Fatalf("ToStorage changed its input (-before +after):\n%s", diff)
		}
	})
}

// TestEventsV1ToStorage pins the field mapping onto core/v1.
func TestEventsV1ToStorage(t *testing.T) {
	at := metav1.NewTime(appsNow)
	e := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web.1", Namespace: "default"},
		EventTime: metav1.NewMicroTime(appsNow), ReportingController: "ctl", ReportingInstance: "i-1",
		Action: "Bind", Reason: "Scheduled", Note: "assigned", Type: "Normal",
		Regarding:        corev1.ObjectReference{Kind: "Pod", Name: "web"},
		Related:          &corev1.ObjectReference{Kind: "Node", Name: "n1"},
		Series:           &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(appsNow)},
		DeprecatedSource: corev1.EventSource{Component: "c", Host: "h"}, DeprecatedFirstTimestamp: at,
		DeprecatedLastTimestamp: at, DeprecatedCount: 4}
	want := &corev1.Event{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta: metav1.ObjectMeta{Name: "web.1", Namespace: "default"},
		EventTime:  metav1.NewMicroTime(appsNow), ReportingController: "ctl", ReportingInstance: "i-1",
		Action: "Bind", Reason: "Scheduled", Message: "assigned", Type: "Normal",
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web"},
		Related:        &corev1.ObjectReference{Kind: "Node", Name: "n1"},
		Series:         &corev1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(appsNow)},
		Source:         corev1.EventSource{Component: "c", Host: "h"}, FirstTimestamp: at, LastTimestamp: at, Count: 4}
	got, err := eventsV1ToStorage(e)
	if err != nil {
		t.Fatalf("ToStorage: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ToStorage (-want +got):\n%s", diff)
	}
	if _, err := eventsV1ToStorage(&corev1.Event{}); err == nil {
		t.Errorf("ToStorage(core event) succeeded")
	}
	if _, err := eventsV1FromStorage(e); err == nil {
		t.Errorf("FromStorage(events.k8s.io event) succeeded")
	}
}

func TestEventsV1Registration(t *testing.T) {
	r := appsResource(t, &eventsv1.Event{})
	if r.Storage != "events" || r.Convert == nil || !r.Namespaced {
		t.Errorf("events.k8s.io/v1: Storage %q, Convert %v, Namespaced %v; want events, set, true",
			r.Storage, r.Convert != nil, r.Namespaced)
	}
}
