package web

import (
	"fmt"
	"io"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
)

// BenchmarkPodsPage is the server's time for the pods page's list region with 10,000 pods in one namespace:
// buildList over the collection's entries, then listTable rendered. Issue 7's goal is 100 ms or less.
//
//	go test -run '^$' -bench BenchmarkPodsPage -benchmem -count 3 ./web/
func BenchmarkPodsPage(b *testing.B) {
	const n = 10000
	res := podsResource(b)
	entries := benchPods(n)
	tests := []struct {
		name      string
		lq        listQuery
		wantTotal int
		wantRows  int
	}{
		{"name order", listQuery{Page: 1, Size: 50}, n, 50},
		{"sorted by status", listQuery{Sort: "Status", Page: 1, Size: 50}, n, 50}, // every row's cells computed
		{"label selector 10%", listQuery{Label: "shard=s3", Page: 1, Size: 50}, n / 10, 50},
		{"page 100 of size 100", listQuery{Page: 100, Size: 100}, n, 100},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			lq := tt.lq
			lq.Resource, lq.Namespace = "pods", "bench"
			lv := buildList(entries, res, "c1", lq, fixedNow)
			if lv.Total != tt.wantTotal || len(lv.Rows) != tt.wantRows || lv.FilterErr != "" {
				b.Fatalf("%d of %d rows (%q), want %d of %d", len(lv.Rows), lv.Total, lv.FilterErr, tt.wantRows, tt.wantTotal)
			}
			ctx := b.Context()
			b.ReportAllocs()
			for b.Loop() {
				if err := listTable(buildList(entries, res, "c1", lq, fixedNow)).Render(ctx, io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchPods are n pods of a ReplicaSet-like workload as the watch cache holds them: two containers with requests,
// probes and statuses, labels (shard s0..s9 a tenth each), a node out of 100; one in 50 crash-loops, one in 100
// is pending, one in 7 has restarted.
func benchPods(n int) []*watchcache.Entry {
	objs := make([]runtime.Object, 0, n)
	for i := range n {
		objs = append(objs, benchPod(i))
	}
	return entriesOf(objs...)
}

func benchPod(i int) *corev1.Pod {
	name := fmt.Sprintf("web-7d4b9c8f6-%05d", i)
	created := ago(time.Duration(i%5000) * time.Minute)
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz",
		Port: intstr.FromInt32(8080), Scheme: corev1.URISchemeHTTP}}, TimeoutSeconds: 1, PeriodSeconds: 10,
		SuccessThreshold: 1, FailureThreshold: 3}
	container := func(name, image string) corev1.Container {
		return corev1.Container{Name: name, Image: image, Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}},
			LivenessProbe: probe, ReadinessProbe: probe, TerminationMessagePath: "/dev/termination-log",
			ImagePullPolicy: corev1.PullIfNotPresent}
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name, UID: types.UID(fmt.Sprintf("uid-%05d", i)),
			ResourceVersion: fmt.Sprint(1000 + i), CreationTimestamp: created,
			Labels: map[string]string{"app": "web", "pod-template-hash": "7d4b9c8f6", "shard": fmt.Sprintf("s%d", i%10)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d4b9c8f6",
				UID: "uid-rs", Controller: new(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{container("app", "registry.example/web:1.4.2"),
			container("proxy", "registry.example/proxy:2.0")}, NodeName: fmt.Sprintf("node-%03d", i%100),
			ServiceAccountName: "web", RestartPolicy: corev1.RestartPolicyAlways, SchedulerName: "default-scheduler"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256),
			HostIP: fmt.Sprintf("192.168.0.%d", i%100), StartTime: &created, QOSClass: corev1.PodQOSBurstable},
	}
	p.Status.PodIPs = []corev1.PodIP{{IP: p.Status.PodIP}}
	for _, t := range []corev1.PodConditionType{corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue,
			LastTransitionTime: created})
	}
	for _, c := range p.Spec.Containers {
		st := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: "registry.example/sha256:0123", Ready: true,
			Started: new(true), ContainerID: "containerd://" + name + c.Name,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: created}}}
		if i%7 == 0 {
			st.RestartCount = int32(i % 13)
			st.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
				FinishedAt: ago(time.Duration(i%300) * time.Minute)}
		}
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, st)
	}
	switch {
	case i%100 == 1:
		p.Spec.NodeName, p.Status = "", corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBurstable}
	case i%50 == 2:
		st := &p.Status.ContainerStatuses[0]
		st.Ready, st.RestartCount = false, 12
		st.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	}
	return p
}
