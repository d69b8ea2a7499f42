package main

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/containerdtest"
)

// containerdPods are the test's pods: a server from an image that is present (pull policy Never), the Service in
// front of it, and a pod whose image no registry has.
const containerdPods = `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default, labels: {app: web}}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: web
    image: ` + containerdtest.ServerImage + `
    imagePullPolicy: Never
    command: [/podserver, serve]
    env:
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    ports: [{containerPort: 8080}]
    readinessProbe:
      httpGet: {path: /ready, port: 8080}
      periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: absent, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: wheelhouse.test/absent:1
    imagePullPolicy: IfNotPresent
`

// TestContainerdAgent drives `wheelhouse agent --runtime containerd` on a machine (a network namespace of this
// host) running a real containerd, with kubectl: the node reports containerd, a pod runs from an image on the
// node's pod network, logs and exec go through containerd's streaming server, the pod reaches itself through
// its Service by name (CNI, the proxy and DNS together), an image no registry has is ErrImagePull, probes,
// OOM kills, crash-loop back-off, logs -f / exec / attach / port-forward / stats as with the process runtime, the
// agent restarts without touching the pod, deleting the pods leaves nothing in containerd nor in the cgroups, and
// `wheelhouse agent cleanup` (uninstalling) removes the agent's pods from containerd, not others'.
func TestContainerdAgent(t *testing.T) {
	requireNamespaces(t)
	l := newLAN(t, "node-c")
	n := l.nodes[0]
	cniDir := t.TempDir()
	ctd := containerdtest.Start(t, containerdtest.Options{NetNS: n.nsPath(), CNIConfDir: cniDir})
	ctd.ImportImages(t, containerdtest.Pause(t), containerdtest.Server(t))
	c, token := newAgentCluster(t, l, "/podserver")
	c.podImage, c.streamNode, c.webOn[n.name] = containerdtest.ServerImage, n.name, "web"
	a := newAgent(t, c.bin, "", c.server.url, n)
	a.args = []string{"--runtime", "containerd", "--containerd-endpoint", ctd.Socket, "--cni-conf-dir", cniDir}
	a.start(t, token)
	c.agents[n.name] = a

	var node *corev1.Node
	steps := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"the node runs containerd", func(t *testing.T) {
			eventually(t, 60*time.Second, "node-c Ready", func() (bool, string) {
				var err error
				node, err = c.cs.CoreV1().Nodes().Get(t.Context(), "node-c", metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				ready := readyCondition(node)
				return ready.Status == corev1.ConditionTrue, ready.Message
			})
			if v := node.Status.NodeInfo.ContainerRuntimeVersion; !strings.HasPrefix(v, "containerd://1.") {
				t.Errorf("containerRuntimeVersion %q, want containerd://1.x", v)
			}
			if _, err := os.Stat(filepath.Join(cniDir, "10-wheelhouse.conflist")); err != nil {
				t.Errorf("the agent wrote no CNI configuration: %v", err)
			}
		}},
		{"a pod from an image", func(t *testing.T) {
			c.k.must(containerdPods, "apply", "-f", "-")
			eventually(t, 60*time.Second, "web Ready", func() (bool, string) {
				p := c.pod(t, "web")
				return podReady(p), string(p.Status.Phase)
			})
			p := c.pod(t, "web")
			cidr := netip.MustParsePrefix(node.Spec.PodCIDR)
			if ip, err := netip.ParseAddr(p.Status.PodIP); err != nil || !cidr.Contains(ip) {
				t.Errorf("pod IP %q, want one of the node's pod CIDR %v", p.Status.PodIP, cidr)
			}
			st := p.Status.ContainerStatuses[0]
			if !strings.HasPrefix(st.ContainerID, "containerd://") || !strings.Contains(st.ImageID, "sha256:") {
				t.Errorf("container ID %q, image ID %q: want containerd's", st.ContainerID, st.ImageID)
			}
		}},
		{"logs and exec", func(t *testing.T) {
			if out := c.k.must("", "logs", "web"); !strings.Contains(out, "serving on :8080 as web") {
				t.Errorf("kubectl logs web: %q", out)
			}
			if out := c.k.must("", "exec", "web", "--", "/podserver", "echo", "hello", "containerd"); out != "hello containerd\n" {
				t.Errorf("kubectl exec: %q", out)
			}
		}},
		{"the pod reaches its Service by name", func(t *testing.T) {
			// DNS from the pod's resolv.conf (containerd writes the sandbox's DNS config), the cluster IP through
			// the proxy, back to the pod itself (hairpin on the CNI bridge). "web.default", not "web": the pod is
			// named web too, and its /etc/hosts (kubelet's) maps its own name to its own IP, as upstream's does.
			eventually(t, 30*time.Second, "web answers through its Service", func() (bool, string) {
				out, err := c.k.run("", "exec", "web", "--", "/podserver", "get", "http://web.default/")
				return err == nil && strings.Contains(out, "hello from web"), out
			})
		}},
		{"the pod reaches the cluster's API", func(t *testing.T) {
			// As client-go in a pod does (the kubernetes Service, the token and ca.crt of its ServiceAccount
			// volume), through the node's API proxy; the server sees the pod's ServiceAccount.
			eventually(t, 30*time.Second, "the API's discovery from the pod", func() (bool, string) {
				out, err := c.k.run("", "exec", "web", "--", "/podserver", "api", "/api")
				return err == nil && strings.Contains(out, `"kind":"APIVersions"`), out
			})
			out, err := c.k.run("", "exec", "web", "--", "/podserver", "api", "/api/v1/namespaces/default/secrets")
			if err == nil || !strings.Contains(out, `system:serviceaccount:default:default\" cannot list resource \"secrets\"`) {
				t.Errorf("the pod's request is not its ServiceAccount's: %v\n%s", err, out)
			}
		}},
		{"an image no registry has", func(t *testing.T) {
			eventually(t, 60*time.Second, "absent waiting on its image", func() (bool, string) {
				p := c.pod(t, "absent")
				if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Waiting == nil {
					return false, string(p.Status.Phase)
				}
				w := p.Status.ContainerStatuses[0].State.Waiting
				return w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff", w.Reason + ": " + w.Message
			})
		}},
		// The agent issue's behaviours, as with the process runtime (the same steps as TestAgents').
		{"liveness probe restarts", c.testLiveness},
		{"memory limit OOMKills", c.testOOM},
		{"crash loop backs off", c.testCrashLoop},
		{"logs exec attach port-forward", c.testStreaming},
		{"the agent restarts under the pod", func(t *testing.T) {
			before := c.pod(t, "web").Status.ContainerStatuses[0]
			a.stop(t, syscall.SIGTERM)
			restarted := time.Now()
			a.start(t, "")
			// The restarted agent is back (its Lease renewed after the restart, exec through its new tunnel) and the pod's
			// container is the one from before, never restarted.
			eventually(t, 60*time.Second, "the agent back, web re-adopted", func() (bool, string) {
				lease, err := c.cs.CoordinationV1().Leases("kube-node-lease").Get(t.Context(), "node-c", metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				if lease.Spec.RenewTime == nil || !lease.Spec.RenewTime.After(restarted) {
					return false, "the node's Lease not renewed since the restart"
				}
				out, err := c.k.run("", "exec", "web", "--", "/podserver", "echo", "still", "here")
				return err == nil && out == "still here\n", out
			})
			p := c.pod(t, "web")
			if st := p.Status.ContainerStatuses[0]; !podReady(p) || st.ContainerID != before.ContainerID || st.RestartCount != 0 {
				t.Errorf("after the restart: ready %v, container %s (was %s), restarts %d", podReady(p), st.ContainerID, before.ContainerID, st.RestartCount)
			}
		}},
		{"deleted pods leave nothing", func(t *testing.T) {
			uid := c.pod(t, "web").UID
			c.k.must("", "delete", "pods", "--all", "--wait=true", "--timeout=60s")
			eventually(t, 30*time.Second, "containerd has no sandboxes", func() (bool, string) {
				resp, err := ctd.Runtime().ListPodSandbox(t.Context(), &runtimeapi.ListPodSandboxRequest{})
				if err != nil {
					return false, err.Error()
				}
				return len(resp.Items) == 0, strings.Join(sandboxNames(resp.Items), ", ")
			})
			dirs, _ := filepath.Glob("/sys/fs/cgroup/*" + cri.DefaultCgroupRoot + "/pod" + string(uid))
			more, _ := filepath.Glob("/sys/fs/cgroup" + cri.DefaultCgroupRoot + "/pod" + string(uid))
			if left := append(dirs, more...); len(left) > 0 {
				t.Errorf("the pod's cgroups are left: %v", left)
			}
		}},
		{"agent cleanup removes its pods from containerd", func(t *testing.T) {
			// What the uninstall script does once the agent has stopped: its pods go from containerd (a sandbox
			// someone else made there stays), the pod network from the node.
			c.k.must(c.podManifest("leftover", "serve", ""), "apply", "-f", "-")
			eventually(t, 60*time.Second, "leftover Running", func() (bool, string) {
				p := c.pod(t, "leftover")
				return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase)
			})
			foreignCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "foreign", Namespace: "other",
				Uid: "foreign-uid"}, LogDirectory: t.TempDir()}
			foreign, err := ctd.Runtime().RunPodSandbox(t.Context(), &runtimeapi.RunPodSandboxRequest{Config: foreignCfg})
			if err != nil {
				t.Fatal(err)
			}
			a.stop(t, syscall.SIGTERM)
			out, err := exec.Command("nsenter", "--net="+n.nsPath(), "--", c.bin, "agent", "cleanup",
				"--containerd-endpoint", ctd.Socket).CombinedOutput()
			if err != nil {
				t.Fatalf("wheelhouse agent cleanup: %v\n%s", err, out)
			}
			resp, err := ctd.Runtime().ListPodSandbox(t.Context(), &runtimeapi.ListPodSandboxRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Items) != 1 || resp.Items[0].GetId() != foreign.GetPodSandboxId() {
				t.Errorf("sandboxes left %q, want only the foreign one", sandboxNames(resp.Items))
			}
			if out, err := exec.Command("ip", "-n", n.netns, "link", "show", "wh0").CombinedOutput(); err == nil {
				t.Errorf("the bridge is left:\n%s", out)
			}
			_, _ = ctd.Runtime().StopPodSandbox(t.Context(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: foreign.GetPodSandboxId()})
			_, _ = ctd.Runtime().RemovePodSandbox(t.Context(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: foreign.GetPodSandboxId()})
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { c.k.t = t; s.fn(t) }) {
			return // later steps build on earlier ones
		}
	}
}

// readyCondition is the node's Ready condition (zero when it has none yet).
func readyCondition(n *corev1.Node) corev1.NodeCondition {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond
		}
	}
	return corev1.NodeCondition{}
}

func sandboxNames(items []*runtimeapi.PodSandbox) []string {
	out := make([]string, len(items))
	for i, sb := range items {
		out[i] = sb.GetMetadata().GetNamespace() + "/" + sb.GetMetadata().GetName() + " " + sb.GetState().String()
	}
	return out
}
