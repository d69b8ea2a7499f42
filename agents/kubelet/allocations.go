package kubelet

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// allocationsFile holds, under the pod manager's data dir, the resources the node allocated to each pod.
const allocationsFile = "pod-resources.json"

// allocations are the resources the node admitted for each of its pods' containers (upstream's allocation
// checkpoint, allocated_pods_state): a pod's are recorded when it is first seen and changed only by a resize
// the node accepted, so that a resize pending when the agent restarts stays pending rather than being taken
// as admitted. They are kept in one JSON file, replaced atomically on each change.
type allocations struct {
	path string

	mu   sync.Mutex // guards pods and the file
	pods map[types.UID]map[string]corev1.ResourceRequirements
}

// loadAllocations reads the checkpoint at path (none yet: empty).
func loadAllocations(path string) (*allocations, error) {
	a := &allocations{path: path, pods: map[types.UID]map[string]corev1.ResourceRequirements{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return a, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kubelet: read the pod resource allocations: %w", err)
	}
	if err := json.Unmarshal(b, &a.pods); err != nil {
		return nil, fmt.Errorf("kubelet: the pod resource allocations in %s: %w", path, err)
	}
	return a, nil
}

// get returns a copy of the pod's allocation; false when it has none yet.
func (a *allocations) get(uid types.UID) (map[string]corev1.ResourceRequirements, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m, ok := a.pods[uid]
	if !ok {
		return nil, false
	}
	out := make(map[string]corev1.ResourceRequirements, len(m))
	for name, r := range m {
		out[name] = *r.DeepCopy()
	}
	return out, true
}

// set records the pod's allocation (kept as given: the caller passes its own copy) and writes the checkpoint.
func (a *allocations) set(uid types.UID, m map[string]corev1.ResourceRequirements) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pods[uid] = m
	return a.save()
}

// retain forgets the pods keep does not keep (gone from the node) and writes the checkpoint if any was.
func (a *allocations) retain(keep func(types.UID) bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.pods)
	for uid := range a.pods {
		if !keep(uid) {
			delete(a.pods, uid)
		}
	}
	if len(a.pods) == n {
		return nil
	}
	return a.save()
}

// save writes the checkpoint: a temporary file renamed over the old one, so a crash leaves one or the other.
// a.mu must be held.
func (a *allocations) save() error {
	b, err := json.Marshal(a.pods)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(a.path), 0o755); err != nil {
		return err
	}
	tmp := a.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, a.path)
}
