package kubelet

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// addEphemeral adds ec to the pod through pods/ephemeralcontainers, as kubectl debug does.
func (e *podEnv) addEphemeral(name string, ec corev1.EphemeralContainer) {
	e.t.Helper()
	pod := e.pod(name)
	before, _ := json.Marshal(pod)
	after := pod.DeepCopy()
	after.Spec.EphemeralContainers = append(after.Spec.EphemeralContainers, ec)
	afterJSON, _ := json.Marshal(after)
	patch, err := strategicpatch.CreateTwoWayMergePatch(before, afterJSON, pod)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.admin.CoreV1().Pods("default").Patch(e.t.Context(), name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{}, "ephemeralcontainers"); err != nil {
		e.t.Fatal(err)
	}
}

// instances are the runtime's containers named name, in any state.
func (e *podEnv) instances(name string) []*runtimeapi.Container {
	list, err := e.rt.ListContainers(e.t.Context(), &runtimeapi.ContainerFilter{LabelSelector: map[string]string{labelContainerName: name}})
	if err != nil {
		e.t.Fatal(err)
	}
	return list
}

func ephemeralStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	return previousStatus(p.Status.EphemeralContainerStatuses, name)
}

func debugger(name, target string) corev1.EphemeralContainer {
	return corev1.EphemeralContainer{TargetContainerName: target, EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: name, Image: "busybox", Command: []string{"sh"}, Stdin: true, TTY: true}}
}

// TestEphemeralContainerRunsOnce: an ephemeral container added to a running pod is created once, in the pod's
// sandbox and its target's process namespace, reported in ephemeralContainerStatuses, and never restarted after
// it exits; the pod's phase and readiness do not depend on it.
func TestEphemeralContainerRunsOnce(t *testing.T) {
	e := newPodEnv(t)
	e.create(simple("web", corev1.RestartPolicyAlways))
	e.until("Running and Ready", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && podCondition(p, corev1.PodReady) == corev1.ConditionTrue
	}, "web")
	app := e.running("app")

	e.addEphemeral("web", debugger("debugger", "app"))
	p := e.until("the ephemeral container running", func(p *corev1.Pod) bool {
		cs := ephemeralStatus(p, "debugger")
		return cs != nil && cs.State.Running != nil
	}, "web")
	id := e.running("debugger")
	cs := ephemeralStatus(p, "debugger")
	if id == "" || cs.ContainerID != "process://"+id || cs.Image != "busybox" || cs.ImageID != "busybox" || cs.Ready ||
		cs.Started != nil || cs.RestartCount != 0 {
		t.Errorf("ephemeral container status %+v (runtime id %q)", cs, id)
	}
	if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].Name != "app" {
		t.Errorf("container statuses %+v", p.Status.ContainerStatuses)
	}
	cfg := e.rt.config("debugger")
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns.GetPid() != runtimeapi.NamespaceMode_TARGET || ns.GetTargetId() != app || ns.GetNetwork() != runtimeapi.NamespaceMode_POD {
		t.Errorf("namespaces %v, want pid TARGET of %s in the pod's network", ns, app)
	}
	if !cfg.Stdin || !cfg.Tty || cfg.Metadata.GetAttempt() != 0 {
		t.Errorf("config: stdin %v tty %v attempt %d", cfg.Stdin, cfg.Tty, cfg.Metadata.GetAttempt())
	}
	sbs, err := e.rt.ListPodSandbox(t.Context(), &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{labelPodName: "web"}})
	if err != nil || len(sbs) != 1 {
		t.Fatalf("sandboxes %v %v", sbs, err)
	}
	if in := e.instances("debugger"); len(in) != 1 || in[0].PodSandboxId != sbs[0].Id {
		t.Fatalf("ephemeral instances %v, want one in sandbox %s", in, sbs[0].Id)
	}

	// It exits, with an error: terminated, never started again (a restartPolicy Always pod restarts its own
	// containers, not this one).
	if err := e.rt.Exit(id, 3, "Error", ""); err != nil {
		t.Fatal(err)
	}
	p = e.until("the ephemeral container terminated", func(p *corev1.Pod) bool {
		cs := ephemeralStatus(p, "debugger")
		return cs != nil && cs.State.Terminated != nil
	}, "web")
	if term := ephemeralStatus(p, "debugger").State.Terminated; term.ExitCode != 3 || term.Reason != "Error" || term.ContainerID != "process://"+id {
		t.Errorf("terminated %+v", term)
	}
	if p.Status.Phase != corev1.PodRunning || podCondition(p, corev1.PodReady) != corev1.ConditionTrue {
		t.Errorf("the pod's phase %s and readiness %s depend on its ephemeral container", p.Status.Phase, podCondition(p, corev1.PodReady))
	}
	// Another one: once it runs, the worker has synced with the first one exited, and left it so.
	e.addEphemeral("web", debugger("debugger2", ""))
	p = e.until("the second ephemeral container running", func(p *corev1.Pod) bool {
		cs := ephemeralStatus(p, "debugger2")
		return cs != nil && cs.State.Running != nil
	}, "web")
	if in := e.instances("debugger"); len(in) != 1 {
		t.Errorf("the exited ephemeral container has %d instances, want 1 (never restarted)", len(in))
	}
	if ns := e.rt.config("debugger2").GetLinux().GetSecurityContext().GetNamespaceOptions(); ns.GetPid() == runtimeapi.NamespaceMode_TARGET {
		t.Errorf("an ephemeral container without a target shares a process namespace: %v", ns)
	}
	names := []string{}
	for _, cs := range p.Status.EphemeralContainerStatuses {
		names = append(names, cs.Name)
	}
	if strings.Join(names, ",") != "debugger,debugger2" {
		t.Errorf("ephemeral statuses %v, want sorted by name", names)
	}
}

// TestEphemeralContainerBeforeInit: an ephemeral container starts while an init container still runs. One that
// targets a container not created yet waits with CreateContainerConfigError until its target exists.
func TestEphemeralContainerBeforeInit(t *testing.T) {
	e := newPodEnv(t)
	pod := simple("web", corev1.RestartPolicyAlways)
	pod.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox", Command: []string{"sleep", "1d"}}}
	e.create(pod)
	e.until("the init container running", func(p *corev1.Pod) bool {
		return len(p.Status.InitContainerStatuses) == 1 && p.Status.InitContainerStatuses[0].State.Running != nil
	}, "web")

	e.addEphemeral("web", debugger("debugger", ""))
	e.addEphemeral("web", debugger("early", "app"))
	p := e.until("the ephemeral container running beside the init container", func(p *corev1.Pod) bool {
		cs := ephemeralStatus(p, "debugger")
		return cs != nil && cs.State.Running != nil
	}, "web")
	if e.running("setup") == "" || e.running("app") != "" || p.Status.Phase != corev1.PodPending {
		t.Fatalf("init container running %v, app running %v, phase %s", e.running("setup") != "", e.running("app") != "", p.Status.Phase)
	}
	p = e.until("the targeting one waiting for its target", func(p *corev1.Pod) bool {
		cs := ephemeralStatus(p, "early")
		return cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "CreateContainerConfigError"
	}, "web")
	if msg := ephemeralStatus(p, "early").State.Waiting.Message; msg != "unable to find target container app" {
		t.Errorf("waiting message %q", msg)
	}
	if len(e.instances("early")) != 0 {
		t.Error("an ephemeral container was created without its target")
	}

	// The init container completes, the app starts: the targeting one starts in its process namespace.
	if err := e.rt.Exit(e.running("setup"), 0, "", ""); err != nil {
		t.Fatal(err)
	}
	e.until("the targeting one running", func(p *corev1.Pod) bool {
		cs := ephemeralStatus(p, "early")
		return cs != nil && cs.State.Running != nil
	}, "web")
	if ns := e.rt.config("early").GetLinux().GetSecurityContext().GetNamespaceOptions(); ns.GetPid() != runtimeapi.NamespaceMode_TARGET ||
		ns.GetTargetId() != e.running("app") {
		t.Errorf("namespaces %v, want pid TARGET of app %s", ns, e.running("app"))
	}
}

// TestEphemeralContainerSharedProcessNamespace: in a pod whose containers share one process namespace the
// target's is the pod's already; the ephemeral container is not pointed at it.
func TestEphemeralContainerSharedProcessNamespace(t *testing.T) {
	e := newPodEnv(t)
	pod := simple("web", corev1.RestartPolicyAlways)
	share := true
	pod.Spec.ShareProcessNamespace = &share
	e.create(pod)
	e.until("app running", func(p *corev1.Pod) bool { return e.running("app") != "" }, "web")
	e.addEphemeral("web", debugger("debugger", "app"))
	e.until("the ephemeral container running", func(p *corev1.Pod) bool {
		cs := ephemeralStatus(p, "debugger")
		return cs != nil && cs.State.Running != nil
	}, "web")
	if ns := e.rt.config("debugger").GetLinux().GetSecurityContext().GetNamespaceOptions(); ns.GetPid() == runtimeapi.NamespaceMode_TARGET {
		t.Errorf("namespaces %v: TARGET in a pod sharing its process namespace", ns)
	}
}

// TestEphemeralStatusAfterSandboxLoss: an ephemeral container the status shows created, which the runtime no
// longer has (its sandbox was replaced), is not started again; it is reported ended, with upstream's
// ContainerStatusUnknown when it was last seen running.
func TestEphemeralStatusAfterSandboxLoss(t *testing.T) {
	pod := testPod("web", "app")
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{debugger("gone", ""), debugger("done", ""), debugger("new", "")}
	started := metav1.Now()
	pod.Status.EphemeralContainerStatuses = []corev1.ContainerStatus{
		{Name: "gone", ContainerID: "process://a", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}},
		{Name: "done", ContainerID: "process://b", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}},
	}
	for _, name := range []string{"gone", "done"} {
		if !ephemeralRan(pod, name) {
			t.Errorf("%s: not known to have run", name)
		}
	}
	if ephemeralRan(pod, "new") {
		t.Error("new: known to have run")
	}
	st := ephemeralStatuses(pod, observed{waiting: map[string][2]string{}}, "process", "ContainerCreating")
	if len(st) != 3 || st[0].Name != "done" || st[1].Name != "gone" || st[2].Name != "new" {
		t.Fatalf("statuses %+v", st)
	}
	if term := st[1].State.Terminated; term == nil || term.ExitCode != 137 || term.Reason != "ContainerStatusUnknown" || !term.StartedAt.Equal(&started) {
		t.Errorf("gone: %+v", st[1].State)
	}
	if term := st[0].State.Terminated; term == nil || term.Reason != "Completed" {
		t.Errorf("done: %+v", st[0].State)
	}
	if w := st[2].State.Waiting; w == nil || w.Reason != "ContainerCreating" || st[2].ContainerID != "" {
		t.Errorf("new: %+v", st[2])
	}
}

// TestEphemeralContainerLogsThroughAPI: the kubelet API finds ephemeral containers by name, and says why one
// waits from ephemeralContainerStatuses.
func TestEphemeralContainerLogsThroughAPI(t *testing.T) {
	f := newAPIFixture(t)
	pod := testPod("web", "app")
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{debugger("debugger", "app"), debugger("waiting", "app")}
	f.run(pod, "app", 0, runtimeapi.ContainerState_CONTAINER_RUNNING)
	c := f.run(pod, "debugger", 0, runtimeapi.ContainerState_CONTAINER_RUNNING)
	f.writeLog(c.LogPath, cri(0, "stdout F polo"))
	pod.Status.EphemeralContainerStatuses = []corev1.ContainerStatus{{Name: "waiting", State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError"}}}}
	f.adopt(pod)
	f.expect("/containerLogs/default/web/debugger", 200, "polo\n")
	f.expect("/containerLogs/default/web/waiting", 400, `container "waiting" in pod "web" is waiting to start: CreateContainerConfigError`)
	// Exited, it is not going to be restarted: its log is the current one, and there is no previous.
	if err := f.rt.Exit(c.Id, 0, "", ""); err != nil {
		t.Fatal(err)
	}
	f.expect("/containerLogs/default/web/debugger", 200, "polo\n")
	f.expect("/containerLogs/default/web/debugger?previous=true", 400, `previous terminated container "debugger" in pod "web" not found`)
}
