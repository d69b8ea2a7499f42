package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The agent e2e test's steps around restarts and failures: the pods of TestAgents' web Deployment must
// survive an agent restart and a server restart untouched, and move when their node is lost.

// sameWebContainers waits until the web pods are Ready again and checks they run the same containers.
func (c *agentCluster) sameWebContainers(t *testing.T) {
	t.Helper()
	eventually(t, 60*time.Second, "web pods Ready", func() (bool, string) {
		out, _ := c.k.run("", "get", "deploy", "web", "-o", "jsonpath={.status.readyReplicas}")
		return out == "2", out
	})
	for name, id := range c.webContainers(t) {
		if id != c.containerIDs[name] {
			t.Errorf("pod %s runs container %s, was %s", name, id, c.containerIDs[name])
		}
	}
}

// logsWork waits until kubectl logs of every web pod works: the server reaches both agents' tunnels.
func (c *agentCluster) logsWork(t *testing.T) {
	t.Helper()
	for _, name := range c.webOn {
		eventually(t, 60*time.Second, "kubectl logs "+name, func() (bool, string) {
			out, err := c.k.run("", "logs", name)
			return err == nil && strings.Contains(out, "serving on :8080 as "+name), out
		})
	}
}

func (c *agentCluster) testAgentRestart(t *testing.T) {
	a := c.agents["node-a"]
	a.stop(t, syscall.SIGTERM)
	if c.pod(t, c.webOn["node-a"]).Status.Phase != corev1.PodRunning {
		t.Errorf("the pod of node-a is not Running once its agent stopped")
	}
	a.start(t, "") // the identity in the data dir, no join token
	eventually(t, 30*time.Second, "the agent of node-a running again", func() (bool, string) {
		return strings.Count(a.log.String(), `msg="agent running"`) == 2, "log:\n" + a.log.String()
	})
	c.logsWork(t)
	contains(t, c.k.must("", "exec", c.webOn["node-a"], "--", c.podBin, "get", "http://"+c.pod(t, c.webOn["node-b"]).Status.PodIP+":8080/"),
		"hello from "+c.webOn["node-b"])
	c.sameWebContainers(t)
}

func (c *agentCluster) testServerRestart(t *testing.T) {
	c.server.stop(t, syscall.SIGTERM)
	c.server = startServer(c.top, c.bin, c.serverEnv, c.serverArgs...)
	c.server.waitReady(t)
	eventually(t, 60*time.Second, "both nodes Ready", func() (bool, string) {
		out, _ := c.k.run("", "get", "nodes")
		return strings.Count(out, " Ready ") == 2, out
	})
	c.logsWork(t)
	c.sameWebContainers(t)
}

func (c *agentCluster) testNodeLost(t *testing.T) {
	b := c.agents["node-b"]
	lost := c.webOn["node-b"]
	b.stop(t, syscall.SIGKILL)
	eventually(t, 60*time.Second, "node-b NotReady", func() (bool, string) {
		out, _ := c.k.run("", "get", "node", "node-b")
		return strings.Contains(out, "NotReady"), out
	})
	eventually(t, 60*time.Second, "a replacement web pod running on node-a", func() (bool, string) {
		pods, err := c.cs.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err.Error()
		}
		var running []string
		for _, p := range pods.Items {
			if p.Name != c.webOn["node-a"] && p.Spec.NodeName == "node-a" && p.Status.Phase == corev1.PodRunning {
				running = append(running, p.Name)
			}
		}
		return len(running) == 1, fmt.Sprint(running)
	})
	if p := c.pod(t, lost); p.DeletionTimestamp == nil {
		t.Errorf("the pod %s of the lost node is not being deleted", lost)
	}
	contains(t, c.k.must("", "get", "events", "--field-selector", "involvedObject.name="+lost), "TaintManagerEviction")
	// The agent comes back: the node is Ready and the evicted pod's containers are stopped and the pod removed.
	b.start(t, "")
	eventually(t, 60*time.Second, "node-b Ready again", func() (bool, string) {
		out, _ := c.k.run("", "get", "node", "node-b", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True", out
	})
	eventually(t, 60*time.Second, "the evicted pod removed", func() (bool, string) {
		_, err := c.cs.CoreV1().Pods("default").Get(t.Context(), lost, metav1.GetOptions{})
		return err != nil && strings.Contains(err.Error(), "not found"), fmt.Sprint(err)
	})
}

func (c *agentCluster) testDeleteAll(t *testing.T) {
	c.k.must("", "delete", "deployment", "web")
	eventually(t, 60*time.Second, "no pods left", func() (bool, string) {
		out, _ := c.k.run("", "get", "pods", "-o", "name")
		return strings.TrimSpace(out) == "", out
	})
	// The agents removed every sandbox: nothing is left for the test's cleanup to do.
	for name, a := range c.agents {
		eventually(t, 30*time.Second, "the sandboxes of "+name+" removed", func() (bool, string) {
			entries, _ := os.ReadDir(filepath.Join(a.dataDir, "runtime", "sandboxes"))
			return len(entries) == 0, fmt.Sprint(len(entries), " sandboxes")
		})
	}
}

// testCleanup: once node-b's agent has stopped, `wheelhouse agent cleanup` (what the uninstall script runs) leaves
// its namespace without the pod network's bridge, the Service proxy's and the masquerade's nftables tables and
// the host-gw route to node-a's pods.
func (c *agentCluster) testCleanup(t *testing.T) {
	a := c.agents["node-b"]
	a.stop(t, syscall.SIGTERM)
	inNode := func(args ...string) (string, error) {
		out, err := exec.Command("nsenter", append([]string{"--net=" + a.node.nsPath(), "--"}, args...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := inNode("nft", "list", "tables"); err != nil || !strings.Contains(out, "table ip wheelhouse") {
		t.Fatalf("before: nft list tables: %v\n%s", err, out)
	}
	if out, err := inNode("ip", "route", "show", c.nodeCIDRs["node-a"].String()); err != nil || strings.TrimSpace(out) == "" {
		t.Fatalf("before: no route to node-a's pods: %v\n%s", err, out)
	}
	if out, err := inNode(c.bin, "agent", "cleanup", "--containerd-endpoint", filepath.Join(t.TempDir(), "none.sock")); err != nil {
		t.Fatalf("wheelhouse agent cleanup: %v\n%s", err, out)
	}
	if out, err := inNode("nft", "list", "tables"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("nftables tables left: %v\n%s", err, out)
	}
	if out, err := inNode("ip", "link", "show", "wh0"); err == nil {
		t.Errorf("the bridge is left:\n%s", out)
	}
	if out, err := inNode("ip", "route", "show", c.nodeCIDRs["node-a"].String()); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("the route to node-a's pods is left: %v\n%s", err, out)
	}
}
