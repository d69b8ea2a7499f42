package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/containerdtest"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/managed"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/registrytest"
	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
	"github.com/wheelhouse-dev/wheelhouse/web/browsertest"
)

// TestQuickStart follows the README's quick start on this machine as `make run` runs it (issue 22): the server
// with its local agent (--local-agent on) on the containerd the agent runs itself, in the host's network, then
// the README's commands verbatim — the kubeconfig command, `kubectl get namespaces`, `kubectl create deployment
// web --image nginx` — and the pod Running, answering on its pod IP and through a Service, and Running in the
// dashboard. No internet here: the node's registries.yaml mirrors docker.io and registry.k8s.io to a local
// registry holding `library/nginx:latest` (the pod server, listening on 8080) and `pause:3.10`, which is how a
// user with a private mirror runs it too.
func TestQuickStart(t *testing.T) {
	requireNamespaces(t)
	if managed.Answers(t.Context(), "/run/containerd/containerd.sock", 2*time.Second) {
		t.Fatal("a system containerd answers on /run/containerd/containerd.sock: this test needs a machine without one")
	}
	reg := registrytest.Start(t, registrytest.Options{})
	reg.Push(t, "pause:3.10", registrytest.MustFromArchive(t, containerdtest.Pause(t).Tar, containerdtest.PauseImage))
	reg.Push(t, "library/nginx:latest", registrytest.MustFromArchive(t, containerdtest.Server(t).Tar, containerdtest.ServerImage))
	regFile := filepath.Join(t.TempDir(), "registries.yaml")
	writeFile(t, regFile, fmt.Sprintf(`mirrors:
  docker.io:
    endpoint: ["https://%[1]s"]
  registry.k8s.io:
    endpoint: ["https://%[1]s"]
configs:
  %[1]q:
    tls:
      ca_file: %[2]s
`, reg.Host, reg.CAFile))

	// make run's server: its data in ./.wheelhouse of the directory it runs in, the local agent's beside it.
	work := t.TempDir()
	bin, kbin := buildBinary(t), kubectlPath(t)
	dataDir := filepath.Join(work, ".wheelhouse")
	srv := startServer(t, bin, []string{"WHEELHOUSE_DATABASE_URL=" + pgtest.NewEmptyDatabase(t),
		"WHEELHOUSE_BOOTSTRAP_TOKEN=" + e2eToken, "WHEELHOUSE_BOOTSTRAP_PASSWORD=" + dashPassword,
		"WHEELHOUSE_REGISTRIES=" + regFile},
		"--data-dir", dataDir, "--listen", net.JoinHostPort("127.0.0.1", freePort(t, "127.0.0.1")), "--local-agent", "on",
		"--local-agent-runtime", "containerd")
	t.Cleanup(func() {
		// As after Ctrl-C in make run: the server stops its agent, which stops its containerd; then what the node
		// leaves behind (pods, the proxy's tables, the pod network) is removed as uninstalling does.
		select {
		case <-srv.exited:
		default:
			srv.stop(t, syscall.SIGTERM)
		}
		if out, err := exec.Command(bin, "agent", "cleanup", "--data-dir", filepath.Join(dataDir, "agent")).CombinedOutput(); err != nil {
			t.Errorf("wheelhouse agent cleanup: %v\n%s", err, out)
		}
	})
	srv.waitReady(t)

	var cs *kubernetes.Clientset
	kubeconfig := filepath.Join(work, "kubeconfig")
	k := &kubectl{t: t, bin: kbin, kubeconfig: kubeconfig}
	steps := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"the README's kubeconfig command", func(t *testing.T) {
			// ./bin/wheelhouse kubeconfig --cluster default --token <token> > kubeconfig (the server's address and
			// data dir given, as this server is not on make run's default port).
			cmd := exec.Command(bin, "kubeconfig", "--cluster", "default", "--token", e2eToken, "--server", srv.url)
			cmd.Dir = work
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("wheelhouse kubeconfig: %v", err)
			}
			writeFile(t, kubeconfig, string(out))
			rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				t.Fatal(err)
			}
			if cs, err = kubernetes.NewForConfig(rc); err != nil {
				t.Fatal(err)
			}
			contains(t, k.must("", "get", "namespaces"), "default", "kube-system")
		}},
		{"the local node runs containerd", func(t *testing.T) {
			eventually(t, 120*time.Second, "the local node Ready", func() (bool, string) {
				nodes, err := cs.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
				if err != nil || len(nodes.Items) != 1 {
					return false, fmt.Sprint(err, nodes)
				}
				ready := readyCondition(&nodes.Items[0])
				return ready.Status == corev1.ConditionTrue && strings.HasPrefix(nodes.Items[0].Status.NodeInfo.ContainerRuntimeVersion, "containerd://"),
					ready.Message + " " + nodes.Items[0].Status.NodeInfo.ContainerRuntimeVersion
			})
			if log := srv.log.String(); !strings.Contains(log, "local agent started") || !strings.Contains(log, `runtime=containerd`) && !strings.Contains(log, `"runtime":"containerd"`) {
				t.Errorf("the server's log does not say its node runs containerd")
			}
		}},
		{"kubectl create deployment web --image nginx", func(t *testing.T) {
			out := k.must("", "create", "deployment", "web", "--image", "nginx")
			contains(t, out, "deployment.apps/web created")
			contains(t, k.must("", "get", "all"), "deployment.apps/web")
			eventually(t, 120*time.Second, "web's pod Running", func() (bool, string) {
				pods, err := cs.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
				if err != nil || len(pods.Items) != 1 {
					return false, fmt.Sprint(err)
				}
				return pods.Items[0].Status.Phase == corev1.PodRunning, podWaiting(&pods.Items[0])
			})
		}},
		{"the pod answers on its IP and through a Service", func(t *testing.T) {
			pods, err := cs.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				t.Fatal(err)
			}
			p := pods.Items[0]
			eventually(t, 30*time.Second, "the pod IP answers", func() (bool, string) {
				body, err := getBody("http://" + net.JoinHostPort(p.Status.PodIP, "8080") + "/")
				return err == nil && strings.Contains(body, "hello from "+p.Name), fmt.Sprint(body, err)
			})
			k.must("", "expose", "deployment", "web", "--port", "80", "--target-port", "8080")
			svc, err := cs.CoreV1().Services("default").Get(t.Context(), "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if t.Failed() { // what the node's proxy programmed, for the failure
					out, _ := exec.Command("nft", "list", "ruleset").CombinedOutput()
					t.Logf("nft list ruleset:\n%s", out)
				}
			}()
			eventually(t, 60*time.Second, "the Service's cluster IP answers", func() (bool, string) {
				body, err := getBody("http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80") + "/")
				return err == nil && strings.Contains(body, "hello from "+p.Name), fmt.Sprint(body, err)
			})
		}},
		{"the dashboard shows it Running", func(t *testing.T) {
			br := browsertest.New(t)
			admin := tab{t: t, ctx: br.NewTab(t), base: srv.url}
			admin.signIn("admin@localhost", dashPassword)
			admin.open("/ui/c/default/r/pods?ns=default&label=app%3Dweb")
			admin.waitJS("web's pod Running", rowsWith("list-region", "Running")+" === 1", 30*time.Second)
			admin.shot("quickstart-pods")
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { k.t = t; s.fn(t) }) {
			return // later steps build on earlier ones
		}
	}
}

// getBody is the body of a GET of url (2 s timeout).
func getBody(url string) (string, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), err
}
