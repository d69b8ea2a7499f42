package web

import (
	"context"
	"net/url"
	"sort"
	"strconv"

	"github.com/a-h/templ"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// HealthCheck is one control-plane component's state on the overview.
type HealthCheck struct {
	Name   string
	OK     bool
	Detail string
}

// overviewView is a cluster at a glance.
type overviewView struct {
	Cluster      string
	Nodes        []overviewNode
	NodesReady   int
	NodesHidden  bool
	Phases       []kv // pods by phase
	PodsTotal    int
	PodsHidden   bool
	Deployments  string // "available/total"
	DeployHidden bool
	Health       []HealthCheck
}

type overviewNode struct {
	Name, Href, Status, StatusClass, Roles string
	CPU, Memory                            allocView
	Pods                                   int
}

func overviewDeps(d *Dashboard, _ url.Values) ([]dep, error) {
	return []dep{{res: d.byKey["nodes"]}, {res: d.byKey["pods"]}, {res: d.byKey["deployments.apps"]}}, nil
}

// renderOverviewRegion renders the cluster overview; each part the user may not list says so instead.
func renderOverviewRegion(ctx context.Context, d *Dashboard, s *scope, _ url.Values) (templ.Component, error) {
	v := overviewView{Cluster: s.cluster.ID}
	now := d.cfg.Now()
	podsByNode := map[string][]*corev1.Pod{}
	phases := map[string]int{}
	if res := d.byKey["pods"]; d.allow(ctx, s, "list", res, "", "") == nil {
		col, err := d.collection(ctx, s, res)
		if err != nil {
			return nil, err
		}
		entries, _ := col.List("")
		for _, e := range entries {
			p := e.Object.(*corev1.Pod)
			phases[string(p.Status.Phase)]++
			if p.Spec.NodeName != "" {
				podsByNode[p.Spec.NodeName] = append(podsByNode[p.Spec.NodeName], p)
			}
		}
		v.PodsTotal = len(entries)
	} else {
		v.PodsHidden = true
	}
	for _, ph := range []string{"Running", "Pending", "Succeeded", "Failed", "Unknown"} {
		v.Phases = append(v.Phases, kv{ph, strconv.Itoa(phases[ph])})
	}
	if res := d.byKey["nodes"]; d.allow(ctx, s, "list", res, "", "") == nil {
		col, err := d.collection(ctx, s, res)
		if err != nil {
			return nil, err
		}
		entries, _ := col.List("")
		for _, e := range entries {
			n := e.Object.(*corev1.Node)
			cells := tableCells(res, n, now)
			on := overviewNode{Name: n.Name, Href: objectHref(s.cluster.ID, "nodes", "", n.Name), Status: cellString(cells[1]),
				Roles: cellString(cells[2]), Pods: len(podsByNode[n.Name])}
			on.StatusClass = statusClass(on.Status)
			if on.Status == "Ready" {
				v.NodesReady++
			}
			nv := buildNode(metaView{Ref: objectRef{Cluster: s.cluster.ID}}, n, podsByNode[n.Name], v.PodsHidden, now)
			for _, a := range nv.Capacity {
				switch a.Name {
				case string(corev1.ResourceCPU):
					on.CPU = a
				case string(corev1.ResourceMemory):
					on.Memory = a
				}
			}
			v.Nodes = append(v.Nodes, on)
		}
		sort.Slice(v.Nodes, func(i, j int) bool { return v.Nodes[i].Name < v.Nodes[j].Name })
	} else {
		v.NodesHidden = true
	}
	if res := d.byKey["deployments.apps"]; d.allow(ctx, s, "list", res, "", "") == nil {
		col, err := d.collection(ctx, s, res)
		if err != nil {
			return nil, err
		}
		entries, _ := col.List("")
		avail := 0
		for _, e := range entries {
			dep := e.Object.(*appsv1.Deployment)
			if dep.Status.AvailableReplicas >= ptrOr(dep.Spec.Replicas, 1) {
				avail++
			}
		}
		v.Deployments = strconv.Itoa(avail) + "/" + strconv.Itoa(len(entries))
	} else {
		v.DeployHidden = true
	}
	if d.cfg.Health != nil {
		v.Health = d.cfg.Health(ctx)
	}
	return overview(v), nil
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}
