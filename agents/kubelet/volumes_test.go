package kubelet

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
	"github.com/wheelhouse-dev/wheelhouse/server/satoken"
)

// oneKey signs every cluster's service account tokens with one key.
type oneKey struct{ k *ecdsa.PrivateKey }

func (o oneKey) SigningKey(context.Context, string) (crypto.Signer, error) { return o.k, nil }

// TestVolumeSources: secret, downwardAPI, hostPath and projected volumes (a ConfigMap, a Secret, the downward API
// and a service account token bound to the pod) are written as kubelet writes them; the token is kept across
// volume refreshes until 80 % of its lifetime, then replaced.
func TestVolumeSources(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tokens := satoken.New(oneKey{key}, nil)
	e := newPodEnvWith(t, func(c *kubeapi.Config) { c.ServiceAccountTokens = tokens })
	ctx := t.Context()
	if _, err := e.admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "web-sa"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		Data: map[string][]byte{"user": []byte("alice"), "password": []byte("s3cret")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ca"},
		Data: map[string]string{"ca.crt": "PEM"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hostDir := filepath.Join(t.TempDir(), "made-by-the-agent")
	mode := int32(0o400)
	expiry := int64(3600)
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	mount := func(name string) corev1.VolumeMount { return corev1.VolumeMount{Name: name, MountPath: "/v/" + name} }
	pod := simple("web", corev1.RestartPolicyAlways, corev1.Container{Name: "app", Image: "busybox", Command: []string{"sleep", "1d"},
		VolumeMounts: []corev1.VolumeMount{mount("secret"), mount("downward"), mount("host"), mount("projected")}})
	pod.Labels = map[string]string{"app": "web"}
	pod.Spec.ServiceAccountName = "web-sa"
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds",
			Items: []corev1.KeyToPath{{Key: "password", Path: "pw", Mode: &mode}}}}},
		{Name: "downward", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
			{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
		{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostDir, Type: &dirOrCreate}}},
		{Name: "projected", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Items: []corev1.KeyToPath{{Key: "user", Path: "user"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", Audience: "vault", ExpirationSeconds: &expiry}},
		}}}},
	}
	e.create(pod)
	apitest.Eventually(t, "web running", func() bool { return e.running("app") != "" })
	mounts := map[string]string{}
	for _, m := range e.rt.config("app").Mounts {
		mounts[m.ContainerPath] = m.HostPath
	}
	read := func(vol, name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(mounts["/v/"+vol], name))
		if err != nil {
			t.Fatalf("%s/%s: %v", vol, name, err)
		}
		return string(b)
	}
	if got := read("secret", "pw"); got != "s3cret" {
		t.Errorf("secret item: %q", got)
	}
	if st, err := os.Stat(filepath.Join(mounts["/v/secret"], "pw")); err != nil || st.Mode().Perm() != fs.FileMode(mode) {
		t.Errorf("secret item mode: %v %v, want %o", st.Mode(), err, mode)
	}
	if _, err := os.Stat(filepath.Join(mounts["/v/secret"], "user")); err == nil {
		t.Error("a key the items left out was written")
	}
	if got := read("downward", "name"); got != "web" {
		t.Errorf("downward name: %q", got)
	}
	if got := read("downward", "labels"); got != `app="web"` {
		t.Errorf("downward labels: %q", got)
	}
	if mounts["/v/host"] != hostDir {
		t.Errorf("hostPath mounted from %q, want %q", mounts["/v/host"], hostDir)
	}
	if st, err := os.Stat(hostDir); err != nil || !st.IsDir() {
		t.Errorf("hostPath DirectoryOrCreate not created: %v", err)
	}
	if read("projected", "ca.crt") != "PEM" || read("projected", "user") != "alice" || read("projected", "namespace") != "default" {
		t.Errorf("projected files: %q %q %q", read("projected", "ca.crt"), read("projected", "user"), read("projected", "namespace"))
	}
	token := read("projected", "token")
	claims, err := tokens.Verify(ctx, "c1", token, "vault")
	if err != nil {
		t.Fatalf("the projected token does not verify for its audience: %v", err)
	}
	p := e.pod("web")
	if claims.Kubernetes.ServiceAccount.Name != "web-sa" || claims.Kubernetes.Pod == nil || claims.Kubernetes.Pod.UID != string(p.UID) {
		t.Fatalf("token claims %+v, want web-sa bound to pod %s", claims.Kubernetes, p.UID)
	}

	// Volume refreshes keep the token while it is young; past 80 % of its hour it is replaced. The secret
	// changes before the clock passes the refresh interval: a refresh racing the update would read the old
	// secret and the next would wait for another interval.
	creds, err := e.admin.CoreV1().Secrets("default").Get(ctx, "creds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	creds.Data["user"] = []byte("bob")
	if _, err := e.admin.CoreV1().Secrets("default").Update(ctx, creds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.clk.Step(volumeRefresh + time.Second)
	apitest.Eventually(t, "the refreshed projected secret", func() bool { return read("projected", "user") == "bob" })
	if read("projected", "token") != token {
		t.Fatal("a volume refresh requested a new token for a young one")
	}
	e.clk.Step(49 * time.Minute)
	apitest.Eventually(t, "a new token past 80 % of the old one's life", func() bool { return read("projected", "token") != token })
	if _, err := tokens.Verify(ctx, "c1", read("projected", "token"), "vault"); err != nil {
		t.Fatalf("the new token: %v", err)
	}
}

// TestSubPaths: subPath and subPathExpr (expanded against the container's environment) mount a directory of the
// volume, created when missing; one that is absolute, climbs out with "..", or resolves outside the volume through
// a symlink leaves the container waiting with CreateContainerConfigError, as upstream's kubelet does.
func TestSubPaths(t *testing.T) {
	e := newPodEnv(t)
	work := corev1.Volume{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	pod := simple("sub", corev1.RestartPolicyAlways, corev1.Container{Name: "app", Image: "busybox", Command: []string{"sleep", "1d"},
		Env: []corev1.EnvVar{{Name: "POD_NAME", Value: "foo"}, {Name: "UP", Value: "a/../../x"}},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "work", MountPath: "/logs", SubPathExpr: "$(POD_NAME)/logs"},
			{Name: "work", MountPath: "/deep", SubPath: "a/b..c"},
			{Name: "work", MountPath: "/all"},
		}})
	pod.Spec.Volumes = []corev1.Volume{work}
	e.create(pod)
	apitest.Eventually(t, "sub running", func() bool { return e.running("app") != "" })
	mounts := map[string]string{}
	for _, m := range e.rt.config("app").Mounts {
		mounts[m.ContainerPath] = m.HostPath
	}
	root := mounts["/all"]
	for path, want := range map[string]string{"/logs": filepath.Join(root, "foo", "logs"), "/deep": filepath.Join(root, "a", "b..c")} {
		if mounts[path] != want {
			t.Errorf("%s mounted from %q, want %q", path, mounts[path], want)
		}
		if st, err := os.Stat(want); err != nil || !st.IsDir() {
			t.Errorf("%s: the sub path was not created: %v", path, err)
		}
	}

	// A volume holding a symlink out of it (as a container could make one): a sub path through it or at it resolves
	// outside the volume and is refused, and nothing is created outside.
	host, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(host, "out")); err != nil {
		t.Fatal(err)
	}
	linked := corev1.Volume{Name: "work", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: host}}}
	for name, tc := range map[string]struct {
		vm   corev1.VolumeMount
		vol  corev1.Volume
		want string
	}{
		"abs":     {corev1.VolumeMount{Name: "work", MountPath: "/x", SubPathExpr: "$(ROOT)"}, work, "must be a relative path without .."},
		"climb":   {corev1.VolumeMount{Name: "work", MountPath: "/x", SubPathExpr: "$(UP)"}, work, "must be a relative path without .."},
		"through": {corev1.VolumeMount{Name: "work", MountPath: "/x", SubPath: "out/made"}, linked, "the subPath resolves outside the volume"},
		"at":      {corev1.VolumeMount{Name: "work", MountPath: "/x", SubPath: "out"}, linked, "the subPath resolves outside the volume"},
	} {
		p := simple(name, corev1.RestartPolicyAlways, corev1.Container{Name: "app", Image: "busybox", Command: []string{"sleep", "1d"},
			Env:          []corev1.EnvVar{{Name: "ROOT", Value: "/tmp"}, {Name: "UP", Value: "a/../../x"}},
			VolumeMounts: []corev1.VolumeMount{tc.vm}})
		p.Spec.Volumes = []corev1.Volume{tc.vol}
		e.create(p)
		e.until(name+" CreateContainerConfigError", func(p *corev1.Pod) bool {
			cs := p.Status.ContainerStatuses
			return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "CreateContainerConfigError" &&
				strings.Contains(cs[0].State.Waiting.Message, tc.want)
		}, name)
	}
	if entries, err := os.ReadDir(outside); err != nil || len(entries) != 0 {
		t.Errorf("created outside the volume: %v %v", entries, err)
	}
}
