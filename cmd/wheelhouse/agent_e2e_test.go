package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	statsv1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

// webManifest is the test's HTTP server on both nodes (the spread constraint puts one replica on each; with
// nodeTaintsPolicy Honor a tainted node leaves the spread, so a lost node's replica moves to the other). It
// starts unready: readiness is turned on through kubectl exec.
const webManifest = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 5
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, nodeTaintsPolicy: Honor,
         labelSelector: {matchLabels: {app: web}}}
      containers:
      - name: web
        image: podserver
        command: [PODSERVER, serve, -unready]
        env:
        - name: POD_NAME
          valueFrom: {fieldRef: {fieldPath: metadata.name}}
        ports: [{containerPort: 8080}]
        readinessProbe:
          httpGet: {path: /ready, port: 8080}
          periodSeconds: 1
          failureThreshold: 1
`

// podManifest is a bare pod running podserver with args (YAML flow list items), and extra container fields: the
// cluster's podserver (a host binary for the process runtime, /podserver in an image for containerd).
func (c *agentCluster) podManifest(name, args, extra string) string {
	return podManifestOf(name, c.podImage, c.podBin, args, extra)
}

// podManifestOf is podManifest with a given image and program.
func podManifestOf(name, image, program, args, extra string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: %s
    imagePullPolicy: IfNotPresent
    command: [%s, %s]
%s`, name, image, program, args, extra)
}

// agentCluster is the server and the agents of the test.
type agentCluster struct {
	top          *testing.T // TestAgents itself: what outlives one step (the restarted server) is cleaned up with it
	bin, podBin  string     // podBin: the podserver program the pods run (a host path, or /podserver in podImage)
	podImage     string
	streamNode   string // the node whose web pod testStreaming uses
	server       *serverProcess
	serverArgs   []string
	serverEnv    []string
	k            *kubectl
	cs           kubernetes.Interface
	agents       map[string]*agentProcess
	nodeIPs      map[string]string
	nodeCIDRs    map[string]netip.Prefix
	webOn        map[string]string // node → web pod
	containerIDs map[string]string // web pod → container ID
}

// TestAgents drives the node agent the way a user does: a server on a LAN address, two machines (network
// namespaces of this host) joined with one join token, and kubectl. Pods run for real as processes with the
// pod network between the nodes; probes, restarts, OOM kills, back-off, logs / exec / port-forward through
// the tunnel; then the agents and the server are restarted under running pods, and a node is lost.
func TestAgents(t *testing.T) {
	requireNamespaces(t)
	c := setupAgentCluster(t)
	steps := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"nodes register with pod CIDRs", c.testNodes},
		{"deployment across nodes", c.testDeployment},
		{"services and DNS", c.testServices},
		{"liveness probe restarts", c.testLiveness},
		{"memory limit OOMKills", c.testOOM},
		{"crash loop backs off", c.testCrashLoop},
		{"pods the runtime cannot run", c.testUnrunnable},
		{"logs exec attach port-forward", c.testStreaming},
		{"agent restart keeps pods", c.testAgentRestart},
		{"server restart keeps pods", c.testServerRestart},
		{"lost node's pods move", c.testNodeLost},
		{"workloads deleted", c.testDeleteAll},
		{"agent cleanup", c.testCleanup},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { c.k.t = t; s.fn(t) }) {
			return // later steps build on earlier ones
		}
	}
}

func setupAgentCluster(t *testing.T) *agentCluster {
	l := newLAN(t, "node-a", "node-b")
	c, token := newAgentCluster(t, l, buildPodServer(t))
	for _, n := range l.nodes {
		a := newAgent(t, c.bin, c.podBin, c.server.url, n)
		a.start(t, token)
		c.agents[n.name], c.nodeIPs[n.name] = a, n.ip
	}
	return c
}

// newAgentCluster starts the server on the LAN, with kubectl and a client, and returns a join token for the LAN's
// nodes; the agents are the caller's to start.
func newAgentCluster(t *testing.T, l *lan, podBin string) (*agentCluster, string) {
	c := &agentCluster{top: t, bin: buildBinary(t), podBin: podBin, podImage: "podserver", streamNode: "node-b", agents: map[string]*agentProcess{},
		nodeIPs: map[string]string{}, nodeCIDRs: map[string]netip.Prefix{}, webOn: map[string]string{}}
	kbin := kubectlPath(t)
	dataDir := t.TempDir()
	// A fixed port: the agents must find the server again after it restarts.
	c.serverArgs = []string{"--data-dir", dataDir, "--listen", net.JoinHostPort(l.hostIP, freePort(t, l.hostIP)),
		// The agents renew their Leases every 10 s: the grace period must be longer.
		"--node-monitor-grace-period", "16s", "--default-toleration-seconds", "2", "--node-eviction-rate", "10"}
	c.serverEnv = []string{"WHEELHOUSE_DATABASE_URL=" + pgtest.NewEmptyDatabase(t), "WHEELHOUSE_BOOTSTRAP_TOKEN=" + e2eToken}
	c.server = startServer(t, c.bin, c.serverEnv, c.serverArgs...)
	c.server.waitReady(t)
	c.k = newKubectl(t, c.bin, kbin, c.server.url, dataDir)
	rc, err := clientcmd.BuildConfigFromFlags("", c.k.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if c.cs, err = kubernetes.NewForConfig(rc); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(c.bin, "join-token", "create", "--server", c.server.url, "--token", e2eToken,
		"--cluster", "default", "--max-uses", fmt.Sprint(len(l.nodes)), "--data-dir", dataDir, "--description", "agent e2e").CombinedOutput()
	if err != nil {
		t.Fatalf("wheelhouse join-token create: %v\n%s", err, out)
	}
	return c, strings.TrimSpace(string(out))
}

// buildPodServer builds testdata/podserver, the program the test's containers run.
func buildPodServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "podserver")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./testdata/podserver").CombinedOutput(); err != nil {
		t.Fatalf("go build podserver: %v\n%s", err, out)
	}
	return bin
}

func freePort(t *testing.T, host string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// eventually polls cond until it holds or timeout passes; cond says what it saw, for the failure message.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, seen := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last seen: %s", what, timeout, seen)
		}
		time.Sleep(200 * time.Millisecond) // polling interval
	}
}

func (c *agentCluster) pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	p, err := c.cs.CoreV1().Pods("default").Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s: %v", name, err)
	}
	return p
}

func podReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (c *agentCluster) testNodes(t *testing.T) {
	eventually(t, 60*time.Second, "both nodes Ready with pod CIDRs", func() (bool, string) {
		out, _ := c.k.run("", "get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status} {.spec.podCIDR};{end}`)
		return strings.Count(out, " True 10.244.") == 2, out
	})
	contains(t, c.k.must("", "get", "nodes", "-o", "wide"), "node-a", "node-b", "Ready", "192.168.250.2", "192.168.250.3", "process://")
	nodes, err := c.cs.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		cidr, err := netip.ParsePrefix(n.Spec.PodCIDR)
		if err != nil || cidr.Bits() != 24 || !netip.MustParsePrefix("10.244.0.0/16").Contains(cidr.Addr()) {
			t.Errorf("node %s podCIDR %q, want a /24 of 10.244.0.0/16", n.Name, n.Spec.PodCIDR)
		}
		var internal string
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				internal = a.Address
			}
		}
		if internal != c.nodeIPs[n.Name] {
			t.Errorf("node %s InternalIP %q, want its LAN address %s", n.Name, internal, c.nodeIPs[n.Name])
		}
		c.nodeCIDRs[n.Name] = cidr
	}
	if c.nodeCIDRs["node-a"] == c.nodeCIDRs["node-b"] {
		t.Errorf("both nodes have pod CIDR %v", c.nodeCIDRs["node-a"])
	}
}

func (c *agentCluster) testDeployment(t *testing.T) {
	c.k.must(strings.ReplaceAll(webManifest, "PODSERVER", c.podBin), "apply", "-f", "-")
	eventually(t, 60*time.Second, "a running web pod on each node", func() (bool, string) {
		pods, err := c.cs.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err.Error()
		}
		clear(c.webOn)
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				c.webOn[p.Spec.NodeName] = p.Name
			}
		}
		return len(c.webOn) == 2, fmt.Sprint(c.webOn)
	})
	for node, name := range c.webOn {
		p := c.pod(t, name)
		if ip, err := netip.ParseAddr(p.Status.PodIP); err != nil || !c.nodeCIDRs[node].Contains(ip) {
			t.Errorf("pod %s on %s has IP %q, outside the node's pod CIDR %v", name, node, p.Status.PodIP, c.nodeCIDRs[node])
		}
		if p.Status.HostIP != c.nodeIPs[node] {
			t.Errorf("pod %s hostIP %q, want %s", name, p.Status.HostIP, c.nodeIPs[node])
		}
	}
	// The readiness probe fails until the server is told it is ready: Running, not Ready, Unhealthy events.
	a, b := c.webOn["node-a"], c.webOn["node-b"]
	eventually(t, 30*time.Second, "readiness probe failures reported", func() (bool, string) {
		out, _ := c.k.run("", "get", "events", "--field-selector", "involvedObject.name="+a+",reason=Unhealthy")
		return strings.Contains(out, "Readiness probe failed"), out
	})
	if p := c.pod(t, a); podReady(p) {
		t.Fatalf("pod %s is Ready although its readiness probe fails", a)
	}
	contains(t, c.k.must("", "get", "deploy", "web"), "0/2")
	for _, name := range []string{a, b} {
		contains(t, c.k.must("", "exec", name, "--", c.podBin, "get", "http://127.0.0.1:8080/ready/on"), "ready now")
	}
	contains(t, c.k.must("", "rollout", "status", "deployment/web", "--timeout=60s"), "successfully rolled out")
	contains(t, c.k.must("", "get", "deploy", "web"), "2/2")
	// Pod to pod across the nodes, by pod IP, both ways.
	for _, pair := range [][2]string{{a, b}, {b, a}} {
		ip := c.pod(t, pair[1]).Status.PodIP
		contains(t, c.k.must("", "exec", pair[0], "--", c.podBin, "get", "http://"+ip+":8080/"), "hello from "+pair[1])
	}
	c.containerIDs = c.webContainers(t)
}

// webContainers maps the web pods to their container IDs, checking they are Ready and never restarted.
func (c *agentCluster) webContainers(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range c.webOn {
		p := c.pod(t, name)
		if len(p.Status.ContainerStatuses) != 1 {
			t.Fatalf("pod %s container statuses %+v", name, p.Status.ContainerStatuses)
		}
		cs := p.Status.ContainerStatuses[0]
		if !cs.Ready || cs.RestartCount != 0 || cs.ContainerID == "" || !podReady(p) {
			t.Errorf("pod %s: ready %v, restarts %d, container %q; want a Ready first container", name, cs.Ready, cs.RestartCount, cs.ContainerID)
		}
		out[name] = cs.ContainerID
	}
	return out
}

func (c *agentCluster) testLiveness(t *testing.T) {
	c.k.must(c.podManifest("sick", "serve, -healthy-for, 3s", `    livenessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
      failureThreshold: 2
`), "apply", "-f", "-")
	eventually(t, 60*time.Second, "the liveness probe restarts sick", func() (bool, string) {
		out, _ := c.k.run("", "get", "pod", "sick", "-o", "jsonpath={.status.containerStatuses[0].restartCount}")
		return out != "" && out != "0", out
	})
	events := c.k.must("", "get", "events", "--field-selector", "involvedObject.name=sick")
	contains(t, events, "Unhealthy", "Liveness probe failed", "Killing")
	c.k.must("", "delete", "pod", "sick", "--wait=false")
}

func (c *agentCluster) testOOM(t *testing.T) {
	c.k.must(c.podManifest("hog", "hog", `    resources:
      limits: {memory: 48Mi}
`), "apply", "-f", "-")
	eventually(t, 60*time.Second, "hog OOMKilled", func() (bool, string) {
		out, _ := c.k.run("", "get", "pod", "hog", "-o", "jsonpath={.status.containerStatuses[0].lastState.terminated.reason}")
		return out == "OOMKilled", out
	})
	contains(t, c.k.must("", "get", "pod", "hog", "-o", "jsonpath={.status.containerStatuses[0].lastState.terminated.exitCode}"), "137")
	c.k.must("", "delete", "pod", "hog", "--wait=false")
}

func (c *agentCluster) testCrashLoop(t *testing.T) {
	c.k.must(c.podManifest("crasher", "crash", ""), "apply", "-f", "-")
	eventually(t, 60*time.Second, "crasher in CrashLoopBackOff", func() (bool, string) {
		out, _ := c.k.run("", "get", "pod", "crasher")
		return strings.Contains(out, "CrashLoopBackOff"), out
	})
	p := c.pod(t, "crasher")
	if st := p.Status.ContainerStatuses[0]; st.LastTerminationState.Terminated == nil || st.LastTerminationState.Terminated.ExitCode != 3 {
		t.Errorf("crasher last state %+v, want terminated with exit code 3", st.LastTerminationState)
	}
	contains(t, c.k.must("", "get", "events", "--field-selector", "involvedObject.name=crasher"), "BackOff")
	contains(t, c.k.must("", "logs", "crasher"), "crashing on purpose")
	c.k.must("", "delete", "pod", "crasher", "--wait=false")
}

// testUnrunnable: a missing command, a volume type nodes do not support and a probe on a port the container
// does not have each get a reason and an event; the node's other pods carry on.
func (c *agentCluster) testUnrunnable(t *testing.T) {
	c.k.must(podManifestOf("nocmd", c.podImage, "/no/such/program", "x", ""), "apply", "-f", "-")
	c.k.must(c.podManifest("nopvc", "tick", `    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: absent}
`), "apply", "-f", "-")
	c.k.must(c.podManifest("badprobe", "tick", `    readinessProbe:
      httpGet: {path: /, port: nope}
      periodSeconds: 1
`), "apply", "-f", "-")
	waiting := func(name string) string {
		out, _ := c.k.run("", "get", "pod", name, "-o", "jsonpath={.status.containerStatuses[0].state.waiting.reason}")
		return out
	}
	eventually(t, 60*time.Second, "nocmd cannot start", func() (bool, string) {
		r := waiting("nocmd")
		return r == "RunContainerError" || r == "CrashLoopBackOff", r
	})
	contains(t, c.k.must("", "get", "events", "--field-selector", "involvedObject.name=nocmd"), "Failed", "/no/such/program")
	eventually(t, 60*time.Second, "nopvc waits on its volume", func() (bool, string) {
		r := waiting("nopvc")
		return r == "CreateContainerConfigError", r
	})
	contains(t, c.k.must("", "get", "events", "--field-selector", "involvedObject.name=nopvc"), "FailedMount", `volume "data"`)
	eventually(t, 60*time.Second, "badprobe's probe errors reported", func() (bool, string) {
		out, _ := c.k.run("", "get", "events", "--field-selector", "involvedObject.name=badprobe")
		return strings.Contains(out, "Unhealthy") && strings.Contains(out, `no container port named "nope"`), out
	})
	p := c.pod(t, "badprobe")
	if p.Status.Phase != corev1.PodRunning || podReady(p) {
		t.Errorf("badprobe: phase %s, ready %v; want Running and not ready", p.Status.Phase, podReady(p))
	}
	// The other pods carry on.
	for _, web := range c.webOn {
		contains(t, c.k.must("", "exec", web, "--", c.podBin, "get", "http://127.0.0.1:8080/"), "hello from "+web)
	}
	c.k.must("", "delete", "pod", "nocmd", "nopvc", "badprobe", "--wait=false")
}

func (c *agentCluster) testStreaming(t *testing.T) {
	c.k.must(c.podManifest("ticker", "tick", ""), "apply", "-f", "-")
	c.k.must("", "wait", "--for=condition=Ready", "pod/ticker", "--timeout=60s")
	t.Run("logs -f", func(t *testing.T) {
		out := c.background(t, nil, "logs", "-f", "ticker")
		eventually(t, 20*time.Second, "ticks followed", func() (bool, string) { return strings.Contains(out.String(), "tick 2\n"), out.String() })
		seen := strings.Count(out.String(), "tick ")
		eventually(t, 20*time.Second, "more ticks followed", func() (bool, string) {
			return strings.Count(out.String(), "tick ") >= seen+5, out.String()
		})
	})
	web := c.webOn[c.streamNode]
	t.Run("exec", func(t *testing.T) {
		c.k.t = t
		contains(t, c.k.must("", "exec", web, "--", c.podBin, "echo", "over", "websocket"), "over websocket")
		out, err := c.k.runIn("through stdin\n", []string{"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false"}, "exec", "-i", web, "--", c.podBin, "cat")
		if err != nil {
			t.Fatalf("kubectl exec -i over SPDY: %v", err)
		}
		contains(t, out, "through stdin")
		out, err = c.k.run("", "exec", web, "--", c.podBin, "crash")
		if err == nil || !strings.Contains(out, "exit code 3") {
			t.Errorf("kubectl exec of a failing command: %v, want exit code 3", err)
		}
	})
	t.Run("attach", func(t *testing.T) {
		c.k.t = t
		out := c.background(t, []string{"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false"}, "attach", "ticker")
		eventually(t, 20*time.Second, "ticks through attach over SPDY", func() (bool, string) {
			return strings.Count(out.String(), "tick ") >= 2, out.String()
		})
		c.k.must(c.podManifest("repl", "cat", "    stdin: true\n    stdinOnce: true\n  restartPolicy: Never\n"), "apply", "-f", "-")
		c.k.must("", "wait", "--for=condition=Ready", "pod/repl", "--timeout=60s")
		// stdinOnce: the end of kubectl's stdin ends cat, and so the session.
		contains(t, c.k.must("typed into attach\n", "attach", "-i", "repl"), "typed into attach")
		eventually(t, 30*time.Second, "repl Succeeded once its stdin closed", func() (bool, string) {
			out, _ := c.k.run("", "get", "pod", "repl", "-o", "jsonpath={.status.phase}")
			return out == "Succeeded", out
		})
		c.k.must("", "delete", "pod", "repl", "--wait=false")
	})
	t.Run("stats summary", func(t *testing.T) {
		c.k.t = t
		raw := c.k.must("", "get", "--raw", "/api/v1/nodes/"+c.streamNode+"/proxy/stats/summary")
		var sum statsv1.Summary
		if err := json.Unmarshal([]byte(raw), &sum); err != nil {
			t.Fatalf("decode the summary: %v\n%s", err, raw)
		}
		if sum.Node.NodeName != c.streamNode || sum.Node.Memory == nil || sum.Node.CPU == nil {
			t.Fatalf("node stats %+v", sum.Node)
		}
		found := false
		for _, p := range sum.Pods {
			if p.PodRef.Name == web {
				found = p.Memory != nil && p.Memory.WorkingSetBytes != nil && *p.Memory.WorkingSetBytes > 0
			}
		}
		if !found {
			t.Errorf("the summary of %s has no memory usage for %s: %s", c.streamNode, web, raw)
		}
	})
	for _, pf := range []struct{ name, env string }{
		{"port-forward", ""}, // websocket first, as kubectl does by default
		{"port-forward over SPDY", "KUBECTL_PORT_FORWARD_WEBSOCKETS=false"},
	} {
		t.Run(pf.name, func(t *testing.T) {
			out := c.background(t, []string{pf.env}, "port-forward", "pod/"+web, ":8080")
			re := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 8080`)
			var port string
			eventually(t, 20*time.Second, "port-forward listening", func() (bool, string) {
				if m := re.FindStringSubmatch(out.String()); m != nil {
					port = m[1]
				}
				return port != "", out.String()
			})
			for range 2 { // two connections through one port-forward
				res, body := httpGet(t, "http://127.0.0.1:"+port+"/")
				if res.StatusCode != http.StatusOK || body != "hello from "+web+"\n" {
					t.Errorf("GET through port-forward: %d %q", res.StatusCode, body)
				}
			}
		})
	}
	c.k.t = t
	c.k.must("", "delete", "pod", "ticker", "--wait=false")
}

// background runs kubectl with extra environment until the test ends and returns its output so far.
func (c *agentCluster) background(t *testing.T, env []string, args ...string) *logLines {
	cmd := exec.Command(c.k.bin, append([]string{"--kubeconfig", c.k.kubeconfig}, args...)...)
	cmd.Env = os.Environ()
	for _, kv := range env {
		if kv != "" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out logLines
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Logf("$ kubectl %s\n%s", strings.Join(args, " "), out.String())
	})
	return &out
}

// runIn is run with stdin and extra environment.
func (k *kubectl) runIn(stdin string, env []string, args ...string) (string, error) {
	k.t.Helper()
	saved := k.env
	k.env = env
	defer func() { k.env = saved }()
	return k.run(stdin, args...)
}
