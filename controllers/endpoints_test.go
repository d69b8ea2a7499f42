package controllers

//lint:file-ignore SA1019 core/v1 Endpoints is deprecated but still served.

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

func epGetEndpoints(t *testing.T, cs kubernetes.Interface, name string) (*corev1.Endpoints, bool) {
	t.Helper()
	ep, err := cs.CoreV1().Endpoints("default").Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return ep, true
}

func TestEndpoints(t *testing.T) {
	d := newDeps(t)
	runControllers(t, d)
	cs := admin(t, d, "c1")
	ctx := t.Context()
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := map[string]*corev1.Pod{}
	for _, p := range []epTestPod{
		{name: "r1", app: "api", ip: "10.5.0.1", http: 8080, ready: true},
		{name: "r2", app: "api", ip: "10.5.0.2", http: 8080},
		{name: "alt", app: "api", ip: "10.5.0.3", http: 8081, ready: true},
		{name: "term", app: "api", ip: "10.5.0.4", http: 8080, ready: true, node: "n1"},
		{name: "noip", app: "api", http: 8080, ready: true},
	} {
		pods[p.name] = epCreatePod(t, cs, p)
	}
	if err := cs.CoreV1().Pods("default").Delete(ctx, "term", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Services("default").Create(ctx, epTestService("api", "api"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	addr := func(name string) corev1.EndpointAddress {
		p := pods[name]
		a := corev1.EndpointAddress{IP: p.Status.PodIP, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: p.Name, UID: p.UID}}
		if p.Spec.NodeName != "" {
			a.NodeName = new(p.Spec.NodeName)
		}
		return a
	}
	ports := func(http int32) []corev1.EndpointPort {
		return []corev1.EndpointPort{{Name: "http", Port: http, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", Port: 9100, Protocol: corev1.ProtocolTCP}}
	}
	// Ready and not-ready pods per port mapping; the terminating pod and the one without an IP are not in.
	want := []corev1.EndpointSubset{
		{Addresses: []corev1.EndpointAddress{addr("r1")}, NotReadyAddresses: []corev1.EndpointAddress{addr("r2")}, Ports: ports(8080)},
		{Addresses: []corev1.EndpointAddress{addr("alt")}, Ports: ports(8081)},
	}
	var got *corev1.Endpoints
	eventually(t, "the Endpoints", func() bool {
		var ok bool
		got, ok = epGetEndpoints(t, cs, "api")
		return ok && cmp.Diff(want, got.Subsets) == ""
	})
	wantLabels := map[string]string{"tier": "web", epEndpointsManagedBy: epEndpointsManager}
	if diff := cmp.Diff(wantLabels, got.Labels); diff != "" {
		t.Fatalf("labels (-want +got):\n%s", diff)
	}
	if _, ok := got.Annotations[corev1.EndpointsOverCapacity]; ok {
		t.Fatalf("over-capacity annotation on %d addresses", 3)
	}

	// Pod readiness moves an address; a deleted Endpoints is recreated.
	r2 := pods["r2"].DeepCopy()
	r2.Status.Conditions[0].Status = corev1.ConditionTrue
	if _, err := cs.CoreV1().Pods("default").UpdateStatus(ctx, r2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want[0].Addresses, want[0].NotReadyAddresses = []corev1.EndpointAddress{addr("r1"), addr("r2")}, nil
	if err := cs.CoreV1().Endpoints("default").Delete(ctx, "api", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "r2 ready, the Endpoints back", func() bool {
		got, ok := epGetEndpoints(t, cs, "api")
		return ok && cmp.Diff(want, got.Subsets) == ""
	})

	// A Service without a selector: its users' Endpoints are theirs.
	manual := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "manual"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := cs.CoreV1().Services("default").Create(ctx, manual, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mine, err := cs.CoreV1().Endpoints("default").Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "manual"},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "192.0.2.1"}}, Ports: []corev1.EndpointPort{{Port: 80}}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Losing its selector, a Service loses the controller's Endpoints; deleted, it loses them all.
	if _, err := cs.CoreV1().Services("default").Patch(ctx, "api", types.MergePatchType, []byte(`{"spec":{"selector":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "api's Endpoints deleted", func() bool { _, ok := epGetEndpoints(t, cs, "api"); return !ok })
	if _, err := cs.CoreV1().Services("default").Patch(ctx, "api", types.MergePatchType, []byte(`{"spec":{"selector":{"app":"api"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "api's Endpoints back with the selector", func() bool { _, ok := epGetEndpoints(t, cs, "api"); return ok })
	eventually(t, "api's slices", func() bool { return len(epSlicesOf(t, cs, "api")) > 0 })
	// (A negative check, after all that work: the user's Endpoints were never written.)
	if got, ok := epGetEndpoints(t, cs, "manual"); !ok || got.ResourceVersion != mine.ResourceVersion {
		t.Fatalf("the Endpoints of a Service without a selector were changed or deleted: %+v", got)
	}
	for _, name := range []string{"api", "manual"} {
		if err := cs.CoreV1().Services("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the Endpoints of deleted Services deleted", func() bool {
		_, api := epGetEndpoints(t, cs, "api")
		_, manual := epGetEndpoints(t, cs, "manual")
		return !api && !manual
	})
	eventually(t, "api's slices collected", func() bool { return len(epSlicesOf(t, cs, "api")) == 0 })
}

// TestEndpointsTruncate checks the over-capacity cut: ready addresses first, shared out in proportion.
func TestEndpointsTruncate(t *testing.T) {
	addrs := func(n int) []corev1.EndpointAddress {
		out := make([]corev1.EndpointAddress, n)
		for i := range out {
			out[i].IP = fmt.Sprintf("10.0.0.%d", i+1)
		}
		return out
	}
	type sizes [][2]int // per subset: ready, not ready
	for _, tc := range []struct {
		name      string
		in, want  sizes
		truncated bool
	}{
		{"under capacity", sizes{{3, 2}, {4, 1}}, sizes{{3, 2}, {4, 1}}, false},
		{"exactly at capacity", sizes{{6, 4}}, sizes{{6, 4}}, false},
		{"not-ready cut", sizes{{4, 4}, {2, 4}}, sizes{{4, 2}, {2, 2}}, true},
		{"ready cut, not-ready dropped", sizes{{10, 3}, {5, 3}}, sizes{{7, 0}, {3, 0}}, true},
		{"not-ready cut in proportion", sizes{{2, 9}, {0, 3}}, sizes{{2, 6}, {0, 2}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var subsets []corev1.EndpointSubset
			for _, s := range tc.in {
				subsets = append(subsets, corev1.EndpointSubset{Addresses: addrs(s[0]), NotReadyAddresses: addrs(s[1])})
			}
			if got := epTruncate(subsets, 10); got != tc.truncated {
				t.Fatalf("truncated %v, want %v", got, tc.truncated)
			}
			var got sizes
			for _, ss := range subsets {
				got = append(got, [2]int{len(ss.Addresses), len(ss.NotReadyAddresses)})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("sizes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEndpointsOverCapacity: the desired Endpoints of more than epMaxAddresses pods carry the annotation, and
// lose it once under capacity.
func TestEndpointsOverCapacity(t *testing.T) {
	svc := epTestService("web", "web")
	pods := epBenchPods(epMaxAddresses + 5)
	over := epDesiredLegacy(svc, pods, nil)
	if over == nil || over.Annotations[corev1.EndpointsOverCapacity] != "truncated" || len(over.Subsets) != 1 ||
		len(over.Subsets[0].Addresses) != epMaxAddresses {
		t.Fatalf("over capacity: want %d addresses and the annotation, have %+v", epMaxAddresses, over.Annotations)
	}
	if again := epDesiredLegacy(svc, pods, over); again != nil {
		t.Fatal("an up-to-date truncated Endpoints is written again")
	}
	under := epDesiredLegacy(svc, pods[:10], over)
	if under == nil || len(under.Subsets[0].Addresses) != 10 {
		t.Fatal("back under capacity: want 10 addresses")
	}
	if _, ok := under.Annotations[corev1.EndpointsOverCapacity]; ok {
		t.Fatal("the over-capacity annotation stays under capacity")
	}
}
