package kubelet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A pod's volumes live in <pods dir>/<uid>/volumes/<name>. emptyDir is a directory of mode 0777, or with medium
// Memory a tmpfs mounted there (emptydir.go); hostPath is the host's path itself; configMap, secret, downwardAPI
// and projected volumes are file sets written the way kubelet's atomic writer does: the files go into a fresh
// hidden directory, a "..data" symlink is switched to it, and each visible entry is a symlink through "..data",
// so a container never sees half an update. They are refreshed (at most every volumeRefresh) while the pod runs,
// as kubelet does, and mounted read-only into containers, as upstream's kubelet mounts them whatever the
// volumeMount says.
//
// With a pod fsGroup, emptyDir volumes (once, when made) and file sets (each new version, before it is switched
// in) are given to the group as upstream's SetVolumeOwnership does (volumeownership.go); a projected service
// account token is then written 0600 and so becomes 0640, as upstream's. The pod's directory, mounts and all,
// goes with the pod (poddir.go).

const volumeRefresh = time.Minute

// file is one file of a file-set volume.
type file struct {
	data []byte
	mode fs.FileMode
}

// volumes builds a pod's volumes.
type volumes struct {
	o       objects
	podsDir string
	tokens  *tokenCache
}

// tokenCache keeps the projected service account tokens of the node's pods until 80 % of their lifetime (at most
// 24 h) has passed, as kubelet's token manager does: a fresh token at every volume refresh would be a
// TokenRequest per pod per minute, 500 a second from 30,000 pods.
type tokenCache struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[tokenKey]cachedToken
}

type tokenKey struct {
	pod               types.UID
	account, audience string
	expirationSeconds int64
}

type cachedToken struct {
	token     string
	refreshAt time.Time
}

func newTokenCache(now func() time.Time) *tokenCache {
	return &tokenCache{now: now, m: map[tokenKey]cachedToken{}}
}

func (c *tokenCache) get(k tokenKey) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[k]
	if !ok || !c.now().Before(t.refreshAt) {
		return "", false
	}
	return t.token, true
}

// put keeps a token that lives for lifetime from now.
func (c *tokenCache) put(k tokenKey, token string, lifetime time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[k] = cachedToken{token: token, refreshAt: c.now().Add(min(lifetime*8/10, 24*time.Hour))}
}

// forget drops a pod's tokens (the pod is gone).
func (c *tokenCache) forget(pod types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if k.pod == pod {
			delete(c.m, k)
		}
	}
}

// mounts prepares the pod's volumes and returns the CRI mounts of container c. It fails with an envError-like
// message for what the user must fix (a missing ConfigMap that is not optional, an unknown volume type).
//
// subPathExpr is expanded against the container's environment (env, as containerEnv built it), $(VAR) as in
// command and args; like subPath, the result must be a relative path that does not climb out with "..".
func (v volumes) mounts(ctx context.Context, pod *corev1.Pod, c *corev1.Container, env []*runtimeapi.KeyValue, podIP, hostIP string) ([]*runtimeapi.Mount, error) {
	byName := map[string]*corev1.Volume{}
	for i := range pod.Spec.Volumes {
		byName[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	var out []*runtimeapi.Mount
	for _, vm := range c.VolumeMounts {
		vol, ok := byName[vm.Name]
		if !ok {
			return nil, &envError{fmt.Sprintf("volume %q of volumeMount %q is not a volume of the pod", vm.Name, vm.MountPath)}
		}
		host, err := v.hostPath(pod, vol)
		if err != nil {
			return nil, err
		}
		sub, field := vm.SubPath, "subPath"
		if vm.SubPathExpr != "" {
			sub, field = expandAll([]string{vm.SubPathExpr}, env)[0], "subPathExpr"
		}
		if sub != "" {
			if path.IsAbs(sub) || slices.Contains(strings.Split(filepath.ToSlash(sub), "/"), "..") {
				return nil, &envError{fmt.Sprintf("%s %q of volumeMount %q must be a relative path without ..", field, sub, vm.MountPath)}
			}
			if host, err = subPathIn(host, sub); err != nil {
				if errors.Is(err, errSubPathEscapes) {
					return nil, &envError{fmt.Sprintf("failed to prepare subPath for volumeMount %q of container %q: %v", vm.Name, c.Name, err)}
				}
				return nil, fmt.Errorf("subPath of volumeMount %q: %w", vm.Name, err)
			}
		}
		out = append(out, &runtimeapi.Mount{ContainerPath: vm.MountPath, HostPath: host, Readonly: vm.ReadOnly || readOnlyVolume(vol)})
	}
	return out, nil
}

// dir is where a volume of the pod lives on the host.
func (v volumes) dir(pod *corev1.Pod, name string) string {
	return filepath.Join(v.podsDir, string(pod.UID), "volumes", name)
}

// readOnlyVolume reports whether upstream's kubelet mounts the volume read-only into every container (its
// plugin's attributes say ReadOnly): the file sets, which the kubelet alone writes.
func readOnlyVolume(vol *corev1.Volume) bool {
	return vol.ConfigMap != nil || vol.Secret != nil || vol.DownwardAPI != nil || vol.Projected != nil
}

// hostPath is the host directory (or file) behind a volume, which must have been set up.
func (v volumes) hostPath(pod *corev1.Pod, vol *corev1.Volume) (string, error) {
	if vol.HostPath != nil {
		return vol.HostPath.Path, nil
	}
	return v.dir(pod, vol.Name), nil
}

// setUp creates or refreshes every volume of the pod. written remembers the hash of each file set last written,
// so an unchanged one is not rewritten.
func (v volumes) setUp(ctx context.Context, pod *corev1.Pod, podIP, hostIP string, written map[string]string) error {
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if err := v.setUpOne(ctx, pod, vol, podIP, hostIP, written); err != nil {
			return fmt.Errorf("volume %q: %w", vol.Name, err)
		}
	}
	return nil
}

func (v volumes) setUpOne(ctx context.Context, pod *corev1.Pod, vol *corev1.Volume, podIP, hostIP string, written map[string]string) error {
	dir := v.dir(pod, vol.Name)
	var files map[string]file
	var err error
	switch {
	case vol.EmptyDir != nil:
		return v.setUpEmptyDir(ctx, pod, vol, dir)
	case vol.HostPath != nil:
		return setUpHostPath(vol.HostPath)
	case vol.ConfigMap != nil:
		files, err = v.configMapFiles(ctx, pod.Namespace, vol.ConfigMap.Name, vol.ConfigMap.Items, vol.ConfigMap.Optional, vol.ConfigMap.DefaultMode)
	case vol.Secret != nil:
		files, err = v.secretFiles(ctx, pod.Namespace, vol.Secret.SecretName, vol.Secret.Items, vol.Secret.Optional, vol.Secret.DefaultMode)
	case vol.DownwardAPI != nil:
		files, err = v.downwardFiles(ctx, pod, vol.DownwardAPI.Items, vol.DownwardAPI.DefaultMode, podIP, hostIP)
	case vol.Projected != nil:
		files, err = v.projectedFiles(ctx, pod, vol.Projected, podIP, hostIP)
	default:
		return &envError{fmt.Sprintf("volume %q: this node supports emptyDir, hostPath, configMap, secret, downwardAPI and projected volumes", vol.Name)}
	}
	if err != nil {
		return err
	}
	sum := hashFiles(files)
	if written[vol.Name] == sum {
		return nil
	}
	if err := writeAtomic(dir, files, fsGroupOf(pod)); err != nil {
		return err
	}
	written[vol.Name] = sum
	return nil
}

func setUpHostPath(hp *corev1.HostPathVolumeSource) error {
	typ := corev1.HostPathUnset
	if hp.Type != nil {
		typ = *hp.Type
	}
	st, err := os.Stat(hp.Path)
	switch typ {
	case corev1.HostPathDirectoryOrCreate:
		if errors.Is(err, fs.ErrNotExist) {
			return os.MkdirAll(hp.Path, 0o755)
		}
	case corev1.HostPathFileOrCreate:
		if errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(filepath.Dir(hp.Path), 0o755); err != nil {
				return err
			}
			return os.WriteFile(hp.Path, nil, 0o644)
		}
	case corev1.HostPathDirectory:
		if err != nil || !st.IsDir() {
			return &envError{fmt.Sprintf("hostPath type check failed: %s is not a directory", hp.Path)}
		}
	case corev1.HostPathFile:
		if err != nil || !st.Mode().IsRegular() {
			return &envError{fmt.Sprintf("hostPath type check failed: %s is not a file", hp.Path)}
		}
	}
	return nil
}

func modeOf(item, def *int32, fallback fs.FileMode) fs.FileMode {
	switch {
	case item != nil:
		return fs.FileMode(*item)
	case def != nil:
		return fs.FileMode(*def)
	}
	return fallback
}

// keyFiles maps keys to files: all keys, or the listed items (a listed key that is missing is an error unless
// the source is optional).
func keyFiles(data map[string][]byte, items []corev1.KeyToPath, defMode *int32, what string, opt bool) (map[string]file, error) {
	out := map[string]file{}
	if len(items) == 0 {
		for k, d := range data {
			out[k] = file{d, modeOf(nil, defMode, 0o644)}
		}
		return out, nil
	}
	for _, it := range items {
		d, ok := data[it.Key]
		if !ok {
			if opt {
				continue
			}
			return nil, &envError{fmt.Sprintf("configuration of %s has no key %q", what, it.Key)}
		}
		out[it.Path] = file{d, modeOf(it.Mode, defMode, 0o644)}
	}
	return out, nil
}

func (v volumes) configMapFiles(ctx context.Context, ns, name string, items []corev1.KeyToPath, opt *bool, defMode *int32) (map[string]file, error) {
	cm, err := v.o.configMap(ctx, ns, name)
	if err != nil {
		if optional(opt) {
			return map[string]file{}, nil
		}
		return nil, &envError{fmt.Sprintf("configmap %q not found", name)}
	}
	data := map[string][]byte{}
	for k, s := range cm.Data {
		data[k] = []byte(s)
	}
	maps.Copy(data, cm.BinaryData)
	return keyFiles(data, items, defMode, "configmap "+name, optional(opt))
}

func (v volumes) secretFiles(ctx context.Context, ns, name string, items []corev1.KeyToPath, opt *bool, defMode *int32) (map[string]file, error) {
	s, err := v.o.secret(ctx, ns, name)
	if err != nil {
		if optional(opt) {
			return map[string]file{}, nil
		}
		return nil, &envError{fmt.Sprintf("secret %q not found", name)}
	}
	return keyFiles(s.Data, items, defMode, "secret "+name, optional(opt))
}

func (v volumes) downwardFiles(ctx context.Context, pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, defMode *int32, podIP, hostIP string) (map[string]file, error) {
	out := map[string]file{}
	for _, it := range items {
		var val string
		var err error
		switch {
		case it.FieldRef != nil:
			val, err = podField(pod, it.FieldRef.FieldPath, podIP, hostIP)
		case it.ResourceFieldRef != nil:
			val, err = resourceField(pod, nil, it.ResourceFieldRef, func() (corev1.ResourceList, error) { return v.o.allocatable(ctx) })
		}
		if err != nil {
			return nil, err
		}
		out[it.Path] = file{[]byte(val), modeOf(it.Mode, defMode, 0o644)}
	}
	return out, nil
}

// projectedFiles combines the sources of a projected volume; a service account token comes from the
// TokenRequest API, bound to the pod.
func (v volumes) projectedFiles(ctx context.Context, pod *corev1.Pod, p *corev1.ProjectedVolumeSource, podIP, hostIP string) (map[string]file, error) {
	out := map[string]file{}
	for _, src := range p.Sources {
		var part map[string]file
		var err error
		switch {
		case src.ConfigMap != nil:
			part, err = v.configMapFiles(ctx, pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, p.DefaultMode)
		case src.Secret != nil:
			part, err = v.secretFiles(ctx, pod.Namespace, src.Secret.Name, src.Secret.Items, src.Secret.Optional, p.DefaultMode)
		case src.DownwardAPI != nil:
			part, err = v.downwardFiles(ctx, pod, src.DownwardAPI.Items, p.DefaultMode, podIP, hostIP)
		case src.ServiceAccountToken != nil:
			part, err = v.tokenFile(ctx, pod, src.ServiceAccountToken, p.DefaultMode)
		}
		if err != nil {
			return nil, err
		}
		maps.Copy(out, part)
	}
	return out, nil
}

func (v volumes) tokenFile(ctx context.Context, pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection, defMode *int32) (map[string]file, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	k := tokenKey{pod: pod.UID, account: sa, audience: src.Audience}
	if src.ExpirationSeconds != nil {
		k.expirationSeconds = *src.ExpirationSeconds
	}
	// With an fsGroup the token is written 0600 and ownership makes it 0640: readable by the pod's group, not
	// by everyone as a defaultMode of 0644 would have it (upstream's projected plugin).
	mode := modeOf(nil, defMode, 0o600)
	if fsGroupOf(pod) != nil {
		mode = 0o600
	}
	if token, ok := v.tokens.get(k); ok {
		return map[string]file{src.Path: {[]byte(token), mode}}, nil
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: src.ExpirationSeconds,
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	tr, err := v.o.cs.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("a token for service account %s: %w", sa, err)
	}
	// The server's clock says when it expires; its lifetime counts on ours.
	v.tokens.put(k, tr.Status.Token, time.Until(tr.Status.ExpirationTimestamp.Time))
	return map[string]file{src.Path: {[]byte(tr.Status.Token), mode}}, nil
}

func hashFiles(files map[string]file) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(h, "%s\x00%o\x00%d\x00", k, files[k].mode, len(files[k].data))
		h.Write(files[k].data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// writeAtomic writes files into dir as the atomic writer does (see above); entries no longer in files go. With
// an fsGroup the whole volume is given to the group (read-only) once the new version is written and before it is
// switched in, so that no container ever reads a file of it without the group's access.
func writeAtomic(dir string, files map[string]file, fsGroup *int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ts := "..data_" + strconv.FormatInt(time.Now().UnixNano(), 10)
	tsDir := filepath.Join(dir, ts)
	for name, f := range files {
		if strings.Contains(name, "..") || path.IsAbs(name) {
			return &envError{fmt.Sprintf("file path %q must be relative, without ..", name)}
		}
		p := filepath.Join(tsDir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return err
		}
		if err := os.Chmod(p, f.mode); err != nil { // WriteFile's mode is masked by the umask
			return err
		}
	}
	if err := os.MkdirAll(tsDir, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(tsDir, 0o755); err != nil { // whatever the umask: every user must reach the files
		return err
	}
	if fsGroup != nil {
		if err := setVolumeOwnership(dir, *fsGroup, true); err != nil {
			return fmt.Errorf("applying fsGroup %d: %w", *fsGroup, err)
		}
	}
	data := filepath.Join(dir, "..data")
	old, _ := os.Readlink(data)
	tmp := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(ts, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, data); err != nil {
		return err
	}
	top := map[string]bool{}
	for name := range files {
		top[strings.SplitN(name, "/", 2)[0]] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "..") && !top[e.Name()] {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	for name := range top {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			return err
		}
	}
	if old != "" && old != ts {
		return os.RemoveAll(filepath.Join(dir, old))
	}
	return nil
}
