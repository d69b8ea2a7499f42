package resources

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// appsMetaAt is appsMeta created ago before appsNow.
func appsMetaAt(name string, ago time.Duration) metav1.ObjectMeta {
	m := appsMeta(name)
	m.CreationTimestamp = metav1.NewTime(appsNow.Add(-ago))
	return m
}

func appsTime(ago time.Duration) *metav1.Time { return new(metav1.NewTime(appsNow.Add(-ago))) }

func TestAppsTableCells(t *testing.T) {
	twoContainers := appsTemplate("")
	twoContainers.Spec.Containers = append(twoContainers.Spec.Containers, corev1.Container{Name: "log", Image: "busybox"})
	tests := []struct {
		name    string
		obj     runtime.Object
		columns []string
		want    []any
	}{
		{"deployment", &appsv1.Deployment{ObjectMeta: appsMetaAt("web", 5*time.Minute),
			Spec:   appsv1.DeploymentSpec{Replicas: new(int32(3)), Selector: appsSelector, Template: twoContainers},
			Status: appsv1.DeploymentStatus{ReadyReplicas: 2, UpdatedReplicas: 3, AvailableReplicas: 2}},
			[]string{"Name", "Ready", "Up-to-date", "Available", "Age", "Containers", "Images", "Selector"},
			[]any{"web", "2/3", int64(3), int64(2), "5m", "web,log", "nginx:1.27,busybox", "app=web"}},
		{"replicaset", &appsv1.ReplicaSet{ObjectMeta: appsMetaAt("web-1", time.Hour),
			Spec:   appsv1.ReplicaSetSpec{Replicas: new(int32(2)), Template: appsTemplate("")},
			Status: appsv1.ReplicaSetStatus{Replicas: 2, ReadyReplicas: 1}},
			[]string{"Name", "Desired", "Current", "Ready", "Age", "Containers", "Images", "Selector"},
			[]any{"web-1", int64(2), int64(2), int64(1), "60m", "web", "nginx:1.27", "<none>"}},
		{"daemonset", &appsv1.DaemonSet{ObjectMeta: appsMetaAt("agent", 3*24*time.Hour),
			Spec: appsv1.DaemonSetSpec{Selector: appsSelector, Template: func() corev1.PodTemplateSpec {
				t := appsTemplate("")
				t.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
				return t
			}()},
			Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, NumberReady: 2,
				UpdatedNumberScheduled: 1, NumberAvailable: 2}},
			[]string{"Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age",
				"Containers", "Images", "Selector"},
			[]any{"agent", int64(3), int64(3), int64(2), int64(1), int64(2), "kubernetes.io/os=linux", "3d", "web",
				"nginx:1.27", "app=web"}},
		{"statefulset", &appsv1.StatefulSet{ObjectMeta: appsMetaAt("db", 90*time.Second),
			Spec:   appsv1.StatefulSetSpec{Replicas: new(int32(3)), Template: appsTemplate("")},
			Status: appsv1.StatefulSetStatus{ReadyReplicas: 1}},
			[]string{"Name", "Ready", "Age", "Containers", "Images"},
			[]any{"db", "1/3", "90s", "web", "nginx:1.27"}},
		{"controllerrevision", &appsv1.ControllerRevision{ObjectMeta: func() metav1.ObjectMeta {
			m := appsMetaAt("db-7f9", time.Minute)
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db",
				Controller: new(true)}}
			return m
		}(), Revision: 2},
			[]string{"Name", "Controller", "Revision", "Age"},
			[]any{"db-7f9", "statefulset.apps/db", int64(2), "60s"}},
		{"job running", &batchv1.Job{ObjectMeta: appsMetaAt("pi", 2*time.Minute),
			Spec:   batchv1.JobSpec{Completions: new(int32(3)), Selector: appsSelector, Template: appsTemplate("")},
			Status: batchv1.JobStatus{Succeeded: 1, StartTime: appsTime(100 * time.Second)}},
			[]string{"Name", "Status", "Completions", "Duration", "Age", "Containers", "Images", "Selector"},
			[]any{"pi", "Running", "1/3", "100s", "2m", "web", "nginx:1.27", "app=web"}},
		{"job complete", &batchv1.Job{ObjectMeta: appsMetaAt("pi", time.Hour),
			Spec: batchv1.JobSpec{Parallelism: new(int32(4))},
			Status: batchv1.JobStatus{StartTime: appsTime(time.Hour), CompletionTime: appsTime(59 * time.Minute),
				Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}},
			nil, []any{"pi", "Complete", "0/1 of 4", "60s", "60m", "", "", "<none>"}},
		{"cronjob", &batchv1.CronJob{ObjectMeta: appsMetaAt("nightly", 48*time.Hour),
			Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", Suspend: new(false),
				JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: appsTemplate("")}}},
			Status: batchv1.CronJobStatus{Active: []corev1.ObjectReference{{Name: "nightly-1"}},
				LastScheduleTime: appsTime(9 * time.Hour)}},
			[]string{"Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule", "Age", "Containers",
				"Images", "Selector"},
			[]any{"nightly", "0 3 * * *", "<none>", "False", int64(1), "9h", "2d", "web", "nginx:1.27", "<none>"}},
		{"lease", &coordinationv1.Lease{ObjectMeta: appsMetaAt("node-1", time.Minute),
			Spec: coordinationv1.LeaseSpec{HolderIdentity: new("node-1")}},
			[]string{"Name", "Holder", "Age"}, []any{"node-1", "node-1", "60s"}},
		{"endpointslice", &discoveryv1.EndpointSlice{ObjectMeta: appsMetaAt("web-x", time.Minute),
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Port: new(int32(80))}, {Name: new("metrics")}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1", "10.0.0.2"}},
				{Addresses: []string{"10.0.0.3", "10.0.0.4", "10.0.0.5"}}}},
			[]string{"Name", "AddressType", "Ports", "Endpoints", "Age"},
			[]any{"web-x", "IPv4", "80,metrics", "10.0.0.1,10.0.0.2,10.0.0.3 + 2 more...", "60s"}},
		{"empty endpointslice", &discoveryv1.EndpointSlice{ObjectMeta: appsMetaAt("web-y", time.Minute),
			AddressType: discoveryv1.AddressTypeFQDN}, nil,
			[]any{"web-y", "FQDN", "<unset>", "<unset>", "60s"}},
		{"events.k8s.io", &eventsv1.Event{ObjectMeta: appsMetaAt("web.1", time.Hour),
			EventTime: metav1.NewMicroTime(appsNow.Add(-10 * time.Minute)), Type: "Normal", Reason: "Scheduled",
			Regarding: corev1.ObjectReference{Kind: "Pod", Name: "web"}, Note: " assigned \n",
			ReportingController: "default-scheduler", ReportingInstance: "node-1"},
			[]string{"Last Seen", "Type", "Reason", "Object", "Subobject", "Source", "Message", "First Seen", "Count",
				"Name"},
			[]any{"10m", "Normal", "Scheduled", "pod/web", "", "default-scheduler, node-1", "assigned", "10m",
				int64(1), "web.1"}},
		{"events.k8s.io series", &eventsv1.Event{ObjectMeta: appsMetaAt("web.2", time.Hour),
			EventTime: metav1.NewMicroTime(appsNow.Add(-10 * time.Minute)), Type: "Warning", Reason: "BackOff",
			Regarding: corev1.ObjectReference{Kind: "Node"}, DeprecatedSource: corev1.EventSource{Component: "kubelet"},
			Series: &eventsv1.EventSeries{Count: 7, LastObservedTime: metav1.NewMicroTime(appsNow.Add(-time.Minute))}},
			nil, []any{"60s", "Warning", "BackOff", "node", "", "kubelet", "", "10m", int64(7), "web.2"}},
		{"priorityclass", &schedulingv1.PriorityClass{ObjectMeta: appsMetaAt("high", time.Minute), Value: 1000,
			GlobalDefault: true, PreemptionPolicy: new(corev1.PreemptNever)},
			[]string{"Name", "Value", "Global-Default", "Age", "PreemptionPolicy"},
			[]any{"high", int64(1000), true, "60s", "Never"}},
		{"pdb", &policyv1.PodDisruptionBudget{ObjectMeta: appsMetaAt("web", time.Minute),
			Spec:   policyv1.PodDisruptionBudgetSpec{MinAvailable: new(intstr.FromString("50%"))},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1}},
			[]string{"Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"},
			[]any{"web", "50%", "N/A", int64(1), "60s"}},
		{"clusterrole", &rbacv1.ClusterRole{ObjectMeta: appsMetaAt("view", 90*time.Minute)},
			[]string{"Name", "Created At"}, []any{"view", "2025-06-01T10:30:00Z"}},
		{"rolebinding", &rbacv1.RoleBinding{ObjectMeta: appsMetaAt("read", time.Minute),
			RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"},
			Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice"}, {Kind: "User", Name: "bob"},
				{Kind: "Group", Name: "devs"}, {Kind: "ServiceAccount", Namespace: "ci", Name: "runner"}}},
			[]string{"Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"},
			[]any{"read", "ClusterRole/view", "60s", "alice, bob", "devs", "ci/runner"}},
		{"hpa", &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: appsMetaAt("web", time.Minute),
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: new(int32(1)), MaxReplicas: 10,
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", Name: "web"},
				Metrics: []autoscalingv2.MetricSpec{
					{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
						Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{AverageUtilization: new(int32(80))}}},
					{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
						Target: autoscalingv2.MetricTarget{AverageValue: new(resource.MustParse("100"))}}},
					{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{}},
				}},
			Status: autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 2,
				CurrentMetrics: []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType,
					Resource: &autoscalingv2.ResourceMetricStatus{Current: autoscalingv2.MetricValueStatus{
						AverageUtilization: new(int32(40))}}}}}},
			[]string{"Name", "Reference", "Targets", "MinPods", "MaxPods", "Replicas", "Age"},
			[]any{"web", "Deployment/web", "cpu: 40%/80%, <unknown>/100 + 1 more...", "1", int64(10), int64(2),
				"60s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := appsResource(t, tt.obj).Table
			if tt.columns != nil {
				var names []string
				for _, c := range tab.Columns {
					names = append(names, c.Name)
				}
				if diff := cmp.Diff(tt.columns, names); diff != "" {
					t.Errorf("columns (-want +got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(tt.want, tab.Cells(tt.obj, appsNow)); diff != "" {
				t.Errorf("cells (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAppsTablesWellFormed checks every resource of this file set has one cell per column and a Name column.
func TestAppsTablesWellFormed(t *testing.T) {
	for _, obj := range []runtime.Object{&appsv1.Deployment{}, &appsv1.ReplicaSet{}, &appsv1.DaemonSet{},
		&appsv1.StatefulSet{}, &appsv1.ControllerRevision{}, &batchv1.Job{}, &batchv1.CronJob{},
		&coordinationv1.Lease{}, &discoveryv1.EndpointSlice{}, &eventsv1.Event{}, &schedulingv1.PriorityClass{},
		&policyv1.PodDisruptionBudget{}, &rbacv1.Role{}, &rbacv1.ClusterRole{}, &rbacv1.RoleBinding{},
		&rbacv1.ClusterRoleBinding{}, &autoscalingv2.HorizontalPodAutoscaler{}} {
		r := appsResource(t, obj)
		t.Run(r.Plural+"."+r.GVK.Group, func(t *testing.T) {
			cells := r.Table.Cells(obj, appsNow)
			if len(cells) != len(r.Table.Columns) {
				t.Errorf("%d cells for %d columns", len(cells), len(r.Table.Columns))
			}
			hasName := false
			for _, c := range r.Table.Columns {
				hasName = hasName || (c.Name == "Name" && c.Format == "name")
			}
			if !hasName {
				t.Errorf("no Name column")
			}
		})
	}
}

func TestAppsScale(t *testing.T) {
	tests := []struct {
		name       string
		obj        runtime.Object
		wantSpec   int32
		wantStatus autoscalingv1.ScaleStatus
	}{
		{"deployment", &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: new(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn,
					Values: []string{"a", "b"}}}}},
			Status: appsv1.DeploymentStatus{Replicas: 2}},
			3, autoscalingv1.ScaleStatus{Replicas: 2, Selector: "app=web,tier in (a,b)"}},
		{"replicaset unset replicas", &appsv1.ReplicaSet{Status: appsv1.ReplicaSetStatus{Replicas: 1}},
			0, autoscalingv1.ScaleStatus{Replicas: 1}},
		{"statefulset", &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: new(int32(5)),
			Selector: appsSelector}, Status: appsv1.StatefulSetStatus{Replicas: 4}},
			5, autoscalingv1.ScaleStatus{Replicas: 4, Selector: "app=web"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := appsResource(t, tt.obj).Scale
			if got := sc.Get(tt.obj).Replicas; got != tt.wantSpec {
				t.Errorf("Get = %d, want %d", got, tt.wantSpec)
			}
			if diff := cmp.Diff(tt.wantStatus, sc.Status(tt.obj)); diff != "" {
				t.Errorf("Status (-want +got):\n%s", diff)
			}
			sc.Set(tt.obj, 7)
			if got := sc.Get(tt.obj).Replicas; got != 7 {
				t.Errorf("after Set(7), Get = %d", got)
			}
		})
	}
	for _, obj := range []runtime.Object{&appsv1.DaemonSet{}, &batchv1.Job{}} {
		if r := appsResource(t, obj); r.Scale != nil {
			t.Errorf("%s serves /scale", r.Plural)
		}
	}
}

func TestAppsFields(t *testing.T) {
	job := &batchv1.Job{Status: batchv1.JobStatus{Succeeded: 2}}
	if diff := cmp.Diff(fields.Set{"status.successful": "2"}, appsResource(t, job).Fields(job)); diff != "" {
		t.Errorf("job fields (-want +got):\n%s", diff)
	}
	e := &eventsv1.Event{Reason: "Pulled", Type: "Normal", ReportingController: "kubelet",
		Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web", UID: "u1",
			APIVersion: "v1", ResourceVersion: "7", FieldPath: "spec.containers{web}"}}
	want := fields.Set{"reason": "Pulled", "type": "Normal", "source": "kubelet", "reportingComponent": "kubelet",
		"reportingController": "kubelet"}
	for k, v := range map[string]string{"kind": "Pod", "namespace": "default", "name": "web", "uid": "u1",
		"apiVersion": "v1", "resourceVersion": "7", "fieldPath": "spec.containers{web}"} {
		want["involvedObject."+k], want["regarding."+k] = v, v
	}
	r := appsResource(t, e)
	if diff := cmp.Diff(want, r.Fields(e)); diff != "" {
		t.Errorf("events.k8s.io fields (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, r.Fields(eventV1ToCore(e))); diff != "" {
		t.Errorf("events.k8s.io fields of the stored form (-want +got):\n%s", diff)
	}
}
