package agentapi

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DefaultContainerAnnotation names the container kubectl picks when none is given; the proxy honours it too.
const DefaultContainerAnnotation = "kubectl.kubernetes.io/default-container"

// chooseContainer is the container a log, exec or attach request is for, with upstream's errors: a named
// container must exist (containers, init or ephemeral); without a name, the default-container annotation
// (when it names a container) or the only container, else a 400 listing the choices.
func chooseContainer(pod *corev1.Pod, name string) (string, error) {
	if name != "" {
		if !hasContainer(pod, name) {
			return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
		}
		return name, nil
	}
	if d := pod.Annotations[DefaultContainerAnnotation]; d != "" && hasContainer(pod, d) {
		return d, nil
	}
	switch len(pod.Spec.Containers) {
	case 1:
		return pod.Spec.Containers[0].Name, nil
	case 0:
		return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s", pod.Name))
	}
	msg := fmt.Sprintf("a container name must be specified for pod %s, choose one of: [%s]", pod.Name,
		containerNames(pod.Spec.Containers))
	if len(pod.Spec.InitContainers) > 0 {
		msg += fmt.Sprintf(" or one of the init containers: [%s]", containerNames(pod.Spec.InitContainers))
	}
	if len(pod.Spec.EphemeralContainers) > 0 {
		var names []string
		for _, c := range pod.Spec.EphemeralContainers {
			names = append(names, c.Name)
		}
		msg += fmt.Sprintf(" or one of the ephemeral containers: [%s]", strings.Join(names, " "))
	}
	return "", apierrors.NewBadRequest(msg)
}

func containerNames(cs []corev1.Container) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return strings.Join(names, " ")
}

func hasContainer(pod *corev1.Pod, name string) bool {
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range cs {
			if c.Name == name {
				return true
			}
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// flag reads a boolean query parameter as upstream's parameter codec does: absent, "false" or "0" are false,
// anything else (even empty) true.
func flag(q url.Values, key string) bool {
	v, ok := q[key]
	if !ok || len(v) == 0 {
		return false
	}
	switch strings.ToLower(v[0]) {
	case "false", "0":
		return false
	}
	return true
}

// logQuery validates the PodLogOptions of q and returns the kubelet's /containerLogs parameters.
func logQuery(pod string, q url.Values) (url.Values, error) {
	out := url.Values{}
	for _, f := range []string{"follow", "previous", "timestamps"} {
		if flag(q, f) {
			out.Set(f, "true")
		}
	}
	var errs field.ErrorList
	ints := map[string]int64{}
	for _, f := range []struct {
		name string
		min  int64
	}{{"sinceSeconds", 1}, {"tailLines", 0}, {"limitBytes", 1}} {
		v := q.Get(f.name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("%s: %q is not an integer", f.name, v))
		}
		if n < f.min {
			errs = append(errs, field.Invalid(field.NewPath(f.name), n, fmt.Sprintf("must be greater than or equal to %d", f.min)))
		}
		ints[f.name] = n
		out.Set(f.name, strconv.FormatInt(n, 10))
	}
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("sinceTime: %q is not an RFC 3339 time", v))
		}
		if _, ok := ints["sinceSeconds"]; ok {
			errs = append(errs, field.Forbidden(field.NewPath("sinceTime"), "at most one of `sinceTime` or `sinceSeconds` may be specified"))
		}
		out.Set("sinceTime", t.UTC().Format(time.RFC3339))
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("PodLogOptions").GroupKind(), pod, errs)
	}
	return out, nil
}

// streamQuery is the kubelet's parameters of an exec (with its command) or attach.
func streamQuery(q url.Values, exec bool) url.Values {
	out := url.Values{}
	for in, param := range map[string]string{"stdin": "input", "stdout": "output", "stderr": "error", "tty": "tty"} {
		if flag(q, in) {
			out.Set(param, "1")
		}
	}
	if exec {
		out["command"] = q["command"]
	}
	return out
}

// portForwardQuery is the kubelet's parameters of a port-forward: the ports of a websocket port-forward
// (SPDY names them in each stream's headers).
func portForwardQuery(q url.Values) url.Values {
	out := url.Values{}
	if ps := q["ports"]; len(ps) > 0 {
		out.Set("port", strings.Join(ps, ","))
	}
	return out
}
