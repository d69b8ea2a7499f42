package kubelet

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// objects reads the ConfigMaps and Secrets a pod refers to (through the node authorizer, which allows exactly
// those of pods bound to this node), and lists the Services for the service links (nil: none).
type objects struct {
	cs       kubernetes.Interface
	services corelisters.ServiceLister
	node     string // this node's name
}

// allocatable is the node's allocatable resources as the API has them from this agent: the downward API's
// limits of a container without limits default to them, as kubelet's.
func (o objects) allocatable(ctx context.Context) (corev1.ResourceList, error) {
	n, err := o.cs.CoreV1().Nodes().Get(ctx, o.node, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read node %s for its allocatable resources: %w", o.node, err)
	}
	return n.Status.Allocatable, nil
}

func (o objects) configMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return o.cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}

func (o objects) secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	return o.cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}

// envError is a problem with a container's environment that the user must fix (kubelet's
// CreateContainerConfigError): a missing ConfigMap, key or Secret that is not optional.
type envError struct{ msg string }

func (e *envError) Error() string { return e.msg }

// containerEnv builds a container's environment as kubelet does: envFrom first (in order, later sources win,
// keys that are not valid names skipped), then env in order with $(VAR) references expanded against what came
// before; fieldRef and resourceFieldRef from the pod; configMapKeyRef / secretKeyRef from the API.
//
// The Services' variables (serviceEnv) come last, each unless the container defines it, and $(VAR) references
// expand to them too, as kubelet's.
func containerEnv(ctx context.Context, o objects, pod *corev1.Pod, c *corev1.Container, podIP, hostIP string) ([]*runtimeapi.KeyValue, error) {
	svcVars, err := serviceEnv(o.services, pod)
	if err != nil {
		return nil, err
	}
	vars := map[string]string{}
	lookup := func(name string) (string, bool) {
		if v, ok := vars[name]; ok {
			return v, true
		}
		v, ok := svcVars[name]
		return v, ok
	}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, from := range c.EnvFrom {
		data, err := envFromData(ctx, o, pod.Namespace, from)
		if err != nil {
			return nil, err
		}
		for _, k := range slices.Sorted(maps.Keys(data)) {
			set(from.Prefix+k, data[k])
		}
	}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom == nil {
			v = expand(v, lookup)
		} else {
			var ok bool
			var err error
			if v, ok, err = envValueFrom(ctx, o, pod, c, e.ValueFrom, podIP, hostIP); err != nil {
				return nil, err
			} else if !ok {
				continue // an optional source that is missing
			}
		}
		set(e.Name, v)
	}
	for _, k := range slices.Sorted(maps.Keys(svcVars)) {
		if _, ok := vars[k]; !ok {
			set(k, svcVars[k])
		}
	}
	out := make([]*runtimeapi.KeyValue, 0, len(order))
	for _, k := range order {
		out = append(out, &runtimeapi.KeyValue{Key: k, Value: []byte(vars[k])})
	}
	return out, nil
}

func envFromData(ctx context.Context, o objects, ns string, from corev1.EnvFromSource) (map[string]string, error) {
	switch {
	case from.ConfigMapRef != nil:
		cm, err := o.configMap(ctx, ns, from.ConfigMapRef.Name)
		if err != nil {
			if optional(from.ConfigMapRef.Optional) {
				return nil, nil
			}
			return nil, &envError{fmt.Sprintf("configmap %q not found", from.ConfigMapRef.Name)}
		}
		return cm.Data, nil
	case from.SecretRef != nil:
		s, err := o.secret(ctx, ns, from.SecretRef.Name)
		if err != nil {
			if optional(from.SecretRef.Optional) {
				return nil, nil
			}
			return nil, &envError{fmt.Sprintf("secret %q not found", from.SecretRef.Name)}
		}
		data := make(map[string]string, len(s.Data))
		for k, v := range s.Data {
			data[k] = string(v)
		}
		return data, nil
	}
	return nil, nil
}

func optional(b *bool) bool { return b != nil && *b }

// envValueFrom resolves one valueFrom; ok is false for a missing optional key.
func envValueFrom(ctx context.Context, o objects, pod *corev1.Pod, c *corev1.Container, from *corev1.EnvVarSource, podIP, hostIP string) (string, bool, error) {
	switch {
	case from.FieldRef != nil:
		v, err := podField(pod, from.FieldRef.FieldPath, podIP, hostIP)
		return v, err == nil, err
	case from.ResourceFieldRef != nil:
		v, err := resourceField(pod, c, from.ResourceFieldRef, func() (corev1.ResourceList, error) { return o.allocatable(ctx) })
		return v, err == nil, err
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		cm, err := o.configMap(ctx, pod.Namespace, ref.Name)
		if err != nil {
			if optional(ref.Optional) {
				return "", false, nil
			}
			return "", false, &envError{fmt.Sprintf("configmap %q not found", ref.Name)}
		}
		v, ok := cm.Data[ref.Key]
		if !ok && !optional(ref.Optional) {
			return "", false, &envError{fmt.Sprintf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)}
		}
		return v, ok, nil
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		s, err := o.secret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			if optional(ref.Optional) {
				return "", false, nil
			}
			return "", false, &envError{fmt.Sprintf("secret %q not found", ref.Name)}
		}
		v, ok := s.Data[ref.Key]
		if !ok && !optional(ref.Optional) {
			return "", false, &envError{fmt.Sprintf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)}
		}
		return string(v), ok, nil
	}
	return "", false, &envError{"an env valueFrom names no source"}
}

// podField is the downward API's value of a pod field path.
func podField(pod *corev1.Pod, path, podIP, hostIP string) (string, error) {
	if k, ok := strings.CutPrefix(path, "metadata.labels['"); ok {
		return pod.Labels[strings.TrimSuffix(k, "']")], nil
	}
	if k, ok := strings.CutPrefix(path, "metadata.annotations['"); ok {
		return pod.Annotations[strings.TrimSuffix(k, "']")], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return hostIP, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	}
	return "", &envError{fmt.Sprintf("unsupported fieldPath %q", path)}
}

// formatMap is the downward API's file format of labels and annotations: key="value" lines, sorted.
func formatMap(m map[string]string) string {
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(k + "=" + strconv.Quote(m[k]))
	}
	return b.String()
}

// resourceField is the downward API's value of a container resource. An unset limit falls back to the request,
// then 0 (upstream falls back to the node's allocatable, which a pod's own view should not depend on here).
// A limit the container does not set is the node's allocatable amount (allocatable is called only then).
func resourceField(pod *corev1.Pod, c *corev1.Container, ref *corev1.ResourceFieldSelector, allocatable func() (corev1.ResourceList, error)) (string, error) {
	target := c
	if ref.ContainerName != "" {
		target = nil
		for i := range pod.Spec.Containers {
			if pod.Spec.Containers[i].Name == ref.ContainerName {
				target = &pod.Spec.Containers[i]
			}
		}
		if target == nil {
			return "", &envError{fmt.Sprintf("resourceFieldRef names no container %q", ref.ContainerName)}
		}
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok {
		return "", &envError{fmt.Sprintf("unsupported resource %q", ref.Resource)}
	}
	list := target.Resources.Limits
	if kind == "requests" {
		list = target.Resources.Requests
	}
	q, ok := list[corev1.ResourceName(name)]
	if !ok && kind == "limits" {
		alloc, err := allocatable()
		if err != nil {
			return "", err
		}
		q = alloc[corev1.ResourceName(name)]
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	// As upstream: the value divided by the divisor, rounded up.
	v := (q.MilliValue() + divisor.MilliValue() - 1) / divisor.MilliValue()
	return strconv.FormatInt(v, 10), nil
}

// expand replaces $(VAR) with the variable's value when defined; $$ escapes a $; anything else is kept as written,
// as Kubernetes' expansion does.
func expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// expandAll expands each string of a command or args list against the environment.
func expandAll(in []string, env []*runtimeapi.KeyValue) []string {
	if len(in) == 0 {
		return nil
	}
	vars := make(map[string]string, len(env))
	for _, kv := range env {
		vars[kv.Key] = string(kv.Value)
	}
	lookup := func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = expand(s, lookup)
	}
	return out
}
