package kubeapi

import (
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func newService(name string, typ corev1.ServiceType) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
}

func TestKubernetesServiceAtFirstAddress(t *testing.T) {
	env := newTestEnv(t)
	svc, err := env.client(t, "c1").CoreV1().Services("default").Get(t.Context(), "kubernetes", metav1.GetOptions{})
	if err != nil || svc.Spec.ClusterIP != "10.96.0.1" {
		t.Fatalf("kubernetes service = %v, %v; want clusterIP 10.96.0.1", svc, err)
	}
}

func TestServiceAllocationIsUniqueUnderConcurrency(t *testing.T) {
	env := newTestEnv(t)
	svcs := env.client(t, "c1").CoreV1().Services("default")
	const n = 40
	ips, ports := make([]string, n), make([]int32, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			s, err := svcs.Create(t.Context(), newService(fmt.Sprintf("s%d", i), corev1.ServiceTypeNodePort), metav1.CreateOptions{})
			if err != nil {
				errs <- err
				return
			}
			ips[i], ports[i] = s.Spec.ClusterIP, s.Spec.Ports[0].NodePort
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seenIP, seenPort := map[string]bool{"10.96.0.1": true}, map[int32]bool{}
	for i := range n {
		if ips[i] == "" || seenIP[ips[i]] || ports[i] < 30000 || ports[i] > 32767 || seenPort[ports[i]] {
			t.Fatalf("service %d got ip %q port %d: missing, out of range or duplicated", i, ips[i], ports[i])
		}
		seenIP[ips[i]], seenPort[ports[i]] = true, true
	}
}

func TestServiceAddressErrorsAndRelease(t *testing.T) {
	env := newTestEnv(t)
	ctx := t.Context()
	svcs := env.client(t, "c1").CoreV1().Services("default")
	s := newService("fixed", corev1.ServiceTypeNodePort)
	s.Spec.ClusterIP, s.Spec.Ports[0].NodePort = "10.96.5.5", 31000
	created, err := svcs.Create(ctx, s, metav1.CreateOptions{})
	if err != nil || created.Spec.ClusterIP != "10.96.5.5" || created.Spec.Ports[0].NodePort != 31000 {
		t.Fatalf("create with fixed addresses = %v, %v", created, err)
	}
	for name, mutate := range map[string]func(*corev1.Service){
		"ip taken":        func(s *corev1.Service) { s.Spec.ClusterIP = "10.96.5.5" },
		"ip out of range": func(s *corev1.Service) { s.Spec.ClusterIP = "192.168.0.1" },
		"port taken":      func(s *corev1.Service) { s.Spec.Type, s.Spec.Ports[0].NodePort = corev1.ServiceTypeNodePort, 31000 },
		"port out of range": func(s *corev1.Service) {
			s.Spec.Type, s.Spec.Ports[0].NodePort = corev1.ServiceTypeNodePort, 80
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newService("other", corev1.ServiceTypeClusterIP)
			mutate(s)
			if _, err := svcs.Create(ctx, s, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
				t.Fatalf("err = %v, want Invalid", err)
			}
		})
	}
	// An update that leaves the addresses out keeps them (kubectl replace).
	created.Spec.ClusterIP, created.Spec.ClusterIPs, created.Spec.Ports[0].NodePort = "", nil, 0
	updated, err := svcs.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil || updated.Spec.ClusterIP != "10.96.5.5" || updated.Spec.Ports[0].NodePort != 31000 {
		t.Fatalf("update without addresses = %v, %v", updated, err)
	}
	if err := svcs.Delete(ctx, "fixed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s = newService("again", corev1.ServiceTypeNodePort)
	s.Spec.ClusterIP, s.Spec.Ports[0].NodePort = "10.96.5.5", 31000
	if _, err := svcs.Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatalf("addresses were not released by the delete: %v", err)
	}
}

// TestServiceTypeChanges: changing a Service's type alone (the rest as read back) is valid, as upstream's: to
// ExternalName drops the cluster IPs and families, to a type without node ports drops them, and what was dropped
// is released for other Services; from ExternalName the Service gets a cluster IP again.
func TestServiceTypeChanges(t *testing.T) {
	env := newTestEnv(t)
	ctx := t.Context()
	svcs := env.client(t, "c1").CoreV1().Services("default")
	change := func(name string, typ corev1.ServiceType) *corev1.Service {
		t.Helper()
		s, err := svcs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Spec.Type = typ
		if typ == corev1.ServiceTypeExternalName {
			s.Spec.ExternalName = "example.com"
		} else {
			s.Spec.ExternalName = ""
		}
		out, err := svcs.Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("%s to %s: %v", name, typ, err)
		}
		return out
	}
	np := newService("np", corev1.ServiceTypeNodePort)
	np.Spec.ClusterIP, np.Spec.Ports[0].NodePort = "10.96.7.7", 31007
	if _, err := svcs.Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if s := change("np", corev1.ServiceTypeClusterIP); s.Spec.ClusterIP != "10.96.7.7" || s.Spec.Ports[0].NodePort != 0 {
		t.Errorf("NodePort to ClusterIP: clusterIP %q nodePort %d, want the IP kept and no node port", s.Spec.ClusterIP, s.Spec.Ports[0].NodePort)
	}
	s := change("np", corev1.ServiceTypeExternalName)
	if s.Spec.ClusterIP != "" || len(s.Spec.ClusterIPs) != 0 || len(s.Spec.IPFamilies) != 0 || s.Spec.IPFamilyPolicy != nil {
		t.Errorf("ClusterIP to ExternalName kept %q %v %v %v", s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies, s.Spec.IPFamilyPolicy)
	}
	// The dropped addresses are free again.
	other := newService("other", corev1.ServiceTypeNodePort)
	other.Spec.ClusterIP, other.Spec.Ports[0].NodePort = "10.96.7.7", 31007
	if _, err := svcs.Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the dropped addresses were not released: %v", err)
	}
	if s := change("np", corev1.ServiceTypeClusterIP); s.Spec.ClusterIP == "" || s.Spec.ClusterIP == "10.96.7.7" {
		t.Errorf("ExternalName to ClusterIP: clusterIP %q, want a new one", s.Spec.ClusterIP)
	}
	// A NodePort Service straight to ExternalName.
	if s := change("other", corev1.ServiceTypeExternalName); s.Spec.ClusterIP != "" || s.Spec.Ports[0].NodePort != 0 {
		t.Errorf("NodePort to ExternalName: clusterIP %q nodePort %d", s.Spec.ClusterIP, s.Spec.Ports[0].NodePort)
	}
}
