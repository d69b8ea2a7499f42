package controllers

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// epTestService is a Service of default selecting app=<selector>, with a named target port "http" (port 80)
// and a numbered one (9000 → 9100).
func epTestService(name, selector string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"tier": "web"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": selector}, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromString("http")},
			{Name: "metrics", Port: 9000, TargetPort: intstr.FromInt32(9100)}}}}
}

// epTestPod describes a pod for epCreatePod.
type epTestPod struct {
	name, app, ip, node string
	http                int32 // the container port named http (0: none)
	ready               bool
}

// epCreatePod creates a pod in default, then writes its status as a kubelet would: an IP (when given), phase
// Running and the Ready condition.
func epCreatePod(t testing.TB, cs kubernetes.Interface, p epTestPod) *corev1.Pod {
	t.Helper()
	c := corev1.Container{Name: "c", Image: "nginx"}
	if p.http != 0 {
		c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: p.http}}
	}
	pod, err := cs.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Labels: map[string]string{"app": p.app}},
		Spec:       corev1.PodSpec{NodeName: p.node, Containers: []corev1.Container{c}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := corev1.ConditionFalse
	if p.ready {
		ready = corev1.ConditionTrue
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
	if p.ip != "" {
		pod.Status.PodIP, pod.Status.PodIPs = p.ip, []corev1.PodIP{{IP: p.ip}}
	}
	if pod, err = cs.CoreV1().Pods("default").UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return pod
}

// epSlicesOf lists the managed slices of a Service.
func epSlicesOf(t *testing.T, cs kubernetes.Interface, svc string) []discoveryv1.EndpointSlice {
	t.Helper()
	list, err := cs.DiscoveryV1().EndpointSlices("default").List(t.Context(), metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + svc + "," + discoveryv1.LabelManagedBy + "=" + epSliceManager})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// epByPod is every endpoint of a Service's slices by pod name, with its slice's ports ("http:8080,metrics:9100").
func epByPod(t *testing.T, cs kubernetes.Interface, svc string) (eps map[string]discoveryv1.Endpoint, ports map[string]string) {
	t.Helper()
	eps, ports = map[string]discoveryv1.Endpoint{}, map[string]string{}
	for _, s := range epSlicesOf(t, cs, svc) {
		var ps []string
		for _, p := range s.Ports {
			ps = append(ps, fmt.Sprintf("%s:%d", *p.Name, *p.Port))
		}
		for _, ep := range s.Endpoints {
			eps[ep.TargetRef.Name], ports[ep.TargetRef.Name] = ep, strings.Join(ps, ",")
		}
	}
	return eps, ports
}

func epHasPods(t *testing.T, cs kubernetes.Interface, svc string, want ...string) func() bool {
	return func() bool {
		eps, _ := epByPod(t, cs, svc)
		return slices.Equal(slices.Sorted(maps.Keys(eps)), slices.Sorted(slices.Values(want)))
	}
}

// epConditions renders an endpoint's conditions as "ready serving terminating", each T or F.
func epConditions(ep discoveryv1.Endpoint) string {
	b := func(p *bool) string {
		if p != nil && *p {
			return "T"
		}
		return "F"
	}
	return b(ep.Conditions.Ready) + b(ep.Conditions.Serving) + b(ep.Conditions.Terminating)
}

func TestEndpointSliceContentsConditionsAndSelection(t *testing.T) {
	d := newDeps(t)
	runControllers(t, d)
	cs := admin(t, d, "c1")
	ctx := t.Context()
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1",
		Labels: map[string]string{corev1.LabelTopologyZone: "zone-a"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := cs.CoreV1().Services("default").Create(ctx, epTestService("web", "web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uids := map[string]types.UID{}
	for _, p := range []epTestPod{
		{name: "ready", app: "web", ip: "10.1.0.1", http: 8080, ready: true},
		{name: "unready", app: "web", ip: "10.1.0.2", http: 8080},
		{name: "noip", app: "web", http: 8080, ready: true},
		{name: "alt", app: "web", ip: "10.1.0.4", http: 8081, ready: true},
		{name: "onnode", app: "web", ip: "10.1.0.5", http: 8080, ready: true, node: "n1"},
		{name: "other", app: "other", ip: "10.1.0.6", http: 8080, ready: true},
	} {
		uids[p.name] = epCreatePod(t, cs, p).UID
	}
	eventually(t, "the selected pods with an IP in slices", epHasPods(t, cs, "web", "ready", "unready", "alt", "onnode"))

	// Named target ports resolve per pod: "alt" serves http on 8081 and is in a slice of its own.
	eps, ports := epByPod(t, cs, "web")
	wantPorts := map[string]string{"ready": "http:8080,metrics:9100", "unready": "http:8080,metrics:9100",
		"onnode": "http:8080,metrics:9100", "alt": "http:8081,metrics:9100"}
	if diff := cmp.Diff(wantPorts, ports); diff != "" {
		t.Fatalf("ports by pod (-want +got):\n%s", diff)
	}
	for name, want := range map[string]string{"ready": "TTF", "unready": "FFF", "alt": "TTF", "onnode": "TTF"} {
		ep := eps[name]
		if got := epConditions(ep); got != want {
			t.Errorf("pod %s: conditions %s, want %s", name, got, want)
		}
		if ep.TargetRef.Kind != "Pod" || ep.TargetRef.UID != uids[name] || len(ep.Addresses) != 1 {
			t.Errorf("pod %s: targetRef %+v, addresses %v", name, ep.TargetRef, ep.Addresses)
		}
	}
	if ep := eps["onnode"]; epDeref(ep.NodeName) != "n1" || epDeref(ep.Zone) != "zone-a" {
		t.Errorf("pod onnode: nodeName %q zone %q, want n1 and zone-a", epDeref(ep.NodeName), epDeref(ep.Zone))
	}
	got := epSlicesOf(t, cs, "web")
	if len(got) != 2 {
		t.Fatalf("%d slices, want 2 (one per port mapping)", len(got))
	}
	for _, s := range got {
		ref := metav1.GetControllerOf(&s)
		if s.AddressType != discoveryv1.AddressTypeIPv4 || s.GenerateName != "web-" || !strings.HasPrefix(s.Name, "web-") ||
			ref == nil || ref.UID != svc.UID || ref.Kind != "Service" || s.Labels["tier"] != "web" {
			t.Errorf("slice %s: addressType %s, generateName %q, controller %+v, labels %v", s.Name, s.AddressType,
				s.GenerateName, ref, s.Labels)
		}
	}

	// A pod being deleted (gracefully: it is bound to a node) is a terminating endpoint, still serving.
	if err := cs.CoreV1().Pods("default").Delete(ctx, "onnode", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "onnode terminating", func() bool {
		eps, _ := epByPod(t, cs, "web")
		return epConditions(eps["onnode"]) == "FTT"
	})

	// A pod whose labels stop matching leaves.
	if _, err := cs.CoreV1().Pods("default").Patch(ctx, "ready", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"app":"other"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the relabelled pod out", epHasPods(t, cs, "web", "unready", "alt", "onnode"))

	// A new selector selects other pods.
	if _, err := cs.CoreV1().Services("default").Patch(ctx, "web", types.MergePatchType,
		[]byte(`{"spec":{"selector":{"app":"other"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new selector's pods", epHasPods(t, cs, "web", "ready", "other"))

	// Without a selector the controller's slices go.
	if _, err := cs.CoreV1().Services("default").Patch(ctx, "web", types.MergePatchType,
		[]byte(`{"spec":{"selector":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "no slices without a selector", func() bool { return len(epSlicesOf(t, cs, "web")) == 0 })
}

func TestEndpointSliceManyPods(t *testing.T) {
	d := newDeps(t)
	runControllers(t, d)
	cs := admin(t, d, "c1")
	// The pods first: pods arriving one by one while the Service exists may fragment the slices (a batch that
	// fits no existing slice whole gets a new one, as upstream, to keep writes few).
	var names []string
	for i := range 150 {
		name := fmt.Sprintf("big-%03d", i)
		epCreatePod(t, cs, epTestPod{name: name, app: "big", ip: fmt.Sprintf("10.2.%d.%d", i/200, i%200+1), http: 8080, ready: true})
		names = append(names, name)
	}
	if _, err := cs.CoreV1().Services("default").Create(t.Context(), epTestService("big", "big"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "150 endpoints", epHasPods(t, cs, "big", names...))
	eventually(t, "two full-enough slices", func() bool {
		ss := epSlicesOf(t, cs, "big")
		total := 0
		for _, s := range ss {
			if len(s.Endpoints) > epMaxEndpointsPerSlice {
				t.Fatalf("slice %s has %d endpoints, more than %d", s.Name, len(s.Endpoints), epMaxEndpointsPerSlice)
			}
			total += len(s.Endpoints)
		}
		return len(ss) == 2 && total == 150
	})
	// Scaling down keeps every remaining pod and no empty slice.
	for _, name := range names[:120] {
		if err := cs.CoreV1().Pods("default").Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "30 endpoints", epHasPods(t, cs, "big", names[120:]...))
	eventually(t, "no empty slice", func() bool {
		for _, s := range epSlicesOf(t, cs, "big") {
			if len(s.Endpoints) == 0 {
				return false
			}
		}
		return true
	})
}

func TestEndpointSlicePublishNotReadyAndTenancy(t *testing.T) {
	d := newDeps(t)
	runControllers(t, d)
	c1, c2 := admin(t, d, "c1"), admin(t, d, "c2")
	// Pods of c1 match the selector of a Service of the same name in c2: c2 must never see them.
	for i, name := range []string{"a", "b"} {
		epCreatePod(t, c1, epTestPod{name: name, app: "web", ip: fmt.Sprintf("10.3.0.%d", i+1), http: 8080, ready: true})
	}
	svc := epTestService("web", "web")
	svc.Spec.PublishNotReadyAddresses = true
	if _, err := c2.CoreV1().Services("default").Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "c2's placeholder slice", func() bool {
		ss := epSlicesOf(t, c2, "web")
		return len(ss) == 1 && len(ss[0].Endpoints) == 0 && len(ss[0].Ports) == 0
	})
	// publishNotReadyAddresses: a pod that is not ready is a ready endpoint (serving still tells the truth).
	epCreatePod(t, c2, epTestPod{name: "slow", app: "web", ip: "10.4.0.1", http: 8080})
	eventually(t, "c2's pod, and only it", func() bool {
		eps, _ := epByPod(t, c2, "web")
		return len(eps) == 1 && epConditions(eps["slow"]) == "TFF"
	})
	if ss := epSlicesOf(t, c2, "web"); len(ss) != 1 {
		t.Fatalf("c2 has %d slices, want the placeholder reused", len(ss))
	}
	if ss := epSlicesOf(t, c1, "web"); len(ss) != 0 {
		t.Fatalf("c1 has slices for a Service of c2: %v", ss)
	}
}

// TestEndpointSlicePlan checks the pure planner: nothing to write when nothing changed, changes in place,
// splitting, stale owners, and the placeholder.
func TestEndpointSlicePlan(t *testing.T) {
	svc := epTestService("web", "web")
	svc.UID = "svc-uid"
	pods := epBenchPods(250)
	apply := func(plan epSlicePlan, existing []*discoveryv1.EndpointSlice) []*discoveryv1.EndpointSlice {
		byName := map[string]*discoveryv1.EndpointSlice{}
		for _, s := range existing {
			byName[s.Name] = s
		}
		for _, s := range plan.deletes {
			delete(byName, s.Name)
		}
		for _, s := range plan.updates {
			byName[s.Name] = s
		}
		for i, s := range plan.creates {
			s = s.DeepCopy()
			s.Name = fmt.Sprintf("%s%d-%d", s.GenerateName, len(byName), i)
			byName[s.Name] = s
		}
		return slices.Collect(maps.Values(byName))
	}
	plan := func(pods []*corev1.Pod, existing []*discoveryv1.EndpointSlice) epSlicePlan {
		groups, missing := epDesiredEndpoints(svc, pods, func(string) (string, bool) { return "", true })
		if len(missing) > 0 {
			t.Fatalf("missing nodes %v", missing)
		}
		return epPlanSlices(svc, groups, existing)
	}
	counts := func(p epSlicePlan) string {
		return fmt.Sprintf("%d creates %d updates %d deletes", len(p.creates), len(p.updates), len(p.deletes))
	}

	first := plan(pods, nil)
	if got := counts(first); got != "3 creates 0 updates 0 deletes" {
		t.Fatalf("250 pods from nothing: %s", got)
	}
	state := apply(first, nil)
	if got := counts(plan(pods, state)); got != "0 creates 0 updates 0 deletes" {
		t.Fatalf("nothing changed: %s", got)
	}
	// One pod gone and one not ready: the slices holding them are updated in place.
	changed := slices.Clone(pods[1:])
	changed[0] = changed[0].DeepCopy()
	changed[0].Status.Conditions = nil
	p := plan(changed, state)
	if got := counts(p); got != "0 creates 1 updates 0 deletes" {
		t.Fatalf("a pod gone, one not ready: %s", got)
	}
	// Slices of an older Service of the same name are replaced, reusing them by name.
	stale := slices.Clone(state)
	for i, s := range stale {
		s = s.DeepCopy()
		s.OwnerReferences[0].UID = "old"
		stale[i] = s
	}
	// (Only slices owned by this Service are reused: the old ones are deleted and three made anew.)
	if got := counts(plan(pods, stale)); got != "3 creates 0 updates 3 deletes" {
		t.Fatalf("stale owner: %s", got)
	}
	// No pods left: one slice is kept as the (empty) placeholder, the others go.
	p = plan(nil, state)
	if got := counts(p); got != "0 creates 1 updates 2 deletes" {
		t.Fatalf("all pods gone: %s", got)
	}
	if u := p.updates[0]; len(u.Endpoints) != 0 || len(u.Ports) != 0 {
		t.Fatalf("placeholder has %d endpoints and ports %v", len(u.Endpoints), u.Ports)
	}
	empty := apply(p, state)
	if got := counts(plan(nil, empty)); got != "0 creates 0 updates 0 deletes" {
		t.Fatalf("placeholder kept: %s", got)
	}
}

// TestEndpointSliceEndpointEqual: the hand-written comparison covers every field of an Endpoint.
func TestEndpointSliceEndpointEqual(t *testing.T) {
	if n := reflect.TypeFor[discoveryv1.Endpoint]().NumField(); n != 8 {
		t.Fatalf("discovery/v1 Endpoint has %d fields, epEndpointEqual knows 8: compare the new ones", n)
	}
	base := func() discoveryv1.Endpoint {
		return epEndpoint(epTestService("web", "web"), epBenchPods(1)[0], []string{"10.0.0.1"}, "zone-a")
	}
	if !epEndpointEqual(base(), base()) {
		t.Fatal("equal endpoints compare unequal")
	}
	for name, change := range map[string]func(*discoveryv1.Endpoint){
		"address":     func(e *discoveryv1.Endpoint) { e.Addresses = []string{"10.0.0.2"} },
		"ready":       func(e *discoveryv1.Endpoint) { e.Conditions.Ready = new(false) },
		"serving":     func(e *discoveryv1.Endpoint) { e.Conditions.Serving = nil },
		"terminating": func(e *discoveryv1.Endpoint) { e.Conditions.Terminating = new(true) },
		"hostname":    func(e *discoveryv1.Endpoint) { e.Hostname = new("h") },
		"targetRef":   func(e *discoveryv1.Endpoint) { e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: "x"} },
		"topology":    func(e *discoveryv1.Endpoint) { e.DeprecatedTopology = map[string]string{"a": "b"} },
		"nodeName":    func(e *discoveryv1.Endpoint) { e.NodeName = new("n2") },
		"zone":        func(e *discoveryv1.Endpoint) { e.Zone = nil },
		"hints":       func(e *discoveryv1.Endpoint) { e.Hints = &discoveryv1.EndpointHints{} },
	} {
		e := base()
		change(&e)
		if epEndpointEqual(base(), e) || epEndpointEqual(e, base()) {
			t.Errorf("a different %s compares equal", name)
		}
	}
}

// epBenchPods makes n ready pods of app=web with IPs and an http port.
func epBenchPods(n int) []*corev1.Pod {
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		ip := fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256+1)
		pods[i] = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%05d", i), Namespace: "default",
				UID: types.UID(fmt.Sprintf("uid-%d", i)), Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	return pods
}

// BenchmarkEndpointSliceDesired measures building and planning the slices of a Service of 1,000 pods: from
// nothing, and against slices already up to date (the common case: a no-op).
func BenchmarkEndpointSliceDesired(b *testing.B) {
	svc := epTestService("web", "web")
	svc.UID = "svc-uid"
	pods := epBenchPods(1000)
	zone := func(string) (string, bool) { return "zone-a", true }
	build := func(existing []*discoveryv1.EndpointSlice) epSlicePlan {
		groups, _ := epDesiredEndpoints(svc, pods, zone)
		return epPlanSlices(svc, groups, existing)
	}
	var existing []*discoveryv1.EndpointSlice
	for i, s := range build(nil).creates {
		s.Name = fmt.Sprintf("web-%d", i)
		existing = append(existing, s)
	}
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			build(nil)
		}
	})
	b.Run("steady", func(b *testing.B) {
		for b.Loop() {
			if p := build(existing); len(p.creates)+len(p.updates)+len(p.deletes) > 0 {
				b.Fatal("writes planned for slices already up to date")
			}
		}
	})
}
