package rbac

import (
	"context"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The node authorizer: what a node's agent (user system:node:<name> in group system:nodes) may do, decided
// from what is scheduled to it rather than from roles, as upstream's node authorizer does. A node
//   - reads nodes, pods, services, endpoints and endpoint slices (it runs pods and programs Service proxying);
//   - creates its own Node, and updates and patches it and its status (NodeRestriction, an admission check,
//     keeps it from changing its own taints); it may not delete it;
//   - creates, reads and renews its own Lease in kube-node-lease;
//   - updates the status of, and deletes, pods bound to it (NodeRestriction refuses any change of such a
//     pod's metadata through its status);
//   - reads a secret or configmap, and requests a token of a service account, only when a pod bound to it uses it;
//   - creates and patches events.
// Anything else goes on to RBAC, which binds nothing to nodes by default.

// NodesGroup is the group of every node credential.
const NodesGroup = "system:nodes"

// NodeUserPrefix + node name is a node's user name.
const NodeUserPrefix = "system:node:"

// Pods lists the pods bound to a node (the Kubernetes API implements it from its watch cache). With fresh the
// list includes every pod bound before the call (the cache first catches up with the store: a query); without,
// it is the cache as it stands.
type Pods interface {
	PodsOnNode(ctx context.Context, cluster, node string, fresh bool) ([]*corev1.Pod, error)
}

// NodeName returns the node a user acts for, if it is a node.
func NodeName(user string, groups []string) (string, bool) {
	name, ok := strings.CutPrefix(user, NodeUserPrefix)
	return name, ok && name != "" && slices.Contains(groups, NodesGroup)
}

var readVerbs = []string{"get", "list", "watch"}

// authorizeNode decides a node's request; false lets RBAC decide.
func (a *Authorizer) authorizeNode(ctx context.Context, node string, req Request) (bool, string, error) {
	verb, res := req.Verb, req.Resource
	if req.Path != "" {
		return false, "", nil
	}
	switch {
	case req.Group == "" && slices.Contains([]string{"nodes", "pods", "services", "endpoints"}, res) &&
		req.Subresource == "" && slices.Contains(readVerbs, verb):
		return true, "node: reads " + res, nil
	case req.Group == "discovery.k8s.io" && res == "endpointslices" && slices.Contains(readVerbs, verb):
		return true, "node: reads endpoint slices", nil
	case req.Group == "" && res == "nodes":
		if req.Name == node && (req.Subresource == "" || req.Subresource == "status") &&
			slices.Contains([]string{"create", "update", "patch", "get"}, verb) {
			return true, "node: its own Node", nil
		}
		if req.Name == "" && verb == "create" {
			return true, "node: registers its Node", nil // the Node's name is checked at admission (NodeRestriction)
		}
		return false, "", nil
	case req.Group == "coordination.k8s.io" && res == "leases" && req.Namespace == "kube-node-lease":
		if verb == "create" && req.Name == "" || req.Name == node && slices.Contains([]string{"get", "create", "update", "patch"}, verb) {
			return true, "node: its own Lease", nil
		}
		return false, "", nil
	case (req.Group == "" || req.Group == "events.k8s.io") && res == "events" && slices.Contains([]string{"create", "patch", "update"}, verb):
		return true, "node: writes events", nil
	case req.Group == "" && res == "pods":
		if !(verb == "delete" && req.Subresource == "" || req.Subresource == "status" && (verb == "get" || verb == "update" || verb == "patch")) {
			return false, "", nil
		}
		ok, err := a.podOnNode(ctx, req.Cluster, node, req.Namespace, func(p *corev1.Pod) bool { return p.Name == req.Name })
		if ok {
			return true, "node: a pod bound to it", err
		}
		return false, "", err
	case req.Group == "" && (res == "secrets" || res == "configmaps") && verb == "get" && req.Name != "":
		ok, err := a.podOnNode(ctx, req.Cluster, node, req.Namespace, func(p *corev1.Pod) bool {
			if res == "secrets" {
				return slices.Contains(podSecrets(p), req.Name)
			}
			return slices.Contains(podConfigMaps(p), req.Name)
		})
		if ok {
			return true, "node: used by a pod bound to it", err
		}
		return false, "", err
	case req.Group == "" && res == "serviceaccounts" && req.Subresource == "token" && verb == "create":
		ok, err := a.podOnNode(ctx, req.Cluster, node, req.Namespace, func(p *corev1.Pod) bool {
			sa := p.Spec.ServiceAccountName
			if sa == "" {
				sa = "default"
			}
			return sa == req.Name
		})
		if ok {
			return true, "node: a service account of a pod bound to it", err
		}
		return false, "", err
	}
	return false, "", nil
}

// podOnNode reports whether a pod in namespace bound to node satisfies match.
func (a *Authorizer) podOnNode(ctx context.Context, cluster, node, namespace string, match func(*corev1.Pod) bool) (bool, error) {
	if a.pods == nil || namespace == "" {
		return false, nil
	}
	// The cache as it stands answers almost every request (a pod's node never changes once bound); only what it
	// does not show yet — a pod bound a moment ago, which its node is about to start — is worth waiting for
	// the cache to catch up with the store, a query per request: every status write of a thousand nodes' pods
	// paid one.
	for _, fresh := range []bool{false, true} {
		pods, err := a.pods.PodsOnNode(ctx, cluster, node, fresh)
		if err != nil {
			return false, err
		}
		for _, p := range pods {
			if p.Namespace == namespace && match(p) {
				return true, nil
			}
		}
	}
	return false, nil
}

// podSecrets are the secrets a pod uses: volumes (also projected), env, envFrom, image pull secrets.
func podSecrets(p *corev1.Pod) []string {
	var out []string
	for _, s := range p.Spec.ImagePullSecrets {
		out = append(out, s.Name)
	}
	for _, v := range p.Spec.Volumes {
		if v.Secret != nil {
			out = append(out, v.Secret.SecretName)
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					out = append(out, src.Secret.Name)
				}
			}
		}
	}
	eachContainer(p, func(c *corev1.Container) {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				out = append(out, e.ValueFrom.SecretKeyRef.Name)
			}
		}
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				out = append(out, e.SecretRef.Name)
			}
		}
	})
	return out
}

// podConfigMaps are the configmaps a pod uses: volumes (also projected), env, envFrom.
func podConfigMaps(p *corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		if v.ConfigMap != nil {
			out = append(out, v.ConfigMap.Name)
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil {
					out = append(out, src.ConfigMap.Name)
				}
			}
		}
	}
	eachContainer(p, func(c *corev1.Container) {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
				out = append(out, e.ValueFrom.ConfigMapKeyRef.Name)
			}
		}
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				out = append(out, e.ConfigMapRef.Name)
			}
		}
	})
	return out
}

func eachContainer(p *corev1.Pod, f func(*corev1.Container)) {
	for i := range p.Spec.InitContainers {
		f(&p.Spec.InitContainers[i])
	}
	for i := range p.Spec.Containers {
		f(&p.Spec.Containers[i])
	}
}
