package kubeapi

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/wheelhouse-dev/wheelhouse/server/openapi"
	"github.com/wheelhouse-dev/wheelhouse/server/resources"
)

// addEphemeral patches ec into pod through pods/ephemeralcontainers as the conformance suite's
// AddEphemeralContainerSync and kubectl debug do: a strategic merge patch from the pod to the pod with it.
func addEphemeral(t *testing.T, cs kubernetes.Interface, pod *corev1.Pod, ec corev1.EphemeralContainer) (*corev1.Pod, error) {
	t.Helper()
	before, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	withEC := pod.DeepCopy()
	withEC.Spec.EphemeralContainers = append(withEC.Spec.EphemeralContainers, ec)
	after, err := json.Marshal(withEC)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(before, after, pod)
	if err != nil {
		t.Fatal(err)
	}
	return cs.CoreV1().Pods(pod.Namespace).Patch(t.Context(), pod.Name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{}, "ephemeralcontainers")
}

func debugContainer(name string) corev1.EphemeralContainer {
	return corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: name, Image: "busybox",
		Command: []string{"sh"}, Stdin: true, TTY: true}}
}

// TestEphemeralContainersSubresource: pods/ephemeralcontainers adds ephemeral containers by every patch type and
// by update, bumping the generation and changing nothing else; it answers get with the pod.
func TestEphemeralContainersSubresource(t *testing.T) {
	// The real schema, in which ephemeralContainers is a list keyed by name (the deduced one's lists are atomic).
	spec, err := openapi.Build(resources.Default(), "v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	tc, err := managedfields.NewTypeConverter(spec.Models(), false)
	if err != nil {
		t.Fatal(err)
	}
	env := newTestEnv(t, func(c *Config) { c.TypeConverter = tc })
	cs := env.client(t, "c1")
	ctx := t.Context()
	pods := cs.CoreV1().Pods("default")
	pod, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "target", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox", Command: []string{"sleep", "1d"}}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Generation != 1 {
		t.Fatalf("generation on create = %d, want 1", pod.Generation)
	}

	// A strategic merge patch, as kubectl debug and the conformance suite send; one that also tries to change the
	// pod's labels and container changes its ephemeral containers only.
	withEC := pod.DeepCopy()
	withEC.Labels["app"] = "other"
	withEC.Spec.Containers[0].Image = "nginx"
	patched, err := addEphemeral(t, cs, withEC, debugContainer("debugger"))
	if err != nil {
		t.Fatal(err)
	}
	if len(patched.Spec.EphemeralContainers) != 1 || patched.Generation != 2 {
		t.Fatalf("after the patch: ephemeral containers %v, generation %d; want debugger and 2", patched.Spec.EphemeralContainers, patched.Generation)
	}
	if got := patched.Spec.EphemeralContainers[0]; got.TerminationMessagePath != corev1.TerminationMessagePathDefault ||
		got.ImagePullPolicy != corev1.PullAlways || got.TerminationMessagePolicy != corev1.TerminationMessageReadFile {
		t.Errorf("the ephemeral container is not defaulted: %+v", got)
	}
	if patched.Labels["app"] != "web" || patched.Spec.Containers[0].Image != "busybox" {
		t.Errorf("the subresource changed more than ephemeral containers: labels %v image %s", patched.Labels, patched.Spec.Containers[0].Image)
	}
	if got, err := pods.Get(ctx, "target", metav1.GetOptions{}); err != nil || got.Generation != 2 || len(got.Spec.EphemeralContainers) != 1 {
		t.Fatalf("the stored pod: %v, %v", got, err)
	}

	// JSON patch and merge patch.
	jsonPatch := `[{"op":"add","path":"/spec/ephemeralContainers/-","value":{"name":"json","image":"busybox"}}]`
	if p, err := pods.Patch(ctx, "target", types.JSONPatchType, []byte(jsonPatch), metav1.PatchOptions{}, "ephemeralcontainers"); err != nil ||
		len(p.Spec.EphemeralContainers) != 2 || p.Generation != 3 {
		t.Fatalf("JSON patch: %v, %v", p, err)
	}
	cur, err := pods.Get(ctx, "target", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	merge, _ := json.Marshal(map[string]any{"spec": map[string]any{"ephemeralContainers": append(cur.Spec.EphemeralContainers,
		corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "merge", Image: "busybox"}})}})
	if p, err := pods.Patch(ctx, "target", types.MergePatchType, merge, metav1.PatchOptions{}, "ephemeralcontainers"); err != nil ||
		len(p.Spec.EphemeralContainers) != 3 || p.Generation != 4 {
		t.Fatalf("merge patch: %v, %v", p, err)
	}

	// Server-side apply: the applier's fields are the ephemeral container it applied.
	apply := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"target"},"spec":{"ephemeralContainers":[{"name":"applied","image":"busybox"}]}}`
	applied, err := pods.Patch(ctx, "target", types.ApplyPatchType, []byte(apply), metav1.PatchOptions{FieldManager: "debugger"}, "ephemeralcontainers")
	if err != nil {
		t.Fatal(err)
	}
	if len(applied.Spec.EphemeralContainers) != 4 || applied.Generation != 5 {
		t.Fatalf("apply: ephemeral containers %d, generation %d; want 4 and 5", len(applied.Spec.EphemeralContainers), applied.Generation)
	}
	i := slices.IndexFunc(applied.ManagedFields, func(m metav1.ManagedFieldsEntry) bool { return m.Manager == "debugger" })
	if i < 0 || applied.ManagedFields[i].Subresource != "ephemeralcontainers" {
		t.Errorf("managed fields of the applier: %+v", applied.ManagedFields)
	}

	// Update, as the conformance suite's UpdateEphemeralContainers.
	cur, err = pods.Get(ctx, "target", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.EphemeralContainers = append(cur.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "debugger2", Image: "agnhost", ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile}})
	updated, err := pods.UpdateEphemeralContainers(ctx, "target", cur, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(updated.Spec.EphemeralContainers) != 5 || updated.Generation != 6 {
		t.Fatalf("update: ephemeral containers %d, generation %d; want 5 and 6", len(updated.Spec.EphemeralContainers), updated.Generation)
	}
	// The same list again changes nothing: no new generation.
	if same, err := pods.UpdateEphemeralContainers(ctx, "target", updated, metav1.UpdateOptions{}); err != nil || same.Generation != 6 {
		t.Fatalf("an update without a change: %v, %v", same, err)
	}
	// A stale resourceVersion is a conflict.
	if _, err := pods.UpdateEphemeralContainers(ctx, "target", cur, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("an update from a stale pod: %v, want a conflict", err)
	}

	// Get, as the conformance suite reads it (dynamic client, subresource ephemeralcontainers).
	dyn, err := dynamic.NewForConfig(env.config("c1", adminToken))
	if err != nil {
		t.Fatal(err)
	}
	u, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Namespace("default").
		Get(ctx, "target", metav1.GetOptions{}, "ephemeralcontainers")
	if err != nil {
		t.Fatal(err)
	}
	ecs, _, _ := unstructured.NestedSlice(u.Object, "spec", "ephemeralContainers")
	if u.GetKind() != "Pod" || len(ecs) != 5 {
		t.Errorf("get: kind %q with %d ephemeral containers, want a Pod with 5", u.GetKind(), len(ecs))
	}
}

// TestEphemeralContainersRefused: what pods/ephemeralcontainers refuses is 422 Invalid with the field's cause; a
// pod's create and its own update may not set or change ephemeral containers; other verbs are 405.
func TestEphemeralContainersRefused(t *testing.T) {
	env := newTestEnv(t)
	cs := env.client(t, "c1")
	ctx := t.Context()
	pods := cs.CoreV1().Pods("default")
	pod, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "target"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err = addEphemeral(t, cs, pod, debugContainer("debugger"))
	if err != nil {
		t.Fatal(err)
	}
	always := corev1.ContainerRestartPolicyAlways
	withPorts := debugContainer("ports")
	withPorts.Ports = []corev1.ContainerPort{{ContainerPort: 80}}
	withRestart := debugContainer("restart")
	withRestart.RestartPolicy = &always
	withProbe := debugContainer("probe")
	withProbe.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	targeted := debugContainer("targeted")
	targeted.TargetContainerName = "nope"
	for _, tt := range []struct {
		name  string
		ec    corev1.EphemeralContainer
		field string
	}{
		{"ports", withPorts, "spec.ephemeralContainers[1].ports"},
		{"restart policy", withRestart, "spec.ephemeralContainers[1].restartPolicy"},
		{"probe", withProbe, "spec.ephemeralContainers[1].readinessProbe"},
		{"unknown target", targeted, "spec.ephemeralContainers[1].targetContainerName"},
		{"name of a container", debugContainer("app"), "spec.ephemeralContainers[1].name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := addEphemeral(t, cs, pod, tt.ec)
			expectInvalidField(t, err, tt.field)
		})
	}

	changed := pod.DeepCopy()
	changed.Spec.EphemeralContainers[0].Image = "alpine"
	_, err = pods.UpdateEphemeralContainers(ctx, "target", changed, metav1.UpdateOptions{})
	expectInvalidField(t, err, "spec.ephemeralContainers")
	removed := pod.DeepCopy()
	removed.Spec.EphemeralContainers = nil
	_, err = pods.UpdateEphemeralContainers(ctx, "target", removed, metav1.UpdateOptions{})
	expectInvalidField(t, err, "spec.ephemeralContainers")

	// The pod itself: an update or patch may not add, change or remove them; a create may not set them.
	viaPod := pod.DeepCopy()
	viaPod.Spec.EphemeralContainers = append(viaPod.Spec.EphemeralContainers, debugContainer("other"))
	_, err = pods.Update(ctx, viaPod, metav1.UpdateOptions{})
	expectInvalidField(t, err, "spec")
	_, err = addEphemeralToPod(t, cs, pod, debugContainer("other"))
	expectInvalidField(t, err, "spec")
	fresh := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "busybox"}}, EphemeralContainers: []corev1.EphemeralContainer{debugContainer("d")}}}
	_, err = pods.Create(ctx, fresh, metav1.CreateOptions{})
	expectInvalidField(t, err, "spec.ephemeralContainers")

	if got, err := pods.Get(ctx, "target", metav1.GetOptions{}); err != nil || got.Generation != 2 || len(got.Spec.EphemeralContainers) != 1 {
		t.Fatalf("refused writes changed the pod: %v, %v", got, err)
	}

	// Verbs the subresource does not serve.
	rc := cs.CoreV1().RESTClient()
	for _, verb := range []string{"DELETE", "POST"} {
		err := rc.Verb(verb).Namespace("default").Resource("pods").Name("target").SubResource("ephemeralcontainers").
			Body([]byte("{}")).Do(ctx).Error()
		if !apierrors.IsMethodNotSupported(err) {
			t.Errorf("%s pods/ephemeralcontainers: %v, want 405", verb, err)
		}
	}
	// A pod that does not exist.
	missing := removed.DeepCopy()
	missing.Name, missing.ResourceVersion = "missing", ""
	if _, err := pods.UpdateEphemeralContainers(ctx, "missing", missing, metav1.UpdateOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("update of a missing pod: %v, want 404", err)
	}
}

// addEphemeralToPod is addEphemeral on the pod itself rather than its subresource.
func addEphemeralToPod(t *testing.T, cs kubernetes.Interface, pod *corev1.Pod, ec corev1.EphemeralContainer) (*corev1.Pod, error) {
	t.Helper()
	before, _ := json.Marshal(pod)
	withEC := pod.DeepCopy()
	withEC.Spec.EphemeralContainers = append(withEC.Spec.EphemeralContainers, ec)
	after, _ := json.Marshal(withEC)
	patch, err := strategicpatch.CreateTwoWayMergePatch(before, after, pod)
	if err != nil {
		t.Fatal(err)
	}
	return cs.CoreV1().Pods(pod.Namespace).Patch(t.Context(), pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
}

// expectInvalidField requires err to be 422 Invalid with a cause for field.
func expectInvalidField(t *testing.T, err error, field string) {
	t.Helper()
	var st apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &st) {
		t.Fatalf("got %v, want 422 Invalid on %s", err, field)
	}
	d := st.Status().Details
	if d == nil || !slices.ContainsFunc(d.Causes, func(c metav1.StatusCause) bool { return c.Field == field }) {
		t.Errorf("causes %+v, want one on %s", d, field)
	}
}

// TestEphemeralContainersDiscovery: discovery shows pods/ephemeralcontainers as upstream's API server does, kind
// Pod with get, patch and update, in both the legacy and the aggregated documents.
func TestEphemeralContainersDiscovery(t *testing.T) {
	env := newTestEnv(t)
	dc, err := discovery.NewDiscoveryClientForConfig(env.config("c1", adminToken))
	if err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, list *metav1.APIResourceList) {
		i := slices.IndexFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "pods/ephemeralcontainers" })
		if i < 0 {
			t.Fatal("pods/ephemeralcontainers is not discovered")
		}
		r := list.APIResources[i]
		verbs := slices.Sorted(slices.Values(r.Verbs))
		if r.Kind != "Pod" || !r.Namespaced || !slices.Equal(verbs, []string{"get", "patch", "update"}) {
			t.Errorf("pods/ephemeralcontainers: kind %q namespaced %v verbs %v, want Pod, true, [get patch update]", r.Kind, r.Namespaced, r.Verbs)
		}
	}
	t.Run("aggregated", func(t *testing.T) {
		_, lists, err := dc.ServerGroupsAndResources()
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(lists, func(l *metav1.APIResourceList) bool { return l.GroupVersion == "v1" })
		if i < 0 {
			t.Fatal("no core v1 resources")
		}
		check(t, lists[i])
	})
	t.Run("legacy", func(t *testing.T) {
		var list metav1.APIResourceList
		body, err := dc.RESTClient().Get().AbsPath("/api/v1").SetHeader("Accept", "application/json").DoRaw(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatal(err)
		}
		check(t, &list)
	})
}
