package web

import (
	"context"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/a-h/templ"
	corev1 "k8s.io/api/core/v1"
)

// eventView is one Event as `kubectl events` shows it.
type eventView struct {
	Namespace, Type, Reason, Object, ObjectHref, Message, Source, LastSeen string
	Count                                                                  int32
	Warning                                                                bool
}

type eventsView struct {
	Rows    []eventView
	Total   int
	Limit   int
	ForObj  bool
	Warning bool
}

// eventTime is when an event last happened (upstream's precedence of the timestamps).
func eventTime(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

func eventsDeps(d *Dashboard, q url.Values) ([]dep, error) {
	return []dep{{res: d.byKey["events"], namespace: q.Get("ns")}}, nil
}

// renderEventsRegion renders the newest events of a namespace (or every namespace), optionally only those about
// one object (name and kind) or only warnings.
func renderEventsRegion(ctx context.Context, d *Dashboard, s *scope, q url.Values) (templ.Component, error) {
	res := d.byKey["events"]
	ns := q.Get("ns")
	if !validNamespace(ns) {
		return nil, gone("%q is not a namespace name.", ns)
	}
	if err := d.allow(ctx, s, "list", res, ns, ""); err != nil {
		return nil, err
	}
	col, err := d.collection(ctx, s, res)
	if err != nil {
		return nil, err
	}
	name, kind := q.Get("name"), q.Get("kind")
	v := eventsView{ForObj: name != "", Warning: q.Get("type") == "Warning", Limit: 50}
	if n, err := strconv.Atoi(q.Get("limit")); err == nil && n > 0 && n <= 500 {
		v.Limit = n
	}
	entries, _ := col.List(ns)
	var evs []*corev1.Event
	for _, e := range entries {
		ev, ok := e.Object.(*corev1.Event)
		if !ok {
			continue
		}
		if name != "" && (ev.InvolvedObject.Name != name || (kind != "" && ev.InvolvedObject.Kind != kind)) {
			continue
		}
		if v.Warning && ev.Type != corev1.EventTypeWarning {
			continue
		}
		evs = append(evs, ev)
	}
	sort.SliceStable(evs, func(i, j int) bool { return eventTime(evs[i]).After(eventTime(evs[j])) })
	v.Total = len(evs)
	now := d.cfg.Now()
	for _, ev := range evs[:min(len(evs), v.Limit)] {
		o := ev.InvolvedObject
		row := eventView{Namespace: ev.Namespace, Type: ev.Type, Reason: ev.Reason, Object: o.Kind + "/" + o.Name,
			Message: ev.Message, Count: max(ev.Count, 1), Warning: ev.Type == corev1.EventTypeWarning,
			LastSeen: humanAge(metaTime(eventTime(ev)), now)}
		if ev.Source.Component != "" {
			row.Source = ev.Source.Component
		} else {
			row.Source = ev.ReportingController
		}
		if k, ok := objectKeys[o.Kind]; ok {
			row.ObjectHref = objectHref(s.cluster.ID, k, o.Namespace, o.Name)
		}
		v.Rows = append(v.Rows, row)
	}
	return eventsTable(v), nil
}

// objectKeys maps the kinds events are about to resource keys, for links.
var objectKeys = map[string]string{"Pod": "pods", "Node": "nodes", "Service": "services", "ReplicaSet": "replicasets.apps",
	"Deployment": "deployments.apps", "StatefulSet": "statefulsets.apps", "DaemonSet": "daemonsets.apps",
	"Job": "jobs.batch", "CronJob": "cronjobs.batch", "Namespace": "namespaces", "ConfigMap": "configmaps",
	"Secret": "secrets", "EndpointSlice": "endpointslices.discovery.k8s.io"}
