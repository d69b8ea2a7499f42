package web

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
)

// objectRef names the object of a detail page or region.
type objectRef struct {
	Cluster   string
	Key       string // resource key
	Namespace string // "" for cluster-scoped
	Name      string
}

func (o objectRef) href() string { return objectHref(o.Cluster, o.Key, o.Namespace, o.Name) }

func (o objectRef) params() string {
	v := url.Values{"cluster": {o.Cluster}, "resource": {o.Key}, "name": {o.Name}}
	if o.Namespace != "" {
		v.Set("ns", o.Namespace)
	}
	return v.Encode()
}

func refFromQuery(q url.Values) objectRef {
	return objectRef{Cluster: q.Get("cluster"), Key: q.Get("resource"), Namespace: q.Get("ns"), Name: q.Get("name")}
}

// metaView is what every object's detail shows.
type metaView struct {
	Ref         objectRef
	Kind        string
	UID         string
	Age         string
	Created     string
	Labels      []kv
	Annotations []kv
	Owners      []ownerLink
	Summary     []kv // the table cells kubectl shows, by column name
	Deleting    bool
}

type kv struct{ K, V string }

type ownerLink struct {
	Kind, Name, Href string
}

func sortedKV(m map[string]string) []kv {
	out := make([]kv, 0, len(m))
	for k, v := range m {
		out = append(out, kv{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].K < out[j].K })
	return out
}

// ownerKeys maps owner kinds to resource keys for links.
var ownerKeys = map[string]string{"ReplicaSet": "replicasets.apps", "Deployment": "deployments.apps",
	"StatefulSet": "statefulsets.apps", "DaemonSet": "daemonsets.apps", "Job": "jobs.batch", "CronJob": "cronjobs.batch",
	"Node": "nodes"}

func buildMeta(res *resources.Resource, ref objectRef, obj runtime.Object, now time.Time) metaView {
	m, _ := meta.Accessor(obj)
	mv := metaView{Ref: ref, Kind: res.GVK.Kind, UID: string(m.GetUID()), Age: humanAge(m.GetCreationTimestamp(), now),
		Created: m.GetCreationTimestamp().UTC().Format(time.RFC3339), Labels: sortedKV(m.GetLabels()),
		Annotations: sortedKV(m.GetAnnotations()), Deleting: m.GetDeletionTimestamp() != nil}
	delete := func(k string) {
		mv.Annotations = slices.DeleteFunc(mv.Annotations, func(a kv) bool { return a.K == k })
	}
	delete(corev1.LastAppliedConfigAnnotation)
	for _, o := range m.GetOwnerReferences() {
		ol := ownerLink{Kind: o.Kind, Name: o.Name}
		if k, ok := ownerKeys[o.Kind]; ok {
			ns := ref.Namespace
			if o.Kind == "Node" {
				ns = ""
			}
			ol.Href = objectHref(ref.Cluster, k, ns, o.Name)
		}
		mv.Owners = append(mv.Owners, ol)
	}
	cols := tableColumns(res)
	cells := tableCells(res, obj, now)
	for i := 1; i < len(cols) && i < len(cells); i++ {
		if v := cellString(cells[i]); v != "" && cols[i].Name != "Age" {
			mv.Summary = append(mv.Summary, kv{cols[i].Name, v})
		}
	}
	return mv
}

// condView is one status condition.
type condView struct {
	Type, Status, Reason, Message, Age string
}

func condClass(status string, good bool) string {
	if (status == "True") == good {
		return "ok"
	}
	if status == "Unknown" {
		return "warn"
	}
	return "bad"
}

// containerView is one container of a pod.
type containerView struct {
	Name, Image, State, StateClass, Reason, Started string
	Ready                                           bool
	Restarts                                        int32
	Init                                            bool
	Ports, Probes                                   []string
	Requests, Limits                                string
	LastTermination                                 string
}

type podView struct {
	Meta                                     metaView
	Node, NodeHref, IP, QoS, Phase, Priority string
	ServiceAccount                           string
	Containers                               []containerView
	Conditions                               []condView
	LogsHref                                 string
}

func buildPod(mv metaView, p *corev1.Pod, now time.Time) podView {
	v := podView{Meta: mv, Node: p.Spec.NodeName, IP: p.Status.PodIP, QoS: string(p.Status.QOSClass),
		Phase: string(p.Status.Phase), ServiceAccount: p.Spec.ServiceAccountName,
		LogsHref: Prefix + "/c/" + url.PathEscape(mv.Ref.Cluster) + "/logs/" + url.PathEscape(p.Namespace) + "/" + url.PathEscape(p.Name)}
	if p.Spec.Priority != nil {
		v.Priority = strconv.Itoa(int(*p.Spec.Priority))
	}
	if v.Node != "" {
		v.NodeHref = objectHref(mv.Ref.Cluster, "nodes", "", v.Node)
	}
	statuses := map[string]corev1.ContainerStatus{}
	for _, st := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		statuses[st.Name] = st
	}
	add := func(c corev1.Container, init bool) {
		cv := containerView{Name: c.Name, Image: c.Image, Init: init, State: "Waiting", StateClass: "warn",
			Requests: resourceList(c.Resources.Requests), Limits: resourceList(c.Resources.Limits)}
		for _, port := range c.Ports {
			cv.Ports = append(cv.Ports, fmt.Sprintf("%d/%s", port.ContainerPort, port.Protocol))
		}
		for _, pr := range []struct {
			name string
			p    *corev1.Probe
		}{{"startup", c.StartupProbe}, {"liveness", c.LivenessProbe}, {"readiness", c.ReadinessProbe}} {
			if pr.p != nil {
				cv.Probes = append(cv.Probes, pr.name+": "+describeProbe(pr.p))
			}
		}
		if st, ok := statuses[c.Name]; ok {
			cv.Ready, cv.Restarts = st.Ready, st.RestartCount
			switch {
			case st.State.Running != nil:
				cv.State, cv.StateClass = "Running", "ok"
				cv.Started = humanAge(st.State.Running.StartedAt, now)
			case st.State.Terminated != nil:
				t := st.State.Terminated
				cv.State, cv.Reason = "Terminated", fmt.Sprintf("%s (exit code %d)", t.Reason, t.ExitCode)
				cv.StateClass = "bad"
				if t.ExitCode == 0 {
					cv.StateClass = "ok"
				}
			case st.State.Waiting != nil:
				cv.Reason = st.State.Waiting.Reason
				if st.State.Waiting.Message != "" {
					cv.Reason += ": " + st.State.Waiting.Message
				}
				if strings.Contains(cv.Reason, "BackOff") || strings.Contains(cv.Reason, "Err") {
					cv.StateClass = "bad"
				}
			}
			if t := st.LastTerminationState.Terminated; t != nil {
				cv.LastTermination = fmt.Sprintf("%s (exit code %d) %s ago", t.Reason, t.ExitCode, humanAge(t.FinishedAt, now))
			}
		}
		v.Containers = append(v.Containers, cv)
	}
	for _, c := range p.Spec.InitContainers {
		add(c, true)
	}
	for _, c := range p.Spec.Containers {
		add(c, false)
	}
	for _, c := range p.Status.Conditions {
		v.Conditions = append(v.Conditions, condView{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason,
			Message: c.Message, Age: humanAge(c.LastTransitionTime, now)})
	}
	return v
}

func describeProbe(p *corev1.Probe) string {
	var what string
	switch {
	case p.HTTPGet != nil:
		u := url.URL{Scheme: strings.ToLower(string(p.HTTPGet.Scheme)),
			Host: net.JoinHostPort(p.HTTPGet.Host, p.HTTPGet.Port.String()), Path: p.HTTPGet.Path}
		what = "http-get " + u.String()
	case p.TCPSocket != nil:
		what = "tcp-socket " + p.TCPSocket.Host + ":" + p.TCPSocket.Port.String()
	case p.Exec != nil:
		what = "exec " + strings.Join(p.Exec.Command, " ")
	case p.GRPC != nil:
		what = fmt.Sprintf("grpc :%d", p.GRPC.Port)
	}
	return fmt.Sprintf("%s delay=%ds timeout=%ds period=%ds #success=%d #failure=%d", what, p.InitialDelaySeconds,
		p.TimeoutSeconds, p.PeriodSeconds, p.SuccessThreshold, p.FailureThreshold)
}

func resourceList(rl corev1.ResourceList) string {
	if len(rl) == 0 {
		return ""
	}
	names := make([]string, 0, len(rl))
	for n := range rl {
		names = append(names, string(n))
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		q := rl[corev1.ResourceName(n)]
		parts = append(parts, n+"="+humanQuantity(corev1.ResourceName(n), q))
	}
	return strings.Join(parts, ", ")
}

// nodeView is a node's detail.
type nodeView struct {
	Meta          metaView
	Unschedulable bool
	Conditions    []condView
	Taints        []string
	Addresses     []kv
	Info          []kv
	Capacity      []allocView
	PodCIDR       string
	Pods          []nodePod
	PodsHidden    bool // the user may not list pods
}

// allocView is one resource of a node: what pods request of what it can give.
type allocView struct {
	Name                          string
	Allocatable, Requests, Limits string
	Percent                       int
}

type nodePod struct {
	Namespace, Name, Href, Status, StatusClass, Requests, Age string
}

func buildNode(mv metaView, n *corev1.Node, pods []*corev1.Pod, podsHidden bool, now time.Time) nodeView {
	v := nodeView{Meta: mv, Unschedulable: n.Spec.Unschedulable, PodCIDR: n.Spec.PodCIDR, PodsHidden: podsHidden}
	for _, c := range n.Status.Conditions {
		v.Conditions = append(v.Conditions, condView{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason,
			Message: c.Message, Age: humanAge(c.LastHeartbeatTime, now)})
	}
	for _, t := range n.Spec.Taints {
		v.Taints = append(v.Taints, t.ToString())
	}
	for _, a := range n.Status.Addresses {
		v.Addresses = append(v.Addresses, kv{string(a.Type), a.Address})
	}
	i := n.Status.NodeInfo
	v.Info = []kv{{"OS image", i.OSImage}, {"Kernel", i.KernelVersion}, {"Architecture", i.Architecture},
		{"Container runtime", i.ContainerRuntimeVersion}, {"Kubelet", i.KubeletVersion}}
	req, lim := corev1.ResourceList{}, corev1.ResourceList{}
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		r, l := podRequests(p)
		addTo(req, r)
		addTo(lim, l)
		v.Pods = append(v.Pods, nodePod{Namespace: p.Namespace, Name: p.Name, Href: objectHref(mv.Ref.Cluster, "pods", p.Namespace, p.Name),
			Status: podStatus(p), StatusClass: statusClass(podStatus(p)), Requests: resourceList(r), Age: humanAge(p.CreationTimestamp, now)})
	}
	sort.Slice(v.Pods, func(a, b int) bool {
		return v.Pods[a].Namespace+"/"+v.Pods[a].Name < v.Pods[b].Namespace+"/"+v.Pods[b].Name
	})
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourcePods} {
		alloc, ok := n.Status.Allocatable[name]
		if !ok {
			continue
		}
		a := allocView{Name: string(name), Allocatable: humanQuantity(name, alloc)}
		r := req[name]
		if name == corev1.ResourcePods {
			r = *resource.NewQuantity(int64(len(v.Pods)), resource.DecimalSI)
		}
		l := lim[name]
		a.Requests, a.Limits = humanQuantity(name, r), humanQuantity(name, l)
		if alloc.MilliValue() > 0 {
			a.Percent = int(r.MilliValue() * 100 / alloc.MilliValue())
		}
		v.Capacity = append(v.Capacity, a)
	}
	return v
}

// humanQuantity is q as people read it: CPU in cores ("2.5 cores"), memory and storage in binary units
// ("23.5 GiB", not "24683748Ki"), anything else as Kubernetes writes it.
func humanQuantity(name corev1.ResourceName, q resource.Quantity) string {
	switch {
	case q.IsZero():
		return "0"
	case name == corev1.ResourceCPU:
		cores := float64(q.MilliValue()) / 1000
		if cores == 1 {
			return "1 core"
		}
		return strconv.FormatFloat(cores, 'f', -1, 64) + " cores"
	case name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage || name == corev1.ResourceStorage ||
		strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
		return humanBytes(q.Value())
	}
	return q.String()
}

// humanBytes is n bytes in the largest binary unit that keeps at least 1, with at most one decimal.
func humanBytes(n int64) string {
	const units = "KMGTPE"
	v, unit := float64(n), ""
	for i := 0; v >= 1024 && i < len(units); i++ {
		v, unit = v/1024, units[i:i+1]+"iB"
	}
	if unit == "" {
		return strconv.FormatInt(n, 10) + " B"
	}
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) + " " + unit
}

// podRequests is a pod's effective requests and limits: the larger of its containers' sum and any init
// container's, as the scheduler counts them.
func podRequests(p *corev1.Pod) (corev1.ResourceList, corev1.ResourceList) {
	req, lim := corev1.ResourceList{}, corev1.ResourceList{}
	for _, c := range p.Spec.Containers {
		addTo(req, c.Resources.Requests)
		addTo(lim, c.Resources.Limits)
	}
	for _, c := range p.Spec.InitContainers {
		maxTo(req, c.Resources.Requests)
		maxTo(lim, c.Resources.Limits)
	}
	return req, lim
}

func addTo(dst, src corev1.ResourceList) {
	for n, q := range src {
		cur := dst[n]
		cur.Add(q)
		dst[n] = cur
	}
}

func maxTo(dst, src corev1.ResourceList) {
	for n, q := range src {
		if cur, ok := dst[n]; !ok || q.Cmp(cur) > 0 {
			dst[n] = q.DeepCopy()
		}
	}
}

// podStatus is kubectl's STATUS of a pod (the table's third cell).
func podStatus(p *corev1.Pod) string {
	if podsRes == nil || podsRes.Table == nil {
		return string(p.Status.Phase)
	}
	return cellString(podsRes.Table.Cells(p, time.Time{})[2])
}

// podsRes is the pods resource of the built-in registry, for kubectl's pod status.
var podsRes = func() *resources.Resource {
	r, _ := resources.Default().Lookup(corev1.SchemeGroupVersion.WithResource("pods"))
	return r
}()

// deploymentView is a Deployment's detail: rollout progress and revisions.
type deploymentView struct {
	Meta                                      metaView
	Desired, Updated, Ready, Available, Total int32
	Paused                                    bool
	Strategy                                  string
	Selector                                  string
	Progress                                  string // kubectl rollout status's sentence
	ProgressClass                             string
	Conditions                                []condView
	Revisions                                 []revisionView
	Images                                    []string
	PodsHref                                  string
}

type revisionView struct {
	Revision                          int64
	Name, Href, Images, Age, Replicas string
	Current                           bool
	ChangeCause                       string
}

const revisionAnnotation = "deployment.kubernetes.io/revision"

func buildDeployment(mv metaView, dep *appsv1.Deployment, rss []*appsv1.ReplicaSet, now time.Time) deploymentView {
	v := deploymentView{Meta: mv, Updated: dep.Status.UpdatedReplicas, Ready: dep.Status.ReadyReplicas,
		Available: dep.Status.AvailableReplicas, Total: dep.Status.Replicas, Paused: dep.Spec.Paused,
		Strategy: string(dep.Spec.Strategy.Type)}
	v.Desired = 1
	if dep.Spec.Replicas != nil {
		v.Desired = *dep.Spec.Replicas
	}
	if sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector); err == nil {
		v.Selector = sel.String()
		v.PodsHref = Prefix + "/c/" + url.PathEscape(mv.Ref.Cluster) + "/r/pods?" +
			url.Values{"ns": {dep.Namespace}, "label": {v.Selector}}.Encode()
	}
	for _, c := range dep.Spec.Template.Spec.Containers {
		v.Images = append(v.Images, c.Image)
	}
	v.Progress, v.ProgressClass = rolloutStatus(dep)
	for _, c := range dep.Status.Conditions {
		v.Conditions = append(v.Conditions, condView{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason,
			Message: c.Message, Age: humanAge(c.LastUpdateTime, now)})
	}
	current := dep.Annotations[revisionAnnotation]
	for _, rs := range rss {
		rev, _ := strconv.ParseInt(rs.Annotations[revisionAnnotation], 10, 64)
		var images []string
		for _, c := range rs.Spec.Template.Spec.Containers {
			images = append(images, c.Image)
		}
		want := int32(0)
		if rs.Spec.Replicas != nil {
			want = *rs.Spec.Replicas
		}
		v.Revisions = append(v.Revisions, revisionView{Revision: rev, Name: rs.Name,
			Href: objectHref(mv.Ref.Cluster, "replicasets.apps", rs.Namespace, rs.Name), Images: strings.Join(images, ", "),
			Age: humanAge(rs.CreationTimestamp, now), Replicas: fmt.Sprintf("%d/%d", rs.Status.ReadyReplicas, want),
			Current: rs.Annotations[revisionAnnotation] == current, ChangeCause: rs.Annotations["kubernetes.io/change-cause"]})
	}
	sort.Slice(v.Revisions, func(i, j int) bool { return v.Revisions[i].Revision > v.Revisions[j].Revision })
	return v
}

// rolloutStatus is `kubectl rollout status`'s sentence for a Deployment, and a colour.
func rolloutStatus(d *appsv1.Deployment) (string, string) {
	if d.Generation > d.Status.ObservedGeneration {
		return "Waiting for deployment spec update to be observed...", "warn"
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			return fmt.Sprintf("deployment %q exceeded its progress deadline", d.Name), "bad"
		}
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	switch {
	case d.Spec.Paused:
		return "Rollout paused", "warn"
	case d.Status.UpdatedReplicas < want:
		return fmt.Sprintf("Waiting for deployment %q rollout to finish: %d out of %d new replicas have been updated...",
			d.Name, d.Status.UpdatedReplicas, want), "warn"
	case d.Status.Replicas > d.Status.UpdatedReplicas:
		return fmt.Sprintf("Waiting for deployment %q rollout to finish: %d old replicas are pending termination...",
			d.Name, d.Status.Replicas-d.Status.UpdatedReplicas), "warn"
	case d.Status.AvailableReplicas < d.Status.UpdatedReplicas:
		return fmt.Sprintf("Waiting for deployment %q rollout to finish: %d of %d updated replicas are available...",
			d.Name, d.Status.AvailableReplicas, d.Status.UpdatedReplicas), "warn"
	}
	return fmt.Sprintf("deployment %q successfully rolled out", d.Name), "ok"
}

// ownedBy lists the entries of a collection in namespace owned by uid (controller reference).
func ownedBy(col *watchcache.Collection, namespace string, uid string) []runtime.Object {
	entries, _ := col.List(namespace)
	var out []runtime.Object
	for _, e := range entries {
		m, err := meta.Accessor(e.Object)
		if err != nil {
			continue
		}
		if ref := metav1.GetControllerOfNoCopy(m); ref != nil && string(ref.UID) == uid {
			out = append(out, e.Object)
		}
	}
	return out
}

// secretView lists a Secret's keys; values stay hidden until revealed one at a time (audited).
type secretView struct {
	Meta metaView
	Type string
	Keys []secretKey
}

type secretKey struct {
	Key   string
	Bytes int
}

// configMapView shows a ConfigMap's data.
type configMapView struct {
	Meta   metaView
	Data   []kv
	Binary []secretKey
}

// serviceView shows a Service's ports and selector.
type serviceView struct {
	Meta      metaView
	Type      string
	ClusterIP string
	Ports     []string
	Selector  string
	PodsHref  string
}

func buildService(mv metaView, s *corev1.Service) serviceView {
	v := serviceView{Meta: mv, Type: string(s.Spec.Type), ClusterIP: s.Spec.ClusterIP}
	for _, p := range s.Spec.Ports {
		desc := fmt.Sprintf("%d/%s → %s", p.Port, p.Protocol, p.TargetPort.String())
		if p.Name != "" {
			desc = p.Name + " " + desc
		}
		if p.NodePort != 0 {
			desc += fmt.Sprintf(" (node port %d)", p.NodePort)
		}
		v.Ports = append(v.Ports, desc)
	}
	if len(s.Spec.Selector) > 0 {
		var parts []string
		for _, kv := range sortedKV(s.Spec.Selector) {
			parts = append(parts, kv.K+"="+kv.V)
		}
		v.Selector = strings.Join(parts, ",")
		v.PodsHref = Prefix + "/c/" + url.PathEscape(mv.Ref.Cluster) + "/r/pods?" +
			url.Values{"ns": {s.Namespace}, "label": {v.Selector}}.Encode()
	}
	return v
}

func detailDeps(d *Dashboard, q url.Values) ([]dep, error) {
	res, err := d.resource(q.Get("resource"))
	if err != nil {
		return nil, err
	}
	ns := q.Get("ns")
	deps := []dep{{res: res, namespace: ns}}
	switch resourceKey(res) {
	case "nodes":
		deps = append(deps, dep{res: d.byKey["pods"]})
	case "deployments.apps":
		deps = append(deps, dep{res: d.byKey["replicasets.apps"], namespace: ns})
	}
	return deps, nil
}

// renderDetailRegion renders an object's detail, authorized for the user at this moment.
func renderDetailRegion(ctx context.Context, d *Dashboard, s *scope, q url.Values) (templ.Component, error) {
	ref := refFromQuery(q)
	ref.Cluster = s.cluster.ID
	res, err := d.resource(ref.Key)
	if err != nil {
		return nil, err
	}
	if !res.Namespaced {
		ref.Namespace = ""
	}
	if err := d.allow(ctx, s, "get", res, ref.Namespace, ref.Name); err != nil {
		return nil, err
	}
	col, err := d.collection(ctx, s, res)
	if err != nil {
		return nil, err
	}
	e, ok, _ := col.Get(ref.Namespace, ref.Name)
	if !ok {
		return nil, gone("%s %s does not exist (any more).", res.GVK.Kind, ref.Name)
	}
	now := d.cfg.Now()
	mv := buildMeta(res, ref, e.Object, now)
	switch obj := e.Object.(type) {
	case *corev1.Pod:
		return podDetail(buildPod(mv, obj, now)), nil
	case *corev1.Node:
		pods, hidden := d.podsOnNode(ctx, s, obj.Name)
		return nodeDetail(buildNode(mv, obj, pods, hidden, now)), nil
	case *appsv1.Deployment:
		var rss []*appsv1.ReplicaSet
		if rsRes := d.byKey["replicasets.apps"]; rsRes != nil {
			if ok, _, _ := d.can(ctx, s, "list", rsRes, obj.Namespace, ""); ok {
				if rcol, err := d.collection(ctx, s, rsRes); err == nil {
					for _, o := range ownedBy(rcol, obj.Namespace, string(obj.UID)) {
						rss = append(rss, o.(*appsv1.ReplicaSet))
					}
				}
			}
		}
		return deploymentDetail(buildDeployment(mv, obj, rss, now)), nil
	case *corev1.Secret:
		v := secretView{Meta: mv, Type: string(obj.Type)}
		for k, b := range obj.Data {
			v.Keys = append(v.Keys, secretKey{Key: k, Bytes: len(b)})
		}
		sort.Slice(v.Keys, func(i, j int) bool { return v.Keys[i].Key < v.Keys[j].Key })
		return secretDetail(v), nil
	case *corev1.ConfigMap:
		v := configMapView{Meta: mv, Data: sortedKV(obj.Data)}
		for k, b := range obj.BinaryData {
			v.Binary = append(v.Binary, secretKey{Key: k, Bytes: len(b)})
		}
		return configMapDetail(v), nil
	case *corev1.Service:
		return serviceDetail(buildService(mv, obj)), nil
	}
	return genericDetail(mv), nil
}

// podsOnNode lists the pods bound to node, when the user may list pods in every namespace.
func (d *Dashboard) podsOnNode(ctx context.Context, s *scope, node string) ([]*corev1.Pod, bool) {
	res := d.byKey["pods"]
	if ok, _, _ := d.can(ctx, s, "list", res, "", ""); !ok {
		return nil, true
	}
	col, err := d.collection(ctx, s, res)
	if err != nil {
		return nil, true
	}
	var pods []*corev1.Pod
	if col.Indexed() {
		for _, e := range col.ListIndexed(s.cluster.ID, node) {
			pods = append(pods, e.Object.(*corev1.Pod))
		}
		return pods, false
	}
	entries, _ := col.List("")
	for _, e := range entries {
		if p := e.Object.(*corev1.Pod); p.Spec.NodeName == node {
			pods = append(pods, p)
		}
	}
	return pods, false
}

func logsHref(ref objectRef) string {
	return Prefix + "/c/" + url.PathEscape(ref.Cluster) + "/logs/" + url.PathEscape(ref.Namespace) + "/" + url.PathEscape(ref.Name)
}
