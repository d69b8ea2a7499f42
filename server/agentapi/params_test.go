package agentapi

import (
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
)

func testPod(node string, containers ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: node}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c})
	}
	return p
}

// TestKubeletTarget: the kubelet path and parameters kube-apiserver would use for each subresource.
func TestKubeletTarget(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	for _, c := range []struct {
		name  string
		req   kubeapi.ConnectRequest
		query string
		want  target
	}{
		{"logs", kubeapi.ConnectRequest{Subresource: "log", Object: testPod("n1", "app")},
			"follow=true&tailLines=10&timestamps=1&sinceSeconds=5&limitBytes=100&previous=false&container=app",
			target{node: "n1", path: "/containerLogs/ns/p/app", query: "follow=true&limitBytes=100&sinceSeconds=5&tailLines=10&timestamps=true"}},
		{"logs since a time", kubeapi.ConnectRequest{Subresource: "log", Object: testPod("n1", "app")},
			"sinceTime=2024-01-02T03:04:05%2B02:00",
			target{node: "n1", path: "/containerLogs/ns/p/app", query: "sinceTime=2024-01-02T01%3A04%3A05Z"}},
		{"logs without a node", kubeapi.ConnectRequest{Subresource: "log", Object: testPod("", "app")}, "",
			target{path: "/containerLogs/ns/p/app", noContent: true}},
		{"exec", kubeapi.ConnectRequest{Subresource: "exec", Object: testPod("n1", "app")},
			"command=sh&command=-c&command=echo+hi&stdin=true&stdout=1&stderr=false&tty=true",
			target{node: "n1", path: "/exec/ns/p/app", query: "command=sh&command=-c&command=echo+hi&input=1&output=1&tty=1"}},
		{"attach ignores commands", kubeapi.ConnectRequest{Subresource: "attach", Object: testPod("n1", "app")},
			"command=sh&stdout=true", target{node: "n1", path: "/attach/ns/p/app", query: "output=1"}},
		{"websocket port-forward", kubeapi.ConnectRequest{Subresource: "portforward", Object: testPod("n1", "app")},
			"ports=80&ports=443", target{node: "n1", path: "/portForward/ns/p", query: "port=80%2C443"}},
		{"spdy port-forward", kubeapi.ConnectRequest{Subresource: "portforward", Object: testPod("n1")}, "",
			target{node: "n1", path: "/portForward/ns/p"}},
		{"node proxy", kubeapi.ConnectRequest{Subresource: "proxy", Object: node, Path: "/stats/summary"}, "a=1&b=2",
			target{node: "n1", path: "/stats/summary", query: "a=1&b=2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, _ := url.ParseQuery(c.query)
			got, err := kubeletTarget(c.req, q, c.query)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(target{})); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestKubeletTargetErrors: upstream's refusals, with upstream's messages.
func TestKubeletTargetErrors(t *testing.T) {
	withInit := testPod("n1", "a", "b")
	withInit.Spec.InitContainers = []corev1.Container{{Name: "i"}}
	withInit.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "dbg"}}}
	badDefault := testPod("n1", "a", "b")
	badDefault.Annotations = map[string]string{DefaultContainerAnnotation: "gone"}
	for _, c := range []struct {
		name, sub string
		pod       *corev1.Pod
		query     string
		code      int32
		msg       string
	}{
		{"exec without a node", "exec", testPod("", "app"), "", 400, "pod p does not have a host assigned"},
		{"attach without a node", "attach", testPod("", "app"), "", 400, "pod p does not have a host assigned"},
		{"no containers", "exec", testPod("n1"), "", 400, "a container name must be specified for pod p"},
		{"ambiguous", "log", testPod("n1", "a", "b"), "", 400, "a container name must be specified for pod p, choose one of: [a b]"},
		{"ambiguous with init and ephemeral", "exec", withInit, "", 400,
			"a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [i] or one of the ephemeral containers: [dbg]"},
		{"annotation naming no container", "log", badDefault, "", 400, "a container name must be specified for pod p, choose one of: [a b]"},
		{"unknown container", "exec", testPod("n1", "a"), "container=z", 400, "container z is not valid for pod p"},
		{"negative tail", "log", testPod("n1", "a"), "tailLines=-1", 422, ""},
		{"since both ways", "log", testPod("n1", "a"), "sinceSeconds=5&sinceTime=2024-01-02T03:04:05Z", 422, ""},
		{"not a number", "log", testPod("n1", "a"), "limitBytes=lots", 400, `limitBytes: "lots" is not an integer`},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, _ := url.ParseQuery(c.query)
			_, err := kubeletTarget(kubeapi.ConnectRequest{Subresource: c.sub, Object: c.pod}, q, c.query)
			var se apierrors.APIStatus
			if !apierrors.IsBadRequest(err) && !apierrors.IsInvalid(err) {
				t.Fatalf("err %v, want a %d", err, c.code)
			}
			if ok := asStatus(err, &se); !ok || se.Status().Code != c.code || (c.msg != "" && se.Status().Message != c.msg) {
				t.Fatalf("%v, want %d %q", err, c.code, c.msg)
			}
		})
	}
}

func asStatus(err error, se *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus) // kubeletTarget returns status errors unwrapped
	*se = s
	return ok
}
