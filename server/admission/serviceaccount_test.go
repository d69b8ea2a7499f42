package admission

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
)

type accounts map[string]*corev1.ServiceAccount

func (a accounts) ServiceAccount(_ context.Context, _, namespace, name string) (*corev1.ServiceAccount, bool, error) {
	sa, ok := a[namespace+"/"+name]
	return sa, ok, nil
}

func saPod(mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init"}}, Containers: []corev1.Container{{Name: "a"}, {Name: "b"}}}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func TestServiceAccountAdmission(t *testing.T) {
	robots := accounts{"default/robot": {AutomountServiceAccountToken: ptr.To(false)}}
	tests := []struct {
		name      string
		pod       *corev1.Pod
		op        string
		wantSA    string
		wantMount []string // containers that get the kube-api-access mount
	}{
		{"a new pod runs as default with its API access mounted everywhere", saPod(nil), "CREATE", "default", []string{"init", "a", "b"}},
		{"the pod opts out", saPod(func(p *corev1.Pod) { p.Spec.AutomountServiceAccountToken = ptr.To(false) }), "CREATE", "default", nil},
		{"its ServiceAccount opts out", saPod(func(p *corev1.Pod) { p.Spec.ServiceAccountName = "robot" }), "CREATE", "robot", nil},
		{"the pod overrides its ServiceAccount's opt-out", saPod(func(p *corev1.Pod) {
			p.Spec.ServiceAccountName = "robot"
			p.Spec.AutomountServiceAccountToken = ptr.To(true)
		}), "CREATE", "robot", []string{"init", "a", "b"}},
		{"a container with its own mount there keeps it", saPod(func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "mine", MountPath: ServiceAccountTokenPath}}
		}), "CREATE", "default", []string{"init", "b"}},
		{"updates are left alone", saPod(nil), "UPDATE", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ServiceAccount{Accounts: robots}.Admit(t.Context(), kubeapi.AdmissionRequest{Operation: tc.op, Cluster: "c1",
				Namespace: "default", Object: tc.pod})
			if err != nil {
				t.Fatal(err)
			}
			if tc.pod.Spec.ServiceAccountName != tc.wantSA {
				t.Errorf("serviceAccountName %q, want %q", tc.pod.Spec.ServiceAccountName, tc.wantSA)
			}
			var vol *corev1.Volume
			for i := range tc.pod.Spec.Volumes {
				if strings.HasPrefix(tc.pod.Spec.Volumes[i].Name, "kube-api-access-") {
					vol = &tc.pod.Spec.Volumes[i]
				}
			}
			var mounted []string
			for _, c := range append(append([]corev1.Container{}, tc.pod.Spec.InitContainers...), tc.pod.Spec.Containers...) {
				for _, m := range c.VolumeMounts {
					if vol != nil && m.Name == vol.Name {
						if m.MountPath != ServiceAccountTokenPath || !m.ReadOnly {
							t.Errorf("%s: mount %+v", c.Name, m)
						}
						mounted = append(mounted, c.Name)
					}
				}
			}
			if strings.Join(mounted, ",") != strings.Join(tc.wantMount, ",") {
				t.Fatalf("mounted in %v, want %v", mounted, tc.wantMount)
			}
			if len(tc.wantMount) == 0 {
				if vol != nil {
					t.Fatalf("a kube-api-access volume without mounts: %+v", vol)
				}
				return
			}
			src := vol.Projected.Sources
			if len(src) != 3 || src[0].ServiceAccountToken == nil || src[0].ServiceAccountToken.Path != "token" ||
				*src[0].ServiceAccountToken.ExpirationSeconds != 3607 || src[1].ConfigMap == nil || src[1].ConfigMap.Name != RootCAConfigMap ||
				src[1].ConfigMap.Items[0].Path != "ca.crt" || src[2].DownwardAPI == nil ||
				src[2].DownwardAPI.Items[0].FieldRef.FieldPath != "metadata.namespace" {
				t.Fatalf("projected sources: %+v", src)
			}
		})
	}
}

// TestServiceAccountPullSecrets: a pod without imagePullSecrets gets its ServiceAccount's; its own win.
func TestServiceAccountPullSecrets(t *testing.T) {
	robots := accounts{"default/builder": {ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}, {Name: "mirror"}}}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"the ServiceAccount's", saPod(func(p *corev1.Pod) { p.Spec.ServiceAccountName = "builder" }), "registry,mirror"},
		{"the pod's own", saPod(func(p *corev1.Pod) {
			p.Spec.ServiceAccountName = "builder"
			p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "mine"}}
		}), "mine"},
		{"a ServiceAccount without any", saPod(nil), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ServiceAccount{Accounts: robots}.Admit(t.Context(), kubeapi.AdmissionRequest{Operation: "CREATE", Cluster: "c1",
				Namespace: "default", Object: tc.pod})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range tc.pod.Spec.ImagePullSecrets {
				got = append(got, s.Name)
			}
			if strings.Join(got, ",") != tc.want {
				t.Errorf("imagePullSecrets %v, want %s", got, tc.want)
			}
		})
	}
}
