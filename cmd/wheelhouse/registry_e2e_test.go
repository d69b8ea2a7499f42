package main

import (
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/containerdtest"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/managed"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/registrytest"
)

// TestRegistryPulls drives image pulls from real registries (Debian's docker-registry, TLS from a test CA,
// htpasswd basic auth) on a node whose agent runs its own containerd, configured by a registries.yaml (issue 22):
//
//   - "node" registry: its CA and the node's credentials in registries.yaml; the pause image comes from it (the
//     agent-managed containerd pulls it with the credentials written into its configuration), and pods pull from
//     it with the node's credentials (kubelet's node-level keyring);
//   - "team" registry: its CA in registries.yaml, no node credentials: pods need imagePullSecrets;
//   - "stranger" registry: not in registries.yaml, so its certificate is not trusted.
//
// Each case asserts the container's waiting reason and message, and the pod's events, as kubelet's.
func TestRegistryPulls(t *testing.T) {
	requireNamespaces(t)
	if managed.Answers(t.Context(), "/run/containerd/containerd.sock", 2*time.Second) {
		t.Fatal("a system containerd answers on /run/containerd/containerd.sock: this test needs a machine without one")
	}
	l := newLAN(t, "node-r")
	n := l.nodes[0]
	nodeReg := registrytest.Start(t, registrytest.Options{IP: l.hostIP, Users: map[string]string{"node": "n0de-pass"}})
	teamReg := registrytest.Start(t, registrytest.Options{IP: l.hostIP, Users: map[string]string{"team": "t3am-pass"}})
	stranger := registrytest.Start(t, registrytest.Options{IP: l.hostIP})

	pause := registrytest.MustFromArchive(t, containerdtest.Pause(t).Tar, containerdtest.PauseImage)
	server := registrytest.MustFromArchive(t, containerdtest.Server(t).Tar, containerdtest.ServerImage)
	nodeReg.Push(t, "wheelhouse/pause:1", pause)
	webDigest := nodeReg.Push(t, "apps/web:1", server)
	teamReg.Push(t, "team/web:1", server)
	stranger.Push(t, "apps/web:1", server)

	regFile := filepath.Join(t.TempDir(), "registries.yaml")
	writeFile(t, regFile, fmt.Sprintf(`configs:
  %q:
    auth:
      username: node
      password: n0de-pass
    tls:
      ca_file: %s
  %q:
    tls:
      ca_file: %s
`, nodeReg.Host, nodeReg.CAFile, teamReg.Host, teamReg.CAFile))

	c, token := newAgentCluster(t, l, "/podserver")
	var a *agentProcess
	t.Cleanup(func() { // after the agent is killed, before the node's network goes
		_ = runIn(n, a.bin, "agent", "cleanup", "--data-dir", a.dataDir)
	})
	a = newAgent(t, c.bin, "", c.server.url, n)
	a.args = []string{"--runtime", "containerd", "--registries", regFile, "--pause-image", nodeReg.Ref("wheelhouse/pause:1")}
	a.start(t, token)

	// pod applies a pod of image running the pod server, with pull policy and pull secrets.
	pod := func(t *testing.T, name, image string, policy corev1.PullPolicy, secret string) {
		t.Helper()
		var secrets string
		if secret != "" {
			secrets = "\n  imagePullSecrets: [{name: " + secret + "}]"
		}
		c.k.must(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  terminationGracePeriodSeconds: 1%s
  containers:
  - name: main
    image: %s
    imagePullPolicy: %s
    command: [/podserver, serve]
`, name, secrets, image, policy), "apply", "-f", "-")
	}
	running := func(t *testing.T, name string) *corev1.Pod {
		t.Helper()
		eventually(t, 90*time.Second, name+" Running", func() (bool, string) {
			p := c.pod(t, name)
			return p.Status.Phase == corev1.PodRunning, podWaiting(p)
		})
		return c.pod(t, name)
	}
	// waitingOn waits until the pod's container waits with one of reasons and a message matching msg.
	waitingOn := func(t *testing.T, name string, msg *regexp.Regexp, reasons ...string) {
		t.Helper()
		eventually(t, 60*time.Second, name+" waiting "+strings.Join(reasons, " or "), func() (bool, string) {
			p := c.pod(t, name)
			if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Waiting == nil {
				return false, string(p.Status.Phase)
			}
			w := p.Status.ContainerStatuses[0].State.Waiting
			for _, r := range reasons {
				if w.Reason == r && msg.MatchString(w.Message) {
					return true, ""
				}
			}
			return false, w.Reason + ": " + w.Message
		})
	}
	// event waits for an event of the pod whose "Type Reason Message" matches re.
	event := func(t *testing.T, name string, re *regexp.Regexp) {
		t.Helper()
		eventually(t, 30*time.Second, name+"'s event "+re.String(), func() (bool, string) {
			list, err := c.cs.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{
				FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
			if err != nil {
				return false, err.Error()
			}
			var seen []string
			for _, e := range list.Items {
				s := e.Type + " " + e.Reason + " " + e.Message
				if re.MatchString(s) {
					return true, ""
				}
				seen = append(seen, s)
			}
			return false, strings.Join(seen, "\n")
		})
	}
	q := regexp.QuoteMeta

	steps := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"the node is Ready, its pause image from the registry", func(t *testing.T) {
			eventually(t, 90*time.Second, "node-r Ready", func() (bool, string) {
				node, err := c.cs.CoreV1().Nodes().Get(t.Context(), "node-r", metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				ready := readyCondition(node)
				return ready.Status == corev1.ConditionTrue, ready.Message
			})
		}},
		{"by tag, with the node's credentials", func(t *testing.T) {
			image := nodeReg.Ref("apps/web:1")
			pod(t, "by-tag", image, corev1.PullIfNotPresent, "")
			p := running(t, "by-tag")
			if id := p.Status.ContainerStatuses[0].ImageID; !strings.Contains(id, webDigest.String()) {
				t.Errorf("image ID %q, want the pushed manifest %s", id, webDigest)
			}
			// kubelet's text: the time taken, with the wait for a pull slot, and the image's size.
			event(t, "by-tag", regexp.MustCompile(`^Normal Pulling Pulling image "`+q(image)+`"$`))
			event(t, "by-tag", regexp.MustCompile(`^Normal Pulled Successfully pulled image "`+q(image)+
				`" in [0-9.]+m?s \([0-9.]+m?s including waiting\)\. Image size: [1-9][0-9]+ bytes\.$`))
		}},
		{"by digest", func(t *testing.T) {
			image := nodeReg.Ref("apps/web@" + webDigest.String())
			pod(t, "by-digest", image, corev1.PullIfNotPresent, "")
			running(t, "by-digest")
			event(t, "by-digest", regexp.MustCompile(`^Normal Pulled Container image "`+q(image)+`" already present on machine$`))
		}},
		{"pull policies", func(t *testing.T) {
			present := nodeReg.Ref("apps/web:1")
			pod(t, "never-present", present, corev1.PullNever, "")
			running(t, "never-present")
			event(t, "never-present", regexp.MustCompile(`^Normal Pulled Container image "`+q(present)+`" already present on machine$`))

			absent := nodeReg.Ref("apps/web:2")
			pod(t, "never-absent", absent, corev1.PullNever, "")
			waitingOn(t, "never-absent", regexp.MustCompile(`^Container image "`+q(absent)+`" is not present with pull policy of Never$`), "ErrImageNeverPull")
			event(t, "never-absent", regexp.MustCompile(`^Warning ErrImageNeverPull Container image "`+q(absent)+`" is not present`))

			pod(t, "always", present, corev1.PullAlways, "")
			running(t, "always")
			event(t, "always", regexp.MustCompile(`^Normal Pulled Successfully pulled image "`+q(present)+`" in `))
		}},
		{"pull secrets: a wrong password, then the right one", func(t *testing.T) {
			image := teamReg.Ref("team/web:1")
			secret := func(name, password string) {
				auth := base64.StdEncoding.EncodeToString([]byte("team:" + password))
				c.k.must(fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: %s, namespace: default}
type: kubernetes.io/dockerconfigjson
stringData:
  .dockerconfigjson: '{"auths":{%q:{"auth":%q}}}'
`, name, teamReg.Host, auth), "apply", "-f", "-")
			}
			secret("wrong", "not-the-password")
			pod(t, "wrong-password", image, corev1.PullIfNotPresent, "wrong")
			// The registry's own answer (401 Unauthorized), then the back-off carrying it.
			unauthorized := regexp.MustCompile(`401 Unauthorized`)
			waitingOn(t, "wrong-password", unauthorized, "ErrImagePull", "ImagePullBackOff")
			waitingOn(t, "wrong-password", unauthorized, "ImagePullBackOff")
			event(t, "wrong-password", regexp.MustCompile(`^Warning Failed Failed to pull image "`+q(image)+`": .*401 Unauthorized`))
			event(t, "wrong-password", regexp.MustCompile(`^Warning Failed Error: ErrImagePull$`))
			event(t, "wrong-password", regexp.MustCompile(`^Normal BackOff Back-off pulling image "`+q(image)+`"$`))

			secret("right", "t3am-pass")
			pod(t, "right-password", image, corev1.PullIfNotPresent, "right")
			running(t, "right-password")
		}},
		{"a missing image", func(t *testing.T) {
			image := nodeReg.Ref("apps/absent:1")
			pod(t, "missing", image, corev1.PullIfNotPresent, "")
			notFound := regexp.MustCompile(`not found`)
			waitingOn(t, "missing", notFound, "ErrImagePull", "ImagePullBackOff")
			event(t, "missing", regexp.MustCompile(`^Warning Failed Failed to pull image "`+q(image)+`": .*not found`))
		}},
		{"an unreachable registry", func(t *testing.T) {
			image := l.hostIP + ":" + closedPort(t, l.hostIP) + "/apps/web:1"
			pod(t, "unreachable", image, corev1.PullIfNotPresent, "")
			refused := regexp.MustCompile(`connection refused`)
			waitingOn(t, "unreachable", refused, "ErrImagePull", "ImagePullBackOff")
			event(t, "unreachable", regexp.MustCompile(`^Warning Failed Failed to pull image "`+q(image)+`": .*connection refused`))
		}},
		{"an untrusted certificate", func(t *testing.T) {
			image := stranger.Ref("apps/web:1")
			pod(t, "untrusted", image, corev1.PullIfNotPresent, "")
			unknownCA := regexp.MustCompile(`x509: certificate signed by unknown authority`)
			waitingOn(t, "untrusted", unknownCA, "ErrImagePull", "ImagePullBackOff")
			event(t, "untrusted", regexp.MustCompile(`^Warning Failed Failed to pull image "`+q(image)+`": .*x509: certificate signed by unknown authority`))
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { c.k.t = t; s.fn(t) }) {
			t.Logf("agent log:\n%s", a.log.String())
			return // later steps build on earlier ones
		}
	}
}

// podWaiting says why a pod's first container waits, for failure messages.
func podWaiting(p *corev1.Pod) string {
	if len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Waiting != nil {
		w := p.Status.ContainerStatuses[0].State.Waiting
		return string(p.Status.Phase) + " " + w.Reason + ": " + w.Message
	}
	return string(p.Status.Phase)
}

// closedPort is a TCP port nothing listens on at ip (free when asked; nothing in the test takes it after).
func closedPort(t *testing.T, ip string) string { return freePort(t, ip) }

// runIn runs a command in node n's network namespace.
func runIn(n lanNode, args ...string) error {
	return exec.Command("nsenter", append([]string{"--net=" + n.nsPath(), "--"}, args...)...).Run()
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
