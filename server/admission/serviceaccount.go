package admission

import (
	"context"
	"crypto/rand"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/wheelhouse-dev/wheelhouse/server/kubeapi"
	"github.com/wheelhouse-dev/wheelhouse/server/resources"
)

// ServiceAccountTokenPath is where containers find their ServiceAccount's token, CA and namespace (upstream's).
const ServiceAccountTokenPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// RootCAConfigMap is the ConfigMap every namespace holds with the CA of the cluster's API (upstream's root CA
// publisher); the projected volume takes ca.crt from it.
const RootCAConfigMap = "kube-root-ca.crt"

// tokenExpirationSeconds is the projected token's requested life (upstream's 3607: an hour and a little, so
// clients that refresh hourly never hold an expired one).
const tokenExpirationSeconds = 3607

// ServiceAccounts looks up a ServiceAccount (for its automountServiceAccountToken).
type ServiceAccounts interface {
	ServiceAccount(ctx context.Context, cluster, namespace, name string) (*corev1.ServiceAccount, bool, error)
}

// ServiceAccount is upstream's ServiceAccount admission plugin for pods: at creation a pod without
// spec.serviceAccountName runs as "default", a pod without imagePullSecrets gets its ServiceAccount's, and unless the pod or its ServiceAccount opts out
// (automountServiceAccountToken: false) every container gets the projected volume kube-api-access-<suffix> at
// /var/run/secrets/kubernetes.io/serviceaccount: a token bound to the pod, the cluster's CA (ConfigMap
// kube-root-ca.crt) and the namespace, which in-cluster clients (client-go's InClusterConfig) read.
type ServiceAccount struct {
	Accounts ServiceAccounts // optional: without it only the pod's own opt-out counts
}

// Admit sets a new pod's ServiceAccount and mounts its API access.
func (s ServiceAccount) Admit(ctx context.Context, req kubeapi.AdmissionRequest) error {
	pod, ok := req.Object.(*corev1.Pod)
	if !ok || req.Operation != "CREATE" || req.Subresource != "" {
		return nil
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return nil
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = "default"
	}
	var sa *corev1.ServiceAccount
	if s.Accounts != nil {
		got, found, err := s.Accounts.ServiceAccount(ctx, req.Cluster, req.Namespace, pod.Spec.ServiceAccountName)
		if err != nil {
			return err
		}
		if found {
			sa = got
		}
	}
	// A pod without pull secrets of its own pulls with its ServiceAccount's.
	if sa != nil && len(pod.Spec.ImagePullSecrets) == 0 && len(sa.ImagePullSecrets) > 0 {
		pod.Spec.ImagePullSecrets = append([]corev1.LocalObjectReference(nil), sa.ImagePullSecrets...)
	}
	automount := true
	switch {
	case pod.Spec.AutomountServiceAccountToken != nil:
		automount = *pod.Spec.AutomountServiceAccountToken
	case sa != nil && sa.AutomountServiceAccountToken != nil:
		automount = *sa.AutomountServiceAccountToken
	}
	if !automount {
		return nil
	}
	name := "kube-api-access-" + suffix()
	mounted := false
	mount := func(cs []corev1.Container) {
		for i := range cs {
			has := false
			for _, m := range cs[i].VolumeMounts {
				if m.MountPath == ServiceAccountTokenPath {
					has = true
				}
			}
			if !has {
				cs[i].VolumeMounts = append(cs[i].VolumeMounts, corev1.VolumeMount{Name: name, ReadOnly: true,
					MountPath: ServiceAccountTokenPath})
				mounted = true
			}
		}
	}
	mount(pod.Spec.InitContainers)
	mount(pod.Spec.Containers)
	if !mounted {
		return nil // every container mounts something of its own there
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](corev1.ProjectedVolumeSourceDefaultMode),
			Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](tokenExpirationSeconds), Path: "token"}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: RootCAConfigMap},
					Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
					FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
			}}}})
	return nil
}

// suffix is five random lower-case letters and digits without vowels, as upstream's generated names.
func suffix() string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// CachedServiceAccounts reads ServiceAccounts from the API's watch cache.
type CachedServiceAccounts struct {
	API *kubeapi.API
	Res *resources.Resource // serviceaccounts
}

// ServiceAccount finds one by name (not found: the pod is created all the same, as the ServiceAccount may come
// a moment later from its controller).
func (c CachedServiceAccounts) ServiceAccount(ctx context.Context, cluster, namespace, name string) (*corev1.ServiceAccount, bool, error) {
	col, err := c.API.Collection(ctx, cluster, c.Res)
	if err != nil {
		return nil, false, err
	}
	e, ok, _ := col.GetIn(cluster, namespace, name)
	if !ok {
		return nil, false, nil
	}
	return e.Object.(*corev1.ServiceAccount), true, nil
}
