package web

import (
	"encoding/base64"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/a-h/templ"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func metaOf(t *testing.T, gvr schema.GroupVersionResource, obj runtime.Object) metaView {
	t.Helper()
	res := registered(t, gvr)
	m, _ := meta.Accessor(obj)
	ref := objectRef{Cluster: "c1", Key: resourceKey(res), Namespace: m.GetNamespace(), Name: m.GetName()}
	return buildMeta(res, ref, obj, fixedNow)
}

// detailPod has an init container that completed and four containers: running with probes, crash-looping,
// terminated with an error and still being created.
func detailPod() *corev1.Pod {
	probe := func(h corev1.ProbeHandler, delay int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: h, InitialDelaySeconds: delay, TimeoutSeconds: 1, PeriodSeconds: 10,
			SuccessThreshold: 1, FailureThreshold: 3}
	}
	p := mkPod("default", "web-1", 3*day, labelled("app", "web"), onNode("node-1", "10.0.0.11"))
	p.Status.QOSClass = corev1.PodQOSBurstable
	p.Spec.ServiceAccountName = "web"
	p.Spec.InitContainers = []corev1.Container{{Name: "migrate", Image: "registry.example/migrate:1"}}
	p.Spec.Containers = []corev1.Container{
		{Name: "app", Image: "registry.example/app:1", Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}},
			LivenessProbe: probe(corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080),
				Scheme: corev1.URISchemeHTTP}}, 5),
			ReadinessProbe: probe(corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}, 0)},
		{Name: "sidecar", Image: "registry.example/sidecar:1"},
		{Name: "batch", Image: "registry.example/batch:1"},
		{Name: "cache", Image: "registry.example/cache:1"},
	}
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "migrate", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", ExitCode: 0, FinishedAt: ago(3 * day)}}}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "app", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ago(3 * day)}}},
		{Name: "sidecar", RestartCount: 7, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "CrashLoopBackOff", Message: "back-off 5m0s restarting failed container=sidecar"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1,
				FinishedAt: ago(5 * time.Minute)}}},
		{Name: "batch", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 137}}},
		{Name: "cache", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
	}
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: ago(3 * day)},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: ago(3 * day)},
		{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: ago(5 * time.Minute)},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: ago(5 * time.Minute),
			Message: "containers with unready status: [sidecar batch cache]"},
	}
	return p
}

type containerRow struct {
	Name             string
	Init             bool
	State, Class     string
	Details          []string // the lines under the state badge
	Ready, Restarts  string
	Ports, Resources []string
	Probes           []string
}

type conditionRow struct{ Type, Status, Badge, Reason, Since string }

func conditionRows(doc *goquery.Document) []conditionRow {
	var out []conditionRow
	byTestID(doc.Selection, "conditions").Find("tbody tr").Each(func(_ int, tr *goquery.Selection) {
		td := tr.Find("td")
		out = append(out, conditionRow{Type: strings.TrimPrefix(tr.AttrOr("data-testid", ""), "condition-"),
			Status: textOf(td.Eq(1)), Badge: badgeClass(td.Eq(1).Find(".badge")), Reason: textOf(td.Eq(2)), Since: textOf(td.Eq(3))})
	})
	return out
}

func TestPodDetail(t *testing.T) {
	p := detailPod()
	doc, _ := renderDoc(t, podDetail(buildPod(metaOf(t, corev1.SchemeGroupVersion.WithResource("pods"), p), p, fixedNow)))

	var got []containerRow
	byTestID(doc.Selection, "container").Each(func(_ int, tr *goquery.Selection) {
		td := tr.Find("td")
		state := byTestID(tr, "container-state")
		got = append(got, containerRow{Name: tr.AttrOr("data-name", ""), Init: td.Eq(0).Find(".tag").Length() > 0,
			State: textOf(state), Class: badgeClass(state), Details: textsOf(td.Eq(1).Find("div")),
			Ready: textOf(td.Eq(2)), Restarts: textOf(td.Eq(3)), Ports: textsOf(td.Eq(5).Find("div")),
			Resources: textsOf(td.Eq(6).Find("div")), Probes: textsOf(td.Eq(7).Find("div"))})
	})
	probes := make([][]string, len(got))
	for i := range got {
		probes[i], got[i].Probes = got[i].Probes, nil
	}
	want := []containerRow{
		{Name: "migrate", Init: true, State: "Terminated", Class: "ok", Details: []string{"Completed (exit code 0)"},
			Ready: "false", Restarts: "0"},
		{Name: "app", State: "Running", Class: "ok", Details: []string{"for 3d"}, Ready: "true", Restarts: "0",
			Ports: []string{"8080/TCP"}, Resources: []string{"requests: cpu=0.1 cores, memory=64 MiB", "limits: memory=128 MiB"}},
		{Name: "sidecar", State: "Waiting", Class: "bad", Details: []string{
			"CrashLoopBackOff: back-off 5m0s restarting failed container=sidecar", "last: Error (exit code 1) 5m ago"},
			Ready: "false", Restarts: "7"},
		{Name: "batch", State: "Terminated", Class: "bad", Details: []string{"Error (exit code 137)"}, Ready: "false", Restarts: "0"},
		{Name: "cache", State: "Waiting", Class: "warn", Details: []string{"ContainerCreating"}, Ready: "false", Restarts: "0"},
	}
	wantDiff(t, "containers", want, got)

	// Probes as `kubectl describe pod` prints them (the thresholds' spelling aside).
	if len(probes) > 1 {
		wantProbes := []string{"liveness: http-get http://:8080/healthz delay=5s timeout=1s period=10s",
			"readiness: tcp-socket :8080 delay=0s timeout=1s period=10s"}
		if len(probes[1]) != len(wantProbes) {
			t.Fatalf("app's probes %q, want %d", probes[1], len(wantProbes))
		}
		for i, w := range wantProbes {
			if !strings.HasPrefix(probes[1][i], w) {
				t.Errorf("probe %q, want it to start with %q (kubectl describe's form)", probes[1][i], w)
			}
		}
	}

	wantDiff(t, "conditions", []conditionRow{
		{"PodScheduled", "True", "ok", "", "3d"},
		{"Initialized", "True", "ok", "", "3d"},
		{"ContainersReady", "False", "bad", "ContainersNotReady", "5m"},
		{"Ready", "False", "bad", "ContainersNotReady", "5m"},
	}, conditionRows(doc))

	status := byTestID(doc.Selection, "summary-Status")
	wantEqual(t, "summary status", textOf(status), "CrashLoopBackOff")
	wantEqual(t, "summary status badge", badgeClass(status.Find(".badge")), "bad")
	wantEqual(t, "summary ready", textOf(byTestID(doc.Selection, "summary-Ready")), "1/4")
	wantEqual(t, "pod IP", textOf(byTestID(doc.Selection, "pod-ip")), "10.0.0.11")
	wantEqual(t, "node link", byTestID(doc.Selection, "pod-node").Find("a").AttrOr("href", ""), "/ui/c/c1/r/nodes/-/node-1")
	wantEqual(t, "age", textOf(byTestID(doc.Selection, "meta-age")), "3d")
	wantEqual(t, "labels", textOf(byTestID(doc.Selection, "labels")), "app=web")
}

func TestPodDetailUnscheduled(t *testing.T) {
	p := mkPod("default", "db-0", 90*time.Second)
	doc, _ := renderDoc(t, podDetail(buildPod(metaOf(t, corev1.SchemeGroupVersion.WithResource("pods"), p), p, fixedNow)))
	wantEqual(t, "node", textOf(byTestID(doc.Selection, "pod-node")), "not scheduled yet")
	wantEqual(t, "node links", byTestID(doc.Selection, "pod-node").Find("a").Length(), 0)
	wantEqual(t, "container state", textOf(byTestID(doc.Selection, "container-state")), "Waiting")
	wantEqual(t, "conditions table", byTestID(doc.Selection, "conditions").Length(), 0)
}

// requesting is a pod on node-1 whose containers request and limit the given amounts.
func requesting(ns, name string, phase corev1.PodPhase, req, lim corev1.ResourceList) *corev1.Pod {
	p := mkPod(ns, name, time.Hour, onNode("node-1", "10.0.0.9"), runningReady(time.Hour))
	p.Status.Phase = phase
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: req, Limits: lim}
	return p
}

func TestNodeDetail(t *testing.T) {
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i+1 < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	web := requesting("default", "web-1", corev1.PodRunning, rl("cpu", "500m", "memory", "1Gi"), rl("cpu", "1", "memory", "2Gi"))
	agent := requesting("kube-system", "agent", corev1.PodRunning, rl("cpu", "1500m", "memory", "1Gi"), nil)
	agent.Spec.InitContainers = []corev1.Container{{Name: "setup", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "2")}}}
	done := requesting("default", "done", corev1.PodSucceeded, rl("cpu", "1"), nil)

	node := func(cordoned bool, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", CreationTimestamp: ago(30 * day)},
			Spec: corev1.NodeSpec{Unschedulable: cordoned, Taints: taints},
			Status: corev1.NodeStatus{Allocatable: rl("cpu", "4", "memory", "8Gi", "pods", "110"),
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: ago(time.Minute)}}}}
	}
	type allocRow struct{ Resource, Requests, Limits, Allocatable, Percent string }
	tests := []struct {
		name         string
		node         *corev1.Node
		pods         []*corev1.Pod
		hidden       bool
		wantAlloc    []allocRow
		wantTaints   string
		wantCordoned bool
		wantPods     []string // data-name of the rows, "" when the table is absent
		wantPodsNote string   // the text in place of the table
	}{
		{
			name: "cordoned, tainted, with pods",
			node: node(true, corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}),
			pods: []*corev1.Pod{web, agent, done},
			// cpu: 500m + max(1500m, init 2) = 2500m of 4; the succeeded pod counts for nothing.
			wantAlloc: []allocRow{{"cpu", "2.5 cores", "1 core", "4 cores", "62"}, {"memory", "2 GiB", "2 GiB", "8 GiB", "25"},
				{"pods", "2", "0", "110", "1"}},
			wantTaints: "dedicated=gpu:NoSchedule", wantCordoned: true, wantPods: []string{"web-1", "agent"},
		},
		{
			name:       "schedulable, no taints, no pods",
			node:       node(false),
			wantAlloc:  []allocRow{{"cpu", "0", "0", "4 cores", "0"}, {"memory", "0", "0", "8 GiB", "0"}, {"pods", "0", "0", "110", "0"}},
			wantTaints: "No taints.", wantPodsNote: "No pods run on this node.",
		},
		{
			name:       "pods the user may not list",
			node:       node(false),
			hidden:     true,
			wantAlloc:  []allocRow{{"cpu", "0", "0", "4 cores", "0"}, {"memory", "0", "0", "8 GiB", "0"}, {"pods", "0", "0", "110", "0"}},
			wantTaints: "No taints.", wantPodsNote: "Your role does not allow you to list pods in every namespace.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mv := metaOf(t, corev1.SchemeGroupVersion.WithResource("nodes"), tt.node)
			doc, _ := renderDoc(t, nodeDetail(buildNode(mv, tt.node, tt.pods, tt.hidden, fixedNow)))
			var alloc []allocRow
			byTestID(doc.Selection, "allocated").Find("tbody tr").Each(func(_ int, tr *goquery.Selection) {
				td := tr.Find("td")
				alloc = append(alloc, allocRow{textOf(td.Eq(0)), textOf(td.Eq(1)), textOf(td.Eq(2)), textOf(td.Eq(3)),
					td.Eq(4).Find("meter").AttrOr("value", "")})
			})
			wantDiff(t, "allocated resources", tt.wantAlloc, alloc)
			wantEqual(t, "taints", textOf(byTestID(doc.Selection, "taints")), tt.wantTaints)
			wantEqual(t, "cordoned notice", byTestID(doc.Selection, "cordoned").Length() == 1, tt.wantCordoned)
			podsTable := byTestID(doc.Selection, "node-pods")
			wantDiff(t, "pods on the node", tt.wantPods,
				byTestID(podsTable, "row").Map(func(_ int, s *goquery.Selection) string { return s.AttrOr("data-name", "") }))
			if tt.wantPodsNote != "" {
				if !strings.Contains(textOf(doc.Selection), tt.wantPodsNote) {
					t.Errorf("the page does not say %q", tt.wantPodsNote)
				}
			}
			if tt.wantPods != nil {
				first := byTestID(podsTable, "row").First().Find("td")
				wantEqual(t, "first pod's status badge", badgeClass(first.Eq(2).Find(".badge")), "ok")
				wantEqual(t, "first pod's requests", textOf(first.Eq(3)), "cpu=0.5 cores, memory=1 GiB")
			}
		})
	}
}

// rolloutDeployment is Deployment web wanting 3 replicas, its spec observed; mutate sets the status under test.
func rolloutDeployment(mutate func(d *appsv1.Deployment)) *appsv1.Deployment {
	three := int32(3)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Generation: 2, UID: "uid-web",
			CreationTimestamp: ago(10 * day), Annotations: map[string]string{revisionAnnotation: "10"}},
		Spec: appsv1.DeploymentSpec{Replicas: &three, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3},
	}
	if mutate != nil {
		mutate(d)
	}
	return d
}

// Each case is a state `kubectl rollout status deployment/web` reports; the dashboard's badge says the same.
func TestRolloutStatus(t *testing.T) {
	deadline := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
		Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "web-ccc" has timed out progressing.`}
	tests := []struct {
		name       string
		mutate     func(d *appsv1.Deployment)
		want       string
		wantClass  string
		wantPaused bool
	}{
		{"complete", nil, `deployment "web" successfully rolled out`, "ok", false},
		{"spec update not observed yet", func(d *appsv1.Deployment) { d.Generation = 3 },
			"Waiting for deployment spec update to be observed...", "warn", false},
		{"new replicas being updated", func(d *appsv1.Deployment) { d.Status.UpdatedReplicas, d.Status.Replicas = 1, 4 },
			`Waiting for deployment "web" rollout to finish: 1 out of 3 new replicas have been updated...`, "warn", false},
		{"old replicas pending termination", func(d *appsv1.Deployment) { d.Status.Replicas = 4 },
			`Waiting for deployment "web" rollout to finish: 1 old replicas are pending termination...`, "warn", false},
		{"updated replicas not yet available", func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 2 },
			`Waiting for deployment "web" rollout to finish: 2 of 3 updated replicas are available...`, "warn", false},
		{"paused", func(d *appsv1.Deployment) { d.Spec.Paused, d.Status.UpdatedReplicas = true, 1 },
			"Rollout paused", "warn", true},
		{"progress deadline exceeded", func(d *appsv1.Deployment) {
			d.Status.UpdatedReplicas, d.Status.Conditions = 1, []appsv1.DeploymentCondition{deadline}
		}, `deployment "web" exceeded its progress deadline`, "bad", false},
		{"deadline exceeded but a new spec not observed yet", func(d *appsv1.Deployment) {
			d.Generation, d.Status.Conditions = 3, []appsv1.DeploymentCondition{deadline}
		}, "Waiting for deployment spec update to be observed...", "warn", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := rolloutDeployment(tt.mutate)
			got, class := rolloutStatus(d)
			wantEqual(t, "rolloutStatus", got, tt.want)
			wantEqual(t, "class", class, tt.wantClass)

			mv := metaOf(t, appsv1.SchemeGroupVersion.WithResource("deployments"), d)
			doc, _ := renderDoc(t, deploymentDetail(buildDeployment(mv, d, nil, fixedNow)))
			badge := byTestID(doc.Selection, "rollout-status")
			wantEqual(t, "rollout badge", textOf(badge), tt.want)
			wantEqual(t, "rollout badge class", badgeClass(badge), tt.wantClass)
			wantEqual(t, "paused badge", byTestID(doc.Selection, "paused").Length() == 1, tt.wantPaused)
		})
	}
}

func TestDeploymentDetail(t *testing.T) {
	d := rolloutDeployment(nil)
	rs := func(name string, rev string, image string, ready, want int32, age time.Duration) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, CreationTimestamp: ago(age),
				Annotations: map[string]string{revisionAnnotation: rev}},
			Spec: appsv1.ReplicaSetSpec{Replicas: &want,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}}}},
			Status: appsv1.ReplicaSetStatus{ReadyReplicas: ready},
		}
	}
	// Revision 10 is current; 9 and 2 are history. As text "10" would sort between "2" and "9".
	rss := []*appsv1.ReplicaSet{rs("web-aaa", "2", "nginx:1.25", 0, 0, 10*day), rs("web-ccc", "10", "nginx:1.27", 3, 3, time.Hour),
		rs("web-bbb", "9", "nginx:1.26", 0, 0, 2*day)}
	mv := metaOf(t, appsv1.SchemeGroupVersion.WithResource("deployments"), d)
	doc, _ := renderDoc(t, deploymentDetail(buildDeployment(mv, d, rss, fixedNow)))

	type revRow struct{ Revision, Name, Href, Ready, Images, Age string }
	var revs []revRow
	var current []string
	byTestID(doc.Selection, "revision").Each(func(_ int, tr *goquery.Selection) {
		td := tr.Find("td")
		rev := tr.AttrOr("data-revision", "")
		revs = append(revs, revRow{rev, textOf(td.Eq(1)), td.Eq(1).Find("a").AttrOr("href", ""), textOf(td.Eq(2)),
			textOf(td.Eq(3)), textOf(td.Eq(4))})
		if textOf(td.Eq(0).Find(".badge")) == "current" {
			current = append(current, rev)
		}
	})
	wantDiff(t, "revisions, newest first", []revRow{
		{"10", "web-ccc", "/ui/c/c1/r/replicasets.apps/default/web-ccc", "3/3", "nginx:1.27", "60m"},
		{"9", "web-bbb", "/ui/c/c1/r/replicasets.apps/default/web-bbb", "0/0", "nginx:1.26", "2d"},
		{"2", "web-aaa", "/ui/c/c1/r/replicasets.apps/default/web-aaa", "0/0", "nginx:1.25", "10d"},
	}, revs)
	wantDiff(t, "revisions marked current", []string{"10"}, current)
	wantEqual(t, "replicas", textOf(byTestID(doc.Selection, "replicas")), "3 desired, 3 updated, 3 ready, 3 available, 3 total")
	wantEqual(t, "ready", textOf(byTestID(doc.Selection, "ready-count")), "3/3")
	wantEqual(t, "images", textOf(byTestID(doc.Selection, "images")), "nginx:1.27")
	pods := byTestID(doc.Selection, "deployment-pods")
	wantEqual(t, "selector", textOf(pods), "app=web")
	wantEqual(t, "pods link", pods.AttrOr("href", ""), "/ui/c/c1/r/pods?label=app%3Dweb&ns=default")
}

func TestSecretDetailHidesValues(t *testing.T) {
	const value = "hunter2-s3cr3t-VALUE"
	encoded := base64.StdEncoding.EncodeToString([]byte(value))
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db-creds", CreationTimestamp: ago(day),
			Annotations: map[string]string{
				// kubectl apply keeps the whole object here, data included.
				corev1.LastAppliedConfigAnnotation: `{"apiVersion":"v1","data":{"password":"` + encoded + `"},"kind":"Secret"}`,
				"owner":                            "payments",
			}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"password": []byte(value), "username": []byte("admin")},
	}
	v := secretView{Meta: metaOf(t, corev1.SchemeGroupVersion.WithResource("secrets"), s), Type: string(s.Type),
		Keys: []secretKey{{"password", len(s.Data["password"])}, {"username", len(s.Data["username"])}}}
	doc, raw := renderDoc(t, secretDetail(v))

	for _, secret := range []string{value, encoded, "admin"} {
		if strings.Contains(raw, secret) {
			t.Errorf("the secret's page contains %q", secret)
		}
	}
	type keyRow struct{ Key, Size, Reveal string }
	var keys []keyRow
	byTestID(doc.Selection, "secret-key").Each(func(_ int, tr *goquery.Selection) {
		keys = append(keys, keyRow{tr.AttrOr("data-key", ""), textOf(tr.Find("td").Eq(1)),
			byTestID(tr, "reveal").AttrOr("href", "")})
	})
	wantDiff(t, "keys", []keyRow{
		{"password", "20 bytes", "/ui/c/c1/r/secrets/default/db-creds/confirm/reveal?key=password"},
		{"username", "5 bytes", "/ui/c/c1/r/secrets/default/db-creds/confirm/reveal?key=username"},
	}, keys)
	wantEqual(t, "data count", textOf(byTestID(doc.Selection, "summary-Data")), "2")
	if !strings.Contains(textOf(doc.Selection), "owner=payments") {
		t.Error("the other annotations are not shown")
	}
}

// ---- Events ----

func TestEventTime(t *testing.T) {
	at := func(d time.Duration) time.Time { return fixedNow.Add(-d) }
	tests := []struct {
		name string
		ev   corev1.Event
		want time.Time
	}{
		{"last timestamp first", corev1.Event{LastTimestamp: metav1.NewTime(at(time.Minute)),
			EventTime: metav1.NewMicroTime(at(time.Hour)), FirstTimestamp: metav1.NewTime(at(2 * time.Hour))}, at(time.Minute)},
		{"then the event time", corev1.Event{EventTime: metav1.NewMicroTime(at(time.Hour)),
			FirstTimestamp: metav1.NewTime(at(2 * time.Hour))}, at(time.Hour)},
		{"then the first timestamp", corev1.Event{FirstTimestamp: metav1.NewTime(at(2 * time.Hour))}, at(2 * time.Hour)},
		{"else the creation", corev1.Event{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(at(3 * time.Hour))}},
			at(3 * time.Hour)},
		// events.k8s.io/v1 recorders report a repeated event as a series: eventTime is its first occurrence and
		// lastTimestamp is unset; kubectl events (and the API's own event table) take the series' last observation.
		{"a series' last observation", corev1.Event{EventTime: metav1.NewMicroTime(at(time.Hour)),
			Series: &corev1.EventSeries{Count: 12, LastObservedTime: metav1.NewMicroTime(at(time.Minute))}}, at(time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := eventTime(&tt.ev); !got.Equal(tt.want) {
				t.Errorf("eventTime = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEventsTable(t *testing.T) {
	backOff := eventView{Namespace: "default", Type: "Warning", Reason: "BackOff", Object: "Pod/web-2",
		ObjectHref: objectHref("c1", "pods", "default", "web-2"), Message: "Back-off restarting failed container app",
		Source: "kubelet", LastSeen: "5m", Count: 12, Warning: true}
	scheduled := eventView{Namespace: "default", Type: "Normal", Reason: "Scheduled", Object: "Pod/web-1",
		ObjectHref: objectHref("c1", "pods", "default", "web-1"), Message: "Successfully assigned default/web-1 to node-1",
		Source: "default-scheduler", LastSeen: "3d", Count: 1}
	type evRow struct{ Reason, LastSeen, Type, Badge, Object, Href, Message, Count string }
	tests := []struct {
		name       string
		v          eventsView
		want       []evRow
		wantObject bool   // the Object column shows
		wantText   string // a line the region shows
	}{
		{"newest first, warnings red", eventsView{Rows: []eventView{backOff, scheduled}, Total: 2, Limit: 50},
			[]evRow{{"BackOff", "5m", "Warning", "bad", "Pod/web-2", "/ui/c/c1/r/pods/default/web-2", "Back-off restarting failed container app", "12"},
				{"Scheduled", "3d", "Normal", "", "Pod/web-1", "/ui/c/c1/r/pods/default/web-1", "Successfully assigned default/web-1 to node-1", "1"}},
			true, ""},
		{"one object's events", eventsView{Rows: []eventView{backOff}, Total: 1, Limit: 50, ForObj: true},
			[]evRow{{"BackOff", "5m", "Warning", "bad", "", "", "Back-off restarting failed container app", "12"}}, false, ""},
		{"more than the limit", eventsView{Rows: []eventView{backOff}, Total: 3, Limit: 1},
			[]evRow{{"BackOff", "5m", "Warning", "bad", "Pod/web-2", "/ui/c/c1/r/pods/default/web-2", "Back-off restarting failed container app", "12"}},
			true, "The newest 1 of 3 events."},
		{"no events", eventsView{Limit: 50}, nil, false, "No events."},
		{"no warnings", eventsView{Limit: 50, Warning: true}, nil, false, "No warnings."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, _ := renderDoc(t, eventsTable(tt.v))
			var got []evRow
			byTestID(doc.Selection, "event").Each(func(_ int, tr *goquery.Selection) {
				td := tr.Find("td")
				r := evRow{Reason: tr.AttrOr("data-reason", ""), LastSeen: textOf(td.Eq(0)), Type: textOf(td.Eq(1)),
					Badge: badgeClass(td.Eq(1).Find(".badge"))}
				rest := td.Slice(3, td.Length())
				if !tt.v.ForObj {
					r.Object, r.Href = textOf(rest.Eq(0)), rest.Eq(0).Find("a").AttrOr("href", "")
					rest = rest.Slice(1, rest.Length())
				}
				r.Message, r.Count = textOf(rest.Eq(0)), textOf(rest.Eq(2))
				got = append(got, r)
			})
			wantDiff(t, "events", tt.want, got)
			headers := textsOf(byTestID(doc.Selection, "events").Find("thead th"))
			wantEqual(t, "Object column", slices.Contains(headers, "Object"), tt.wantObject)
			if tt.wantText != "" && !strings.Contains(textOf(doc.Selection), tt.wantText) {
				t.Errorf("the region does not say %q: %q", tt.wantText, textOf(doc.Selection))
			}
		})
	}
}

// ---- Escaping ----

const xss = `<script>alert(1)</script>`

func TestComponentsEscape(t *testing.T) {
	evil := mkPod("default", xss, time.Hour, labelled("app", xss), onNode("node-1", "10.0.0.1"), runningReady(time.Hour))
	evil.Annotations = map[string]string{"note": xss + `"'&`}
	tests := []struct {
		name   string
		render func(t *testing.T) templ.Component
		// where the text must appear, verbatim, as text
		testid, want string
	}{
		{"object name in a list", func(t *testing.T) templ.Component {
			return listTable(buildList(entriesOf(evil), podsResource(t), "c1", listQuery{Namespace: "default", Page: 1, Size: 50}, fixedNow))
		}, "row-link", xss},
		{"label on a detail", func(t *testing.T) templ.Component {
			return podDetail(buildPod(metaOf(t, corev1.SchemeGroupVersion.WithResource("pods"), evil), evil, fixedNow))
		}, "labels", "app=" + xss},
		{"annotation on a detail", func(t *testing.T) templ.Component {
			return genericDetail(metaOf(t, corev1.SchemeGroupVersion.WithResource("pods"), evil))
		}, "meta", "note=" + xss + `"'&`},
		{"event message", func(t *testing.T) templ.Component {
			return eventsTable(eventsView{Rows: []eventView{{Type: "Warning", Reason: `"><b>`, Object: "Pod/" + xss,
				Message: xss, Count: 1, Warning: true}}, Total: 1, Limit: 50})
		}, "event", xss},
		{"filter error", func(t *testing.T) templ.Component {
			return listTable(buildList(nil, podsResource(t), "c1", listQuery{Label: xss, Page: 1, Size: 50}, fixedNow))
		}, "filter-error", "label selector: found '<'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, raw := renderDoc(t, tt.render(t))
			wantEqual(t, "script elements", doc.Find("script").Length(), 0)
			wantEqual(t, "b elements", doc.Find("b").Length(), 0)
			if strings.Contains(raw, "<script") {
				t.Errorf("unescaped <script in %s", raw)
			}
			if got := textOf(byTestID(doc.Selection, tt.testid)); !strings.Contains(got, tt.want) {
				t.Errorf("[data-testid=%s] %q does not show %q as text", tt.testid, got, tt.want)
			}
		})
	}
	t.Run("attribute values", func(t *testing.T) {
		doc, _ := renderDoc(t, listTable(buildList(entriesOf(evil), podsResource(t), "c1",
			listQuery{Namespace: "default", Page: 1, Size: 50}, fixedNow)))
		wantEqual(t, "data-name", byTestID(doc.Selection, "row").AttrOr("data-name", ""), xss)
		wantEqual(t, "link", byTestID(doc.Selection, "row-link").AttrOr("href", ""),
			"/ui/c/c1/r/pods/default/"+url.PathEscape(xss))
	})
}

// ---- YAML ----

// Quantities read as people read them (issue 22: the dashboard showed memory as 24683748Ki).
func TestHumanQuantity(t *testing.T) {
	for _, c := range []struct {
		name corev1.ResourceName
		q    string
		want string
	}{
		{corev1.ResourceMemory, "24683748Ki", "23.5 GiB"},
		{corev1.ResourceMemory, "512Mi", "512 MiB"},
		{corev1.ResourceMemory, "1G", "953.7 MiB"},
		{corev1.ResourceMemory, "100", "100 B"},
		{corev1.ResourceEphemeralStorage, "100Gi", "100 GiB"},
		{"hugepages-2Mi", "4Mi", "4 MiB"},
		{corev1.ResourceCPU, "2", "2 cores"},
		{corev1.ResourceCPU, "1000m", "1 core"},
		{corev1.ResourceCPU, "250m", "0.25 cores"},
		{corev1.ResourceCPU, "0", "0"},
		{corev1.ResourcePods, "110", "110"},
	} {
		if got := humanQuantity(c.name, resource.MustParse(c.q)); got != c.want {
			t.Errorf("humanQuantity(%s, %s) = %q, want %q", c.name, c.q, got, c.want)
		}
	}
}
