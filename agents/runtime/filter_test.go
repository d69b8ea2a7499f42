package runtime_test

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
)

func TestMatchContainer(t *testing.T) {
	c := &runtimeapi.Container{
		Id: "c1", PodSandboxId: "s1", State: runtimeapi.ContainerState_CONTAINER_RUNNING,
		Labels: map[string]string{"app": "web", "tier": "front"},
	}
	running := &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}
	exited := &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_EXITED}
	for _, tc := range []struct {
		name   string
		filter *runtimeapi.ContainerFilter
		want   bool
	}{
		{"nil", nil, true},
		{"empty", &runtimeapi.ContainerFilter{}, true},
		{"id", &runtimeapi.ContainerFilter{Id: "c1"}, true},
		{"other id", &runtimeapi.ContainerFilter{Id: "c2"}, false},
		{"id prefix is not a match", &runtimeapi.ContainerFilter{Id: "c"}, false},
		{"sandbox", &runtimeapi.ContainerFilter{PodSandboxId: "s1"}, true},
		{"other sandbox", &runtimeapi.ContainerFilter{PodSandboxId: "s2"}, false},
		{"state", &runtimeapi.ContainerFilter{State: running}, true},
		{"other state", &runtimeapi.ContainerFilter{State: exited}, false},
		{"labels subset", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"app": "web"}}, true},
		{"label value differs", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"app": "db"}}, false},
		{"label missing", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"zone": "a"}}, false},
		{"all together", &runtimeapi.ContainerFilter{Id: "c1", PodSandboxId: "s1", State: running, LabelSelector: map[string]string{"tier": "front"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runtime.MatchContainer(tc.filter, c); got != tc.want {
				t.Errorf("MatchContainer = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMatchSandbox(t *testing.T) {
	s := &runtimeapi.PodSandbox{Id: "s1", State: runtimeapi.PodSandboxState_SANDBOX_READY, Labels: map[string]string{"io.kubernetes.pod.uid": "u"}}
	notReady := &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}
	for _, tc := range []struct {
		name   string
		filter *runtimeapi.PodSandboxFilter
		want   bool
	}{
		{"nil", nil, true},
		{"id", &runtimeapi.PodSandboxFilter{Id: "s1"}, true},
		{"state", &runtimeapi.PodSandboxFilter{State: notReady}, false},
		{"label", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": "u"}}, true},
		{"other label", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": "v"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runtime.MatchSandbox(tc.filter, s); got != tc.want {
				t.Errorf("MatchSandbox = %v, want %v", got, tc.want)
			}
		})
	}
}
