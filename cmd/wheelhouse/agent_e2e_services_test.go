package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// servicesManifest puts the web Deployment behind a ClusterIP, a NodePort and a headless Service.
const servicesManifest = `apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: web-nodeport, namespace: default}
spec:
  type: NodePort
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: web-headless, namespace: default}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{name: http, port: 8080}]
`

// testServices: the agents' Service proxy and DNS, the way a user meets them — pods reach the web Deployment by
// its Service's name (the agent's DNS on the pod gateway, the pod's resolv.conf search list) and the proxy spreads
// the connections over the pods on both nodes, the pod on node-a reaching itself too (hairpin); the NodePort
// answers from outside the pod network (this test's host); headless and SRV answers; unknown names are NXDOMAIN;
// containers have KUBERNETES_SERVICE_HOST/PORT and kubectl in a pod reaches the API (in-cluster configuration); a
// deleted Service stops answering and leaves DNS.
func (c *agentCluster) testServices(t *testing.T) {
	c.k.must(servicesManifest, "apply", "-f", "-")
	a, b := c.webOn["node-a"], c.webOn["node-b"]
	web, err := c.cs.CoreV1().Services("default").Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the web Service's EndpointSlice with both pods ready", func() (bool, string) {
		list, err := c.cs.DiscoveryV1().EndpointSlices("default").List(t.Context(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for _, es := range list.Items {
			for _, ep := range es.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					ready++
				}
			}
		}
		return ready == 2, fmt.Sprintf("%d ready endpoints", ready)
	})

	// By name, from a pod: DNS, then the cluster IP, spread over both pods (the one asking included).
	eventually(t, 30*time.Second, "http://web/ from a pod", func() (bool, string) {
		out, err := c.k.run("", "exec", a, "--", c.podBin, "get", "http://web/")
		return err == nil && strings.Contains(out, "hello from"), out
	})
	out := c.k.must("", "exec", a, "--", c.podBin, "get", "-n", "40", "http://web.default.svc.cluster.local/")
	if n := strings.Count(out, "hello from"); n != 40 {
		t.Fatalf("%d of 40 requests through the cluster IP answered:\n%s", n, out)
	}
	for _, p := range []string{a, b} {
		if !strings.Contains(out, "hello from "+p+"\n") {
			t.Errorf("no answer from %s among 40 connections through the cluster IP (pod %s asked):\n%s", p, a, out)
		}
	}

	// The NodePort from outside the pod network: this test's own namespace is the LAN's host.
	np, err := c.cs.CoreV1().Services("default").Get(t.Context(), "web-nodeport", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(int(np.Spec.Ports[0].NodePort))
	for _, node := range []string{"node-a", "node-b"} {
		url := "http://" + net.JoinHostPort(c.nodeIPs[node], port) + "/"
		seen := map[string]bool{}
		eventually(t, 30*time.Second, "both pods through "+node+"'s node port", func() (bool, string) {
			body, err := getOnce(url)
			if err != nil {
				return false, err.Error()
			}
			seen[strings.TrimSpace(body)] = true
			return seen["hello from "+a] && seen["hello from "+b], fmt.Sprint(seen)
		})
	}

	// DNS from a pod: the cluster IP, the headless Service's pod addresses, SRV for the named port, NXDOMAIN.
	contains(t, c.k.must("", "exec", a, "--", c.podBin, "lookup", "web"), web.Spec.ClusterIP)
	ips := []string{c.pod(t, a).Status.PodIP, c.pod(t, b).Status.PodIP}
	slices.Sort(ips)
	if got := strings.Fields(c.k.must("", "exec", b, "--", c.podBin, "lookup", "web-headless.default.svc.cluster.local")); !slices.Equal(got, ips) {
		t.Errorf("headless Service resolves to %q, want the pods' %q", got, ips)
	}
	contains(t, c.k.must("", "exec", b, "--", c.podBin, "srv", "http", "tcp", "web.default.svc.cluster.local"), "web.default.svc.cluster.local. 80")
	if out, err := c.k.run("", "exec", a, "--", c.podBin, "lookup", "nosuch.default.svc.cluster.local"); err == nil || !strings.Contains(out, "no such host") {
		t.Errorf("an unknown Service: %v\n%s\nwant NXDOMAIN (no such host)", err, out)
	}

	// Every container knows the API's Service.
	api, err := c.cs.CoreV1().Services("default").Get(t.Context(), "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	contains(t, c.k.must("", "exec", a, "--", c.podBin, "env", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"),
		"KUBERNETES_SERVICE_HOST="+api.Spec.ClusterIP+"\nKUBERNETES_SERVICE_PORT=443")

	// In-cluster clients: kubectl in a pod with no kubeconfig (rest.InClusterConfig: the kubernetes Service's
	// cluster IP, the pod's ServiceAccount token, kube-root-ca.crt) reaches the cluster's API through its node's
	// API proxy, as the pod's ServiceAccount — on both nodes, by cluster IP and by name.
	c.k.must("", "create", "rolebinding", "default-view", "--clusterrole", "view", "--serviceaccount", "default:default")
	eventually(t, 30*time.Second, "kubectl in a pod lists the pods", func() (bool, string) {
		out, err := c.k.run("", "exec", a, "--", c.k.bin, "get", "pods", "-o", "name")
		return err == nil && strings.Contains(out, "pod/"+a+"\n") && strings.Contains(out, "pod/"+b+"\n"), out
	})
	contains(t, c.k.must("", "exec", b, "--", "/usr/bin/env", "KUBERNETES_SERVICE_HOST=kubernetes.default.svc",
		c.k.bin, "get", "pod", b, "-o", "name"), "pod/"+b)
	if out, err := c.k.run("", "exec", a, "--", c.k.bin, "get", "secrets"); err == nil ||
		!strings.Contains(out, `"system:serviceaccount:default:default" cannot list resource "secrets"`) {
		t.Errorf("a pod's kubectl is not its ServiceAccount: %v\n%s", err, out)
	}
	// A host-network pod too: its connection to the cluster IP leaves from the node itself.
	c.k.must(c.podManifest("hostnet", "tick", "  hostNetwork: true\n  nodeName: node-a\n"), "apply", "-f", "-")
	eventually(t, 30*time.Second, "kubectl in a host-network pod lists the pods", func() (bool, string) {
		out, err := c.k.run("", "exec", "hostnet", "--", c.k.bin, "get", "pod", "hostnet", "-o", "name")
		return err == nil && strings.Contains(out, "pod/hostnet"), out
	})
	c.k.must("", "delete", "pod", "hostnet", "--wait=false")
	c.k.must("", "delete", "rolebinding", "default-view")

	// Deleting the Services removes their rules and their names.
	c.k.must("", "delete", "service", "web", "web-nodeport", "web-headless")
	eventually(t, 30*time.Second, "the deleted Service's cluster IP stops answering", func() (bool, string) {
		out, err := c.k.run("", "exec", a, "--", c.podBin, "get", "http://"+web.Spec.ClusterIP+"/")
		return err != nil, out
	})
	// (Its full name: a short one would end up asked of the host's resolvers, which this test's nodes cannot reach.)
	eventually(t, 30*time.Second, "the deleted Service's name gone", func() (bool, string) {
		out, err := c.k.run("", "exec", a, "--", c.podBin, "lookup", "web.default.svc.cluster.local")
		return err != nil && strings.Contains(out, "no such host"), out
	})
	if body, err := getOnce("http://" + net.JoinHostPort(c.nodeIPs["node-a"], port) + "/"); err == nil {
		t.Errorf("the deleted NodePort still answers: %q", body)
	}
}

// getOnce GETs url on a new connection, with a short bound.
func getOnce(url string) (string, error) {
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err == nil && res.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, res.Status)
	}
	return string(body), err
}
