package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

func eventsOf(t *testing.T, cs kubernetes.Interface, kind, name string) []corev1.Event {
	t.Helper()
	list, err := cs.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": kind, "involvedObject.name": name}.String()})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// TestEventsAggregate: the same event recorded again is one Event with a count and first and last timestamps,
// written to the object's cluster only.
func TestEventsAggregate(t *testing.T) {
	d := newDeps(t)
	ev := NewEvents(d)
	defer ev.Close()
	cs := admin(t, d, "c1")
	cm, err := cs.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := ev.For("c1", "test-controller")
	for range 3 {
		rec.Eventf(cm, corev1.EventTypeWarning, "Broken", "config %s is broken", cm.Name)
	}
	eventually(t, "one event with count 3", func() bool {
		evs := eventsOf(t, cs, "ConfigMap", "cfg")
		return len(evs) == 1 && evs[0].Count == 3 && evs[0].Reason == "Broken" && evs[0].Type == corev1.EventTypeWarning &&
			evs[0].Source.Component == "test-controller" && evs[0].Message == "config cfg is broken" &&
			!evs[0].FirstTimestamp.IsZero() && !evs[0].LastTimestamp.Before(&evs[0].FirstTimestamp)
	})
	if evs := eventsOf(t, admin(t, d, "c2"), "ConfigMap", "cfg"); len(evs) != 0 {
		t.Fatalf("cluster c2 got c1's events: %v", evs)
	}
}

// TestControllerEvents: the events kubectl users know, from the ReplicaSet and Deployment controllers.
func TestControllerEvents(t *testing.T) {
	d := newDeps(t)
	runControllers(t, d)
	cs := admin(t, d, "c1")
	if _, err := cs.AppsV1().Deployments("default").Create(t.Context(), deployment("web", 2, "nginx", false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ScalingReplicaSet on the Deployment and SuccessfulCreate on its ReplicaSet", func() bool {
		scaled := false
		for _, e := range eventsOf(t, cs, "Deployment", "web") {
			scaled = scaled || (e.Reason == "ScalingReplicaSet" && e.Source.Component == "deployment-controller")
		}
		sets := replicaSetsOf(t, cs, "web")
		rs, ok := sets["1"]
		if !ok {
			return false
		}
		created := 0
		for _, e := range eventsOf(t, cs, "ReplicaSet", rs.Name) {
			if e.Reason == "SuccessfulCreate" {
				created++
			}
		}
		return scaled && created == 2
	})
}
