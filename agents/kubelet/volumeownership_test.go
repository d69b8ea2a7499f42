package kubelet

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi/apitest"
	"github.com/wheelhouse-dev/wheelhouse/server/satoken"
)

// owner is a file's mode (with setgid and sticky, without the type) and group, read without following a symlink.
type owner struct {
	mode fs.FileMode
	gid  uint32
}

func ownerOf(t *testing.T, path string) owner {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return owner{st.Mode() & (fs.ModePerm | fs.ModeSetgid | fs.ModeSticky), st.Sys().(*syscall.Stat_t).Gid}
}

// TestSetVolumeOwnership: as upstream's SetVolumeOwnership, every file and directory of the volume gets the group,
// files gain g+rw (read-write) or g+r (read-only), directories also g+x and setgid; modes only gain bits; a symlink
// is re-grouped itself and its target — here outside the volume — keeps its group and mode.
func TestSetVolumeOwnership(t *testing.T) {
	const gid = 4321
	for _, tc := range []struct {
		name     string
		readOnly bool
		want     map[string]owner
	}{
		{"read-write", false, map[string]owner{
			".": {0o775 | fs.ModeSetgid, gid}, "sub": {0o775 | fs.ModeSetgid, gid},
			"sub/private": {0o660, gid}, "shared": {0o664, gid}, "run.sh": {0o760, gid}}},
		{"read-only", true, map[string]owner{
			".": {0o755 | fs.ModeSetgid, gid}, "sub": {0o755 | fs.ModeSetgid, gid},
			"sub/private": {0o440, gid}, "shared": {0o644, gid}, "run.sh": {0o740, gid}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			vol, outside := filepath.Join(base, "vol"), filepath.Join(base, "outside")
			for _, d := range []string{vol, filepath.Join(vol, "sub")} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for name, mode := range map[string]fs.FileMode{"sub/private": 0o400, "shared": 0o644, "run.sh": 0o700} {
				writeMode(t, filepath.Join(vol, name), mode)
			}
			writeMode(t, outside, 0o600)
			if err := os.Symlink(outside, filepath.Join(vol, "link")); err != nil {
				t.Fatal(err)
			}
			if err := setVolumeOwnership(vol, gid, tc.readOnly); err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.want {
				if got := ownerOf(t, filepath.Join(vol, name)); got != want {
					t.Errorf("%s: mode %v group %d, want %v group %d", name, got.mode, got.gid, want.mode, want.gid)
				}
			}
			if got := ownerOf(t, filepath.Join(vol, "link")); got.gid != gid {
				t.Errorf("the symlink's group is %d, want %d", got.gid, gid)
			}
			if got := ownerOf(t, outside); got != (owner{0o600, 0}) {
				t.Errorf("the symlink's target outside the volume was changed: mode %v group %d", got.mode, got.gid)
			}
		})
	}
}

func writeMode(t *testing.T, path string, mode fs.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte("x"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestFSGroupVolumes: with a pod fsGroup its emptyDir, secret, configMap, downwardAPI and projected volumes belong
// to the group as upstream's kubelet makes them — the modes the conformance suite's "as non-root with defaultMode
// and fsGroup set" tests read (-r--r----- for a defaultMode of 0440 or 0400), emptyDir roots rwxrwsrwx (rwxrwsrwt
// on tmpfs), a projected token 0640 — also after a file set's refresh; a subPath made in the volume takes its
// root's mode and group; the file sets are mounted read-only.
func TestFSGroupVolumes(t *testing.T) {
	defer unix.Umask(unix.Umask(0o022))
	key := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))(t)
	e := newPodEnvWith(t, func(c *kubeapi.Config) { c.ServiceAccountTokens = satoken.New(oneKey{key}, nil) })
	ctx := t.Context()
	if _, err := e.admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "fs-sa"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Data: map[string][]byte{"data-1": []byte("value-1")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"},
		Data: map[string]string{"data-1": "value-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const gid = 1234
	mode := func(m int32) *int32 { return &m }
	mount := func(name string) corev1.VolumeMount { return corev1.VolumeMount{Name: name, MountPath: "/v/" + name} }
	secretRef := corev1.LocalObjectReference{Name: "s"}
	pod := simple("fsg", corev1.RestartPolicyAlways, corev1.Container{Name: "app", Image: "busybox", Command: []string{"sleep", "1d"},
		VolumeMounts: []corev1.VolumeMount{mount("disk"), mount("mem"), mount("secret"), mount("secret0400"), mount("cm"), mount("downward"),
			mount("projected"), {Name: "mem", MountPath: "/sub", SubPath: "made/here"}}})
	pod.Spec.ServiceAccountName = "fs-sa"
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), FSGroup: ptr.To[int64](gid)}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "disk", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultMode: mode(0o440)}}},
		{Name: "secret0400", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultMode: mode(0o400)}}},
		{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}},
		{Name: "downward", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{DefaultMode: mode(0o440),
			Items: []corev1.DownwardAPIVolumeFile{{Path: "podname", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}},
		{Name: "projected", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: mode(0o440), Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: secretRef}},
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
		}}}},
	}
	e.create(pod)
	apitest.Eventually(t, "fsg running", func() bool { return e.running("app") != "" })
	mounts := map[string]*runtimeapi.Mount{}
	for _, m := range e.rt.config("app").Mounts {
		mounts[m.ContainerPath] = m
	}
	// stat follows the visible symlinks to the files, as a container reading them does.
	statOf := func(path string) owner {
		t.Helper()
		st := must(os.Stat(path))(t)
		return owner{st.Mode() & (fs.ModePerm | fs.ModeSetgid | fs.ModeSticky), st.Sys().(*syscall.Stat_t).Gid}
	}
	want := map[string]owner{
		"/v/disk":              {0o777 | fs.ModeSetgid, gid},
		"/v/mem":               {0o777 | fs.ModeSetgid | fs.ModeSticky, gid},
		"/sub":                 {0o777 | fs.ModeSetgid | fs.ModeSticky, gid},
		"/v/secret/data-1":     {0o440, gid},
		"/v/secret/..data":     {0o755 | fs.ModeSetgid, gid},
		"/v/secret0400/data-1": {0o440, gid},
		"/v/cm/data-1":         {0o644, gid},
		"/v/downward/podname":  {0o440, gid},
		"/v/projected/data-1":  {0o440, gid},
		"/v/projected/token":   {0o640, gid},
		"/v/projected/..data":  {0o755 | fs.ModeSetgid, gid},
		"/v/secret":            {0o755 | fs.ModeSetgid, gid},
	}
	check := func(when string) {
		t.Helper()
		for p, w := range want {
			host := ""
			if m := mounts[p]; m != nil {
				host = m.HostPath
			} else {
				vol, rest, _ := strings.Cut(strings.TrimPrefix(p, "/v/"), "/")
				host = filepath.Join(mounts["/v/"+vol].HostPath, rest)
			}
			if got := statOf(host); got != w {
				t.Errorf("%s: %s: mode %v group %d, want %v group %d", when, p, got.mode, got.gid, w.mode, w.gid)
			}
		}
	}
	check("set up")
	for p, ro := range map[string]bool{"/v/disk": false, "/v/mem": false, "/sub": false, "/v/secret": true, "/v/cm": true, "/v/downward": true, "/v/projected": true} {
		if mounts[p].Readonly != ro {
			t.Errorf("%s mounted read-only %v, want %v", p, mounts[p].Readonly, ro)
		}
	}

	// A new version of the secret is the group's too.
	s := must(e.admin.CoreV1().Secrets("default").Get(ctx, "s", metav1.GetOptions{}))(t)
	s.Data["data-1"] = []byte("value-2")
	if _, err := e.admin.CoreV1().Secrets("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.clk.Step(volumeRefresh + time.Second)
	apitest.Eventually(t, "the refreshed secret", func() bool {
		b, _ := os.ReadFile(filepath.Join(mounts["/v/secret"].HostPath, "data-1"))
		return string(b) == "value-2"
	})
	check("refreshed")
}
