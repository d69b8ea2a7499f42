package resources

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// tableNow is the fixed clock of the table tests; objects are created two minutes before it.
var tableNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func minutesAgo(m int) metav1.Time {
	return metav1.NewTime(tableNow.Add(-time.Duration(m) * time.Minute))
}

func tablePod(edit func(p *corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: minutesAgo(2)},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "web"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	edit(p)
	return p
}

func running(name string, ready bool) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Ready: ready, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
}

func TestPodCells(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	tests := []struct {
		name string
		pod  *corev1.Pod
		want []any
	}{
		{"pending", tablePod(func(*corev1.Pod) {}),
			[]any{"web", "0/1", "Pending", "0", "2m", "<none>", "<none>", "<none>", "<none>"}},
		{"running", tablePod(func(p *corev1.Pod) {
			p.Spec.NodeName = "node-1"
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.0.5", PodIPs: []corev1.PodIP{{IP: "10.1.0.5"}},
				ContainerStatuses: []corev1.ContainerStatus{running("web", true)}}
		}), []any{"web", "1/1", "Running", "0", "2m", "10.1.0.5", "node-1", "<none>", "<none>"}},
		{"crash loop", tablePod(func(p *corev1.Pod) {
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "web", RestartCount: 5,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1,
					FinishedAt: minutesAgo(5)}}}}}
		}), []any{"web", "0/1", "CrashLoopBackOff", "5 (5m ago)", "2m", "<none>", "<none>", "<none>", "<none>"}},
		{"completed", tablePod(func(p *corev1.Pod) {
			p.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: "web",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}}}
		}), []any{"web", "0/1", "Completed", "0", "2m", "<none>", "<none>", "<none>", "<none>"}},
		{"exit code", tablePod(func(p *corev1.Pod) {
			p.Status = corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "web",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2}}}}}
		}), []any{"web", "0/1", "ExitCode:2", "0", "2m", "<none>", "<none>", "<none>", "<none>"}},
		{"terminating", tablePod(func(p *corev1.Pod) {
			deleted := minutesAgo(0)
			p.DeletionTimestamp = &deleted
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{running("web", true)}}
		}), []any{"web", "1/1", "Terminating", "0", "2m", "<none>", "<none>", "<none>", "<none>"}},
		{"node lost", tablePod(func(p *corev1.Pod) {
			deleted := minutesAgo(0)
			p.DeletionTimestamp = &deleted
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Reason: "NodeLost"}
		}), []any{"web", "0/1", "Unknown", "0", "2m", "<none>", "<none>", "<none>", "<none>"}},
		{"init 0/1", tablePod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init"}}
			waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", State: waiting}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", State: waiting}}
		}), []any{"web", "0/1", "Init:0/1", "0", "2m", "<none>", "<none>", "<none>", "<none>"}},
		{"init crash loop", tablePod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init"}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", RestartCount: 3,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
		}), []any{"web", "0/1", "Init:CrashLoopBackOff", "3", "2m", "<none>", "<none>", "<none>", "<none>"}},
		{"sidecar and readiness gates", tablePod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: &always}}
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/a"}, {ConditionType: "example.com/b"}}
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions: []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
					{Type: "example.com/a", Status: corev1.ConditionTrue}, {Type: "example.com/b", Status: corev1.ConditionFalse}},
				InitContainerStatuses: []corev1.ContainerStatus{{Name: "proxy", Ready: true, Started: ptrTo(true), RestartCount: 1,
					State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
				ContainerStatuses: []corev1.ContainerStatus{running("web", true)}, NominatedNodeName: "node-2"}
		}), []any{"web", "2/2", "Running", "1", "2m", "<none>", "<none>", "node-2", "1/2"}},
		{"scheduling gated", tablePod(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Reason: corev1.PodReasonSchedulingGated}}
		}), []any{"web", "0/1", "SchedulingGated", "0", "2m", "<none>", "<none>", "<none>", "<none>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, coreResource(t, "pods").Table.Cells(tt.pod, tableNow)); diff != "" {
				t.Errorf("cells (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCoreCells(t *testing.T) {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, CreationTimestamp: minutesAgo(2)}
	}
	q := resource.MustParse
	tests := []struct {
		name, plural string
		obj          runtime.Object
		want         []any
	}{
		{"namespace", "namespaces", &corev1.Namespace{ObjectMeta: meta("default"), Status: corev1.NamespaceStatus{Phase: "Active"}},
			[]any{"default", "Active", "2m"}},
		{"cluster IP service", "services", &corev1.Service{ObjectMeta: meta("web"), Spec: corev1.ServiceSpec{Type: "ClusterIP",
			ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"}, Selector: map[string]string{"app": "web", "tier": "fe"},
			Ports: []corev1.ServicePort{{Port: 80, Protocol: "TCP"}, {Port: 53, Protocol: "UDP"}}}},
			[]any{"web", "ClusterIP", "10.96.0.10", "<none>", "80/TCP,53/UDP", "2m", "app=web,tier=fe"}},
		{"pending load balancer", "services", &corev1.Service{ObjectMeta: meta("lb"), Spec: corev1.ServiceSpec{Type: "LoadBalancer",
			ClusterIPs: []string{"10.96.0.11"}, Ports: []corev1.ServicePort{{Port: 443, NodePort: 30443, Protocol: "TCP"}}}},
			[]any{"lb", "LoadBalancer", "10.96.0.11", "<pending>", "443:30443/TCP", "2m", "<none>"}},
		{"load balancer", "services", &corev1.Service{ObjectMeta: meta("lb"), Spec: corev1.ServiceSpec{Type: "LoadBalancer",
			ExternalIPs: []string{"192.0.2.9"}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
				{IP: "203.0.113.7"}, {Hostname: "lb.example.com"}}}}},
			[]any{"lb", "LoadBalancer", "<none>", "203.0.113.7,lb.example.com,192.0.2.9", "<none>", "2m", "<none>"}},
		{"external name", "services", &corev1.Service{ObjectMeta: meta("db"), Spec: corev1.ServiceSpec{Type: "ExternalName",
			ExternalName: "db.example.com"}}, []any{"db", "ExternalName", "<none>", "db.example.com", "<none>", "2m", "<none>"}},
		{"secret", "secrets", &corev1.Secret{ObjectMeta: meta("tls"), Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"tls.crt": nil, "tls.key": nil}}, []any{"tls", "kubernetes.io/tls", int64(2), "2m"}},
		{"service account", "serviceaccounts", &corev1.ServiceAccount{ObjectMeta: meta("default")},
			[]any{"default", int64(0), "2m"}},
		{"event", "events", &corev1.Event{ObjectMeta: meta("web.17a"), Type: "Warning", Reason: "BackOff",
			Message: " Back-off restarting failed container \n", Count: 7, FirstTimestamp: minutesAgo(30), LastTimestamp: minutesAgo(5),
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", FieldPath: "spec.containers{web}"},
			Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"}},
			[]any{"5m", "Warning", "BackOff", "pod/web", "spec.containers{web}", "kubelet, node-1",
				"Back-off restarting failed container", "30m", int64(7), "web.17a"}},
		{"new style event", "events", &corev1.Event{ObjectMeta: meta("e"), Type: "Normal", Reason: "Scheduled",
			EventTime: metav1.NewMicroTime(minutesAgo(3).Time), ReportingController: "default-scheduler",
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web"}},
			[]any{"3m", "Normal", "Scheduled", "pod/web", "", "default-scheduler", "", "3m", int64(1), "e"}},
		{"node", "nodes", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: minutesAgo(2),
			Labels: map[string]string{"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "etcd"}},
			Spec: corev1.NodeSpec{Unschedulable: true},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.1.10"}},
				NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "v1.37.0", OSImage: "Debian", ContainerRuntimeVersion: "containerd://2.1"}}},
			[]any{"n1", "Ready,SchedulingDisabled", "control-plane,etcd", "2m", "v1.37.0", "192.168.1.10", "<none>", "Debian",
				"<unknown>", "containerd://2.1"}},
		{"unknown node", "nodes", &corev1.Node{ObjectMeta: meta("n2")},
			[]any{"n2", "Unknown", "<none>", "2m", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"}},
		{"resource quota", "resourcequotas", &corev1.ResourceQuota{ObjectMeta: meta("compute"), Status: corev1.ResourceQuotaStatus{
			Hard: corev1.ResourceList{"requests.cpu": q("4"), "pods": q("10"), "limits.memory": q("8Gi")},
			Used: corev1.ResourceList{"requests.cpu": q("500m"), "pods": q("3")}}},
			[]any{"compute", "2m", "pods: 3/10, requests.cpu: 500m/4", "limits.memory: 0/8Gi"}},
		{"limit range", "limitranges", &corev1.LimitRange{ObjectMeta: meta("limits")},
			[]any{"limits", "2026-03-01T11:58:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := coreResource(t, tt.plural)
			got := r.Table.Cells(tt.obj, tableNow)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("cells (-want +got):\n%s", diff)
			}
			if len(got) != len(r.Table.Columns) {
				t.Errorf("%d cells for %d columns", len(got), len(r.Table.Columns))
			}
		})
	}
}
