package runtime

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// MatchSandbox reports whether s passes filter, with the semantics in the
// package documentation. A nil filter matches everything.
func MatchSandbox(filter *runtimeapi.PodSandboxFilter, s *runtimeapi.PodSandbox) bool {
	if filter == nil {
		return true
	}
	if filter.Id != "" && filter.Id != s.Id {
		return false
	}
	if filter.State != nil && filter.State.State != s.State {
		return false
	}
	return MatchLabels(filter.LabelSelector, s.Labels)
}

// MatchContainer reports whether c passes filter. A nil filter matches
// everything.
func MatchContainer(filter *runtimeapi.ContainerFilter, c *runtimeapi.Container) bool {
	if filter == nil {
		return true
	}
	if filter.Id != "" && filter.Id != c.Id {
		return false
	}
	if filter.PodSandboxId != "" && filter.PodSandboxId != c.PodSandboxId {
		return false
	}
	if filter.State != nil && filter.State.State != c.State {
		return false
	}
	return MatchLabels(filter.LabelSelector, c.Labels)
}

// MatchLabels reports whether every key of selector is in labels with the
// same value.
func MatchLabels(selector, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
